"""The files a distribution installs, tested as installed.

* ``dbus/io.github.reachabilityd.Reachability1.conf`` is loaded into a private
  dbus-daemon of type ``system`` whose default policy is a system bus's (as
  in Debian's ``system.conf``: nobody owns names, no method calls, except
  where a service's file punches a hole). Clients run as real users
  (``nobody``, ``reachabilityd``, root) and the bus answers: who may own the
  name, which interfaces anybody may call, that signals reach everyone.
  The service on that bus is a small stand-in owning the name as root, and
  the real daemon running as its service user, as the unit runs it.
* ``data/reachabilityd.service`` must pass ``systemd-analyze verify`` without
  a single complaint, and ``systemd-analyze security --offline=true`` must
  rate its exposure 2.0 or better.
* The four files installed together under a real systemd (PID 1 of its own
  namespaces) and dbus-daemon: a client's call activates the daemon through
  the activation file and the unit, and the daemon works inside the unit's
  whole sandbox, as its own user, with no capability and nothing writable.
* The activation file, the unit, the policy and ``reachabilityd.sysusers.conf``
  must agree on the bus name, the command and the user; sysusers creates it.

Run as root with Debian's Python (it has python3-gi):

    sudo /usr/bin/python3 -m pytest Tests/Integration/test_install_files.py -v

Without root or a tool a test is skipped with the reason; with ``CI`` set it
fails instead.
"""

import configparser
import json
import os
import pwd
import re
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import tty
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import harness
from harness import contract_members

REPO = Path(__file__).resolve().parents[2]
SERVICE, ROOT_PATH = harness.SERVICE, harness.ROOT_PATH
MANAGER, TARGET = harness.MANAGER_IFACE, harness.TARGET_IFACE
PATH = harness.INTERFACES["Path"]
SERVICE_USER = "reachabilityd"

POLICY = REPO / "dbus" / f"{SERVICE}.conf"
ACTIVATION = REPO / "dbus" / f"{SERVICE}.service"
CONTRACT = REPO / "dbus" / f"{SERVICE}.xml"
UNIT = REPO / "data" / "reachabilityd.service"
SYSUSERS = REPO / "data" / "reachabilityd.sysusers.conf"

# Every interface anybody may call, and nothing else (docs/install.md, "Installing").
ALLOWED_INTERFACES = {
    MANAGER,
    TARGET,
    PATH,
    "org.freedesktop.LogControl1",
    "org.freedesktop.DBus.Properties",
    "org.freedesktop.DBus.Introspectable",
    "org.freedesktop.DBus.Peer",
    "org.freedesktop.DBus.ObjectManager",
}
# What the daemon needs, and so exactly what the unit may leave it.
ADDRESS_FAMILIES = {"AF_UNIX", "AF_NETLINK", "AF_INET", "AF_INET6"}
MAXIMUM_EXPOSURE = 2.0

# The address target the policy tests watch, and its object (sd_bus_path_encode).
LOOPBACK = "127.0.0.1"
LOOPBACK_PATH = ROOT_PATH + "/address/_3127_2e0_2e0_2e1"
# The object with the Path interface while a client holds it (Manager.WatchPath).
PATH_PATH = ROOT_PATH + "/path"
# systemd's log control (systemctl service-log-level): everybody reads, root sets.
LOG_CONTROL = "org.freedesktop.LogControl1"
LOG_CONTROL_PATH = "/org/freedesktop/LogControl1"

CI = bool(os.environ.get("CI"))
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
START_TIMEOUT = 20.0

# The default policy of a system bus, after Debian's /usr/share/dbus-1/system.conf:
# every user may connect; nobody may own a name or send a method call unless
# a service's file allows it; signals and requested replies pass; everybody
# may talk to the bus driver (except UpdateActivationEnvironment). No
# <user> (the test bus runs as root), no service directories, no activation.
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
{system_policy}
  <policy user="root">
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
  </policy>
  <include>{policy}</include>
</busconfig>
"""

# A bus client that runs as whatever user it is started as. It reads a list
# of operations (JSON) on stdin, performs them in order on one connection to
# the bus given as argv[1], and prints one JSON result per operation:
# {"ok": <reply>} or {"error": "<D-Bus error name>", "message": "..."}.
CLIENT = r'''
import json, sys, time
from gi.repository import Gio, GLib

connection = Gio.DBusConnection.new_for_address_sync(
    sys.argv[1],
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
    None, None)
signals = []


def on_signal(_connection, sender, path, interface, member, parameters):
    signals.append({"sender": sender, "path": path, "interface": interface, "member": member,
                    "parameters": parameters.print_(False)})


def failure(error):
    name = Gio.DBusError.get_remote_error(error) or str(error)
    Gio.DBusError.strip_remote_error(error)
    return {"error": name, "message": error.message}


def perform(op):
    kind = op["op"]
    if kind == "own":
        reply = connection.call_sync(
            "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "RequestName",
            GLib.Variant("(su)", (op["name"], 4)), GLib.VariantType("(u)"),
            Gio.DBusCallFlags.NONE, 10000, None)
        return {"ok": reply.unpack()[0]}
    if kind == "call":
        arguments = GLib.Variant(op["signature"], tuple(op["args"])) if op.get("signature") else None
        flags = Gio.DBusCallFlags.NONE if op.get("activate") else Gio.DBusCallFlags.NO_AUTO_START
        reply = connection.call_sync(op["destination"], op["path"], op["interface"], op["method"],
                                     arguments, None, flags, 30000, None)
        return {"ok": reply.print_(False)}
    if kind == "call-without-interface":
        message = Gio.DBusMessage.new_method_call(op["destination"], op["path"], None, op["method"])
        reply, _serial = connection.send_message_with_reply_sync(
            message, Gio.DBusSendMessageFlags.NONE, 10000, None)
        reply.to_gerror()
        return {"ok": reply.get_body().print_(False) if reply.get_body() else "()"}
    if kind == "subscribe":
        connection.signal_subscribe(op["sender"], None, None, None, None,
                                    Gio.DBusSignalFlags.NONE, on_signal)
        # A round trip to the bus driver: the AddMatch is in effect after it.
        connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "GetId", None, None, Gio.DBusCallFlags.NONE, 10000, None)
        return {"ok": "subscribed"}
    if kind == "wait-signal":
        context = GLib.MainContext.default()
        deadline = time.monotonic() + op["timeout"]
        wanted = lambda: any(s["interface"] == op["interface"] and s["member"] == op["member"]
                             for s in signals)
        while not wanted() and time.monotonic() < deadline:
            if not context.iteration(False):
                time.sleep(0.01)
        return {"ok": signals} if wanted() else {"error": "timeout", "message": json.dumps(signals)}
    raise ValueError(kind)


results = []
for op in json.load(sys.stdin):
    try:
        results.append(perform(op))
    except GLib.Error as error:
        results.append(failure(error))
print(json.dumps(results))
'''

# A stand-in for the daemon (which is written in parallel and may not be
# built): owns the name on the bus given as argv[1], exports the root object
# with the contract's interfaces (argv[2]) plus ObjectManager, answers every
# method, and on WatchAddress announces the new object with InterfacesAdded
# as the daemon does. GDBus itself answers Peer, Introspectable and
# Properties. Prints "ready" once it owns the name.
STAND_IN = r'''
import sys
from gi.repository import Gio, GLib

SERVICE, ROOT = "io.github.reachabilityd.Reachability1", "/io/github/reachabilityd/Reachability1"
OBJECT_MANAGER = """<node><interface name="org.freedesktop.DBus.ObjectManager">
  <method name="GetManagedObjects"><arg name="objects" type="a{oa{sa{sv}}}" direction="out"/></method>
  <signal name="InterfacesAdded"><arg type="o"/><arg type="a{sa{sv}}"/></signal>
  <signal name="InterfacesRemoved"><arg type="o"/><arg type="as"/></signal>
</interface></node>"""
DEFAULTS = {"s": "", "o": "/", "g": "", "b": False, "d": 0.0}


def default(signature):
    if signature in DEFAULTS:
        return GLib.Variant(signature, DEFAULTS[signature])
    if signature.startswith("a{"):
        return GLib.Variant(signature, {})
    if signature.startswith("a"):
        return GLib.Variant(signature, [])
    return GLib.Variant(signature, 0)


def escape(label):
    out = "".join(chr(b) if (chr(b).isascii() and (chr(b).isalpha() or (chr(b).isdigit() and i)))
                  else "_%02x" % b for i, b in enumerate(label.encode()))
    return out or "_"


def on_call(connection, sender, path, interface, method, parameters, invocation):
    info = invocation.get_method_info()
    if interface == "org.freedesktop.DBus.ObjectManager":
        invocation.return_value(GLib.Variant("(a{oa{sa{sv}}})", ({},)))
        return
    if method in ("WatchAddress", "WatchHost"):
        name = parameters.unpack()[0]
        child = f"{ROOT}/{'address' if method == 'WatchAddress' else 'host'}/{escape(name)}"
        connection.emit_signal(None, ROOT, "org.freedesktop.DBus.ObjectManager", "InterfacesAdded",
                               GLib.Variant("(oa{sa{sv}})", (child, {SERVICE + ".Target": {
                                   "Name": GLib.Variant("s", name)}})))
        invocation.return_value(GLib.Variant("(o)", (child,)))
        return
    outs = [arg.signature for arg in info.out_args]
    invocation.return_value(GLib.Variant.new_tuple(*[default(s) for s in outs]) if outs else None)


def on_get(connection, sender, path, interface, name):
    return default(node.lookup_interface(interface).lookup_property(name).signature)


node = Gio.DBusNodeInfo.new_for_xml(open(sys.argv[2]).read())
manager = Gio.DBusNodeInfo.new_for_xml(OBJECT_MANAGER)
connection = Gio.DBusConnection.new_for_address_sync(
    sys.argv[1],
    Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
    None, None)
for interface in list(node.interfaces) + list(manager.interfaces):
    where = "/org/freedesktop/LogControl1" if interface.name == "org.freedesktop.LogControl1" else ROOT
    connection.register_object(where, interface, on_call, on_get, None)
reply = connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                             "RequestName", GLib.Variant("(su)", (SERVICE, 4)), GLib.VariantType("(u)"),
                             Gio.DBusCallFlags.NONE, 10000, None)
if reply.unpack()[0] != 1:
    sys.exit(f"stand-in: RequestName answered {reply.unpack()[0]}")
print("ready", flush=True)
GLib.MainLoop().run()
'''


# ---------------------------------------------------------------- helpers


def unavailable(reason: str):
    """Skip, or fail when CI is set: CI never passes by not testing."""
    if CI:
        pytest.fail(f"{reason} (CI is set: a missing requirement is a failure)", pytrace=False)
    pytest.skip(reason)


def need_tool(name: str) -> str:
    path = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin:/usr/bin:/bin")
    if path is None:
        unavailable(f"needs {name}")
    return path


def need_root() -> None:
    if os.geteuid() != 0:
        unavailable("needs root (clients run as other users; the test may create the service user)")


def private_dir(prefix: str) -> Path:
    """A temporary directory every user may traverse (clients run as other users)."""
    base = "/tmp" if len(tempfile.gettempdir()) > 40 else tempfile.gettempdir()
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    path.chmod(0o755)
    return path


def stop(process: subprocess.Popen) -> None:
    """Stop a process this file started, by its PID."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def read_line(process: subprocess.Popen, timeout: float) -> str:
    """The first line a child writes to its stdout pipe, or "" on timeout or exit."""
    ready, _, _ = select.select([process.stdout], [], [], timeout)
    return process.stdout.readline().decode().strip() if ready else ""


def traversable_by_others(path: Path) -> bool:
    """Whether a user without any group of ours can reach and run ``path``."""
    path = path.resolve()
    if not path.stat().st_mode & 0o001:
        return False
    return all(parent.stat().st_mode & 0o001 for parent in path.parents)


def unit_settings(path: Path) -> dict:
    """``{section: {key: [values...]}}`` of a systemd unit file (keys may repeat)."""
    settings: dict = {}
    section = None
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = settings.setdefault(line[1:-1], {})
            continue
        key, _, value = line.partition("=")
        section.setdefault(key.strip(), []).append(value.strip())
    return settings


def unit_value(settings: dict, section: str, key: str) -> str:
    values = settings.get(section, {}).get(key)
    assert values, f"{UNIT.name} sets no {key}= in [{section}]"
    return values[-1]


def activation_settings() -> dict:
    parser = configparser.ConfigParser(interpolation=None, comment_prefixes=("#",))
    parser.optionxform = str
    parser.read(ACTIVATION)
    return dict(parser["D-BUS Service"])


class BusClients:
    """Runs CLIENT as any user against ``self.address``, inside the mount and
    network namespaces of ``self.enter`` (a PID) when that is set."""

    address = ""
    enter = None
    client_script: Path

    def run_as(self, user: str, operations: list) -> list:
        """Perform ``operations`` (see CLIENT) as ``user`` in a fresh client process."""
        entry = pwd.getpwnam(user)
        argv = [PYTHON, str(self.client_script), self.address]
        if entry.pw_uid != os.geteuid():
            argv = [need_tool("setpriv"), f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                    "--clear-groups", "--"] + argv
        if self.enter is not None:
            argv = [need_tool("nsenter"), "-t", str(self.enter), "-m", "-n", "--"] + argv
        environment = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        done = subprocess.run(argv, input=json.dumps(operations).encode(), capture_output=True,
                              env=environment, timeout=120, check=False)
        assert done.returncode == 0, (
            f"the client as {user} failed ({done.returncode}):\n{done.stderr.decode()}")
        results = json.loads(done.stdout)
        print(f"as {user}:")
        for operation, result in zip(operations, results):
            print(f"  {operation} -> {result}")
        return results

    def driver(self, method: str, *args: str) -> str:
        """A call (as root) to the bus driver with string arguments; its printed reply."""
        result = self.run_as("root", [
            {"op": "call", "destination": "org.freedesktop.DBus", "path": "/org/freedesktop/DBus",
             "interface": "org.freedesktop.DBus", "method": method,
             "signature": "(" + "s" * len(args) + ")", "args": list(args)}])[0]
        assert "ok" in result, result
        return result["ok"]

    def owner_uid(self, name: str) -> int:
        """The uid of the connection that owns ``name``."""
        return int(re.fullmatch(r"\((\d+),\)", self.driver("GetConnectionUnixUser", name)).group(1))

    def has_owner(self, name: str) -> bool:
        return self.driver("NameHasOwner", name) == "(true,)"


class PolicyBus(BusClients):
    """A private system bus (dbus-daemon) whose policy includes the shipped file."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.config = directory / "bus.conf"
        self.log = directory / "dbus-daemon.log"
        self.client_script = directory / "client.py"
        self.process = None
        self.services: list = []

    def start(self) -> "PolicyBus":
        socket = self.directory / "system_bus_socket"
        self.config.write_text(BUS_CONFIG.format(socket=socket, policy=POLICY, system_policy=harness.SYSTEM_POLICY))
        self.client_script.write_text(CLIENT)
        self.client_script.chmod(0o644)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [need_tool("dbus-daemon"), f"--config-file={self.config}", "--nofork", "--nopidfile",
                 "--print-address=1"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
        self.address = read_line(self.process, START_TIMEOUT)
        if not self.address:
            raise AssertionError(f"dbus-daemon did not start with the shipped policy:\n{self.log.read_text()}")
        return self

    def wait_for_owner(self, process: subprocess.Popen, log: Path) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.has_owner(SERVICE):
                return
            if process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{process.args[0]} did not take {SERVICE} "
                             f"(exit status {process.poll()}); its log:\n{log.read_text()}")

    def close(self) -> None:
        for service in self.services:
            stop(service)
        if self.process is not None:
            stop(self.process)
            self.process.stdout.close()


def own(name: str = SERVICE) -> dict:
    return {"op": "own", "name": name}


def call(interface: str, method: str, signature: str = "", args=(), path: str = ROOT_PATH) -> dict:
    return {"op": "call", "destination": SERVICE, "path": path, "interface": interface,
            "method": method, "signature": signature, "args": list(args)}


# --------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def service_user():
    """The service's user: it must exist before dbus-daemon loads the policy
    (as reachabilityd.sysusers.conf makes it exist on an installed system)."""
    need_root()
    try:
        pwd.getpwnam(SERVICE_USER)
    except KeyError:
        subprocess.run([need_tool("useradd"), "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        SERVICE_USER], check=True)
    return pwd.getpwnam(SERVICE_USER)


@pytest.fixture
def bus(service_user, request):  # pylint: disable=unused-argument,redefined-outer-name
    """A fresh private system bus with the shipped policy, nothing on it yet."""
    need_tool("dbus-daemon")
    need_tool("setpriv")
    probe = subprocess.run([PYTHON, "-c", "from gi.repository import Gio"], capture_output=True, check=False)
    if probe.returncode != 0:
        unavailable(f"needs python3-gi for {PYTHON}")
    directory = private_dir("reach-policy-")
    policy_bus = PolicyBus(directory)

    def close():
        policy_bus.close()
        shutil.rmtree(directory, ignore_errors=True)

    request.addfinalizer(close)
    return policy_bus.start()


def _daemon_binary() -> Path:
    return Path(os.environ.get("REACHABILITYD") or REPO / ".build" / "debug" / "reachabilityd")


@pytest.fixture(params=["stand-in", "reachabilityd"])
def service(request, bus, service_user):  # pylint: disable=redefined-outer-name
    """Something owning the name on ``bus``: the stand-in (as root), or the
    real daemon as the service user, the way the unit runs it (as root when
    the build directory is closed to other users)."""
    log = bus.directory / f"{request.param}.log"
    environment = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1",
                   "DBUS_SYSTEM_BUS_ADDRESS": bus.address}
    expected_uid = 0
    if request.param == "stand-in":
        script = bus.directory / "stand-in.py"
        script.write_text(STAND_IN)
        argv = [PYTHON, str(script), bus.address, str(CONTRACT)]
    else:
        binary = _daemon_binary()
        if not os.access(binary, os.X_OK):
            unavailable(f"needs the daemon at {binary} (run swift build, or set REACHABILITYD)")
        argv = [str(binary), "--bus", bus.address]
        if traversable_by_others(binary):
            expected_uid = service_user.pw_uid
            argv = [need_tool("setpriv"), f"--reuid={service_user.pw_uid}", f"--regid={service_user.pw_gid}",
                    "--clear-groups", "--"] + argv
    with open(log, "wb") as output:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                   env=environment)
    bus.services.append(process)
    bus.wait_for_owner(process, log)
    assert bus.owner_uid(SERVICE) == expected_uid
    yield request.param
    if process.poll() is not None:
        pytest.fail(f"{request.param} exited during the test ({process.returncode}):\n{log.read_text()}")


# ------------------------------------------------------ the bus policy


def test_policy_allows_exactly_the_listed_interfaces():
    """Every rule is scoped to the service's name (an unscoped
    send_interface rule would open that interface of every service on the
    machine), but one: the service's own users may send Peer.Ping to anyone
    (read receipts), and its own user may ask the bus what it holds for a caller
    (GetConnectionStats, the other witness of reading; root may already) and which bus it is
    (GetStats, asked once at start); Properties.Set is root's alone (the log's level and target, LogControl1);
    the Metrics interface is root's and the adm group's; and the interfaces opened to
    everybody are exactly those docs/dbus-api.md, "The paths per interface" lists."""
    root = ET.parse(POLICY).getroot()
    owners = set()
    allowed = set()
    receipts = set()
    witnesses = set()
    setters = set()
    readers = set()
    for policy in root.iter("policy"):
        for rule in policy:
            attributes = dict(rule.attrib)
            if "own" in attributes or "own_prefix" in attributes:
                assert attributes == {"own": SERVICE}, attributes
                if rule.tag == "allow":
                    owners.add(policy.get("user"))
                continue
            if attributes == SET_RULE:
                # Properties.Set: denied in the default context, allowed to root (the log's settings).
                assert (rule.tag, policy.get("context") or policy.get("user")) in {("deny", "default"),
                                                                                   ("allow", "root")}, attributes
                setters.add((rule.tag, policy.get("context") or policy.get("user")))
                continue
            if attributes == METRICS_RULE:
                # The metrics: root and the adm group, nobody else.
                assert rule.tag == "allow", attributes
                readers.add(policy.get("user") or "group " + (policy.get("group") or "?"))
                continue
            if attributes == RECEIPT_RULE:
                # The one unscoped rule: the service's own users may ask callers for read receipts.
                assert rule.tag == "allow" and policy.get("user") in {"root", SERVICE_USER}, attributes
                receipts.add(policy.get("user"))
                continue
            if attributes in (QUEUE_RULE, STATS_RULE):
                # The bus's word on what a caller has not read, and which bus it is: the service's
                # own user only.
                assert rule.tag == "allow" and policy.get("user") == SERVICE_USER, attributes
                witnesses.add((policy.get("user"), attributes["send_member"]))
                continue
            if rule.tag == "allow" and any(key.startswith("send_") for key in attributes):
                assert attributes.get("send_destination") == SERVICE, f"unscoped rule {attributes}"
                assert set(attributes) == {"send_destination", "send_interface"}, attributes
                allowed.add(attributes["send_interface"])
            if rule.tag == "allow" and any(key.startswith("receive_") for key in attributes):
                assert attributes.get("receive_sender") == SERVICE, f"unscoped rule {attributes}"
            if any(key.startswith("send_") for key in attributes):
                assert policy.get("context") == "default", f"send rule outside the default context: {attributes}"
    assert owners == {"root", SERVICE_USER}
    assert allowed == ALLOWED_INTERFACES
    assert receipts == {"root", SERVICE_USER}
    assert witnesses == {(SERVICE_USER, "GetConnectionStats"), (SERVICE_USER, "GetStats")}
    assert setters == {("deny", "default"), ("allow", "root")}
    assert readers == {"root", "group adm"}


# The metrics, which root and the adm group may read (they name every watched target).
METRICS = SERVICE + ".Metrics"
METRICS_RULE = {"send_destination": SERVICE, "send_interface": METRICS}

# Properties.Set, which only root may send (LogControl1's LogLevel and LogTarget are the only writable properties).
SET_RULE = {"send_destination": SERVICE, "send_interface": "org.freedesktop.DBus.Properties", "send_member": "Set"}

# What the service's users may send to any peer: Peer.Ping, as a read receipt (docs/hardening.md, "Fair to every user").
RECEIPT_RULE = {"send_type": "method_call", "send_interface": "org.freedesktop.DBus.Peer", "send_member": "Ping"}

# What the service's own user may ask the bus driver: what it still holds for a caller (docs/hardening.md, "Fair to every user").
QUEUE_RULE = {"send_destination": "org.freedesktop.DBus", "send_interface": "org.freedesktop.DBus.Debug.Stats",
              "send_member": "GetConnectionStats"}

# What the service's own user may ask the bus driver once at start: which bus it is (GetStats;
# dbus-broker names its figures org.bus1.…), which decides who pays for what a caller leaves unread.
STATS_RULE = {"send_destination": "org.freedesktop.DBus", "send_interface": "org.freedesktop.DBus.Debug.Stats",
              "send_member": "GetStats"}


def test_unprivileged_user_cannot_own_the_name(bus):  # pylint: disable=redefined-outer-name
    [result] = bus.run_as("nobody", [own()])
    assert result.get("error") == "org.freedesktop.DBus.Error.AccessDenied", result


def test_root_can_own_the_name(bus):  # pylint: disable=redefined-outer-name
    [result] = bus.run_as("root", [own()])
    assert result == {"ok": 1}, result  # DBUS_REQUEST_NAME_REPLY_PRIMARY_OWNER


def test_service_user_can_own_the_name(bus):  # pylint: disable=redefined-outer-name
    [result] = bus.run_as(SERVICE_USER, [own()])
    assert result == {"ok": 1}, result


def test_service_user_can_own_only_its_name(bus):  # pylint: disable=redefined-outer-name
    [result] = bus.run_as(SERVICE_USER, [own(SERVICE + "Other")])
    assert result.get("error") == "org.freedesktop.DBus.Error.AccessDenied", result


def test_unprivileged_user_can_call_every_listed_interface(bus, service):  # pylint: disable=redefined-outer-name
    results = bus.run_as("nobody", [
        call("org.freedesktop.DBus.Peer", "Ping"),
        call("org.freedesktop.DBus.Properties", "GetAll", "(s)", [TARGET]),
        call("org.freedesktop.DBus.Properties", "GetAll", "(s)", [MANAGER]),
        call("org.freedesktop.DBus.Properties", "Get", "(ss)", [TARGET, "Status"]),
        call("org.freedesktop.DBus.Introspectable", "Introspect"),
        call("org.freedesktop.DBus.ObjectManager", "GetManagedObjects"),
        call(MANAGER, "Query", "(s)", [LOOPBACK]),
        call(TARGET, "Refresh"),
    ])
    for result in results:
        assert "ok" in result, f"{service}: {result}"
    assert "'Status'" in results[1]["ok"] and "'Flags'" in results[1]["ok"], results[1]
    assert "'Backend'" in results[2]["ok"] and "'Version'" in results[2]["ok"], results[2]
    if service == "reachabilityd":
        assert MANAGER in results[4]["ok"] and TARGET in results[4]["ok"]


def test_unprivileged_user_receives_the_signals(bus, service):  # pylint: disable=redefined-outer-name
    """Watching an address makes the service announce the new object
    (ObjectManager.InterfacesAdded), and a client of another user gets it."""
    results = bus.run_as("nobody", [
        {"op": "subscribe", "sender": SERVICE},
        call(MANAGER, "WatchAddress", "(s)", [LOOPBACK]),
        {"op": "wait-signal", "interface": "org.freedesktop.DBus.ObjectManager", "member": "InterfacesAdded",
         "timeout": 10},
        call(MANAGER, "Release", "(o)", [LOOPBACK_PATH]),
    ])
    for result in results:
        assert "ok" in result, f"{service}: {result}"
    assert LOOPBACK_PATH in results[1]["ok"], results[1]
    assert any(signal["path"] == ROOT_PATH and LOOPBACK_PATH in signal["parameters"]
               for signal in results[2]["ok"]), results[2]


@pytest.mark.parametrize("interface", [
    "org.example.Nope",
    SERVICE,  # the bus name is not an interface
    MANAGER + "2",  # a prefix of a listed interface is not that interface
    "org.freedesktop.DBus.Debug.Stats",
])
def test_unprivileged_user_cannot_call_other_interfaces(bus, service, interface):  # pylint: disable=W0621
    [result] = bus.run_as("nobody", [call(interface, "Method")])
    assert result.get("error") == "org.freedesktop.DBus.Error.AccessDenied", f"{service}: {result}"


def test_method_call_without_interface_is_refused(bus, service):  # pylint: disable=redefined-outer-name
    """The interface field is optional in D-Bus; a call without one must not
    slip past the per-interface rules."""
    [result] = bus.run_as("nobody", [
        {"op": "call-without-interface", "destination": SERVICE, "path": ROOT_PATH, "method": "Ping"}])
    assert result.get("error") == "org.freedesktop.DBus.Error.AccessDenied", f"{service}: {result}"


# ------------------------------------------------------- the systemd unit


def _verify(unit_text: str) -> subprocess.CompletedProcess:
    """``systemd-analyze verify`` of the unit as installed, in a scratch root
    (``--root=``) that holds the unit at its installed path, executable
    stubs at its ExecStart= and ExecReload= paths, and the two units it requires (Type=dbus pulls
    in dbus.socket; default dependencies pull in sysinit.target). Verify
    resolves every path inside that root, so nothing on this machine, present
    or absent, changes the outcome: whatever it prints is about the unit."""
    analyze = need_tool("systemd-analyze")
    root = private_dir("reach-verify-")
    try:
        units = root / "usr/lib/systemd/system"
        units.mkdir(parents=True)
        (units / UNIT.name).write_text(unit_text)
        (units / "sysinit.target").write_text("[Unit]\nDescription=stub of sysinit.target\n")
        (units / "dbus.socket").write_text("[Socket]\nListenStream=/run/dbus/system_bus_socket\n")
        service = unit_settings(units / UNIT.name).get("Service", {})
        for key in ("ExecStart", "ExecReload"):
            for command in service.get(key, []):
                # A bare name (ExecReload=kill ...) is looked up in systemd's fixed PATH.
                executable = command.split()[0]
                stub = root / (executable.lstrip("/") if "/" in executable else f"usr/bin/{executable}")
                stub.parent.mkdir(parents=True, exist_ok=True)
                stub.write_text("#!/bin/sh\nexit 0\n")
                stub.chmod(0o755)
        return subprocess.run([analyze, "verify", "--man=no", f"--root={root}", f"/usr/lib/systemd/system/{UNIT.name}"],
                              capture_output=True, text=True, timeout=120, check=False)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_unit_verifies_without_complaint():
    """verify exits 0 even for some warnings (an unknown key is "ignoring"),
    so the test wants silence, not only the exit status."""
    done = _verify(UNIT.read_text())
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "" and done.stderr.strip() == "", done.stdout + done.stderr


def test_verify_reports_what_is_wrong():
    """The check above is not vacuous: a misspelt key and a missing
    executable in the same set-up are reported."""
    broken = UNIT.read_text().replace("ProtectClock=", "ProtectClok=")
    done = _verify(broken)
    assert "Unknown key 'ProtectClok'" in done.stderr, done.stderr
    broken = UNIT.read_text().replace("ExecStart=", "ExecStartPre=/usr/libexec/absent\nExecStart=", 1)
    done = _verify(broken)
    assert "/usr/libexec/absent is not executable" in done.stderr, done.stderr


def test_unit_exposure_score():
    analyze = need_tool("systemd-analyze")
    done = subprocess.run([analyze, "security", "--offline=true", "--no-pager", str(UNIT)],
                          capture_output=True, text=True, timeout=120, check=False)
    print(done.stdout)
    assert done.returncode == 0, done.stderr
    match = re.search(r"Overall exposure level for reachabilityd\.service:\s*([0-9]+(?:\.[0-9]+)?)\s*(\S+)",
                      done.stdout)
    assert match, f"no overall exposure level in:\n{done.stdout}\n{done.stderr}"
    exposure = float(match.group(1))
    print(f"exposure of {UNIT.name}: {exposure} {match.group(2)}")
    assert exposure <= MAXIMUM_EXPOSURE, [line for line in done.stdout.splitlines() if "✗" in line]


def test_unit_grants_only_what_the_daemon_needs():
    service = unit_settings(UNIT)["Service"]
    assert unit_value(unit_settings(UNIT), "Service", "Type") == "dbus"
    assert service["CapabilityBoundingSet"] == [""], "no capabilities"
    assert service.get("AmbientCapabilities", [""]) == [""]
    assert service["ProtectSystem"] == ["strict"], "no write access to the file system"
    writable = {"ReadWritePaths", "StateDirectory", "RuntimeDirectory", "CacheDirectory", "LogsDirectory",
                "ConfigurationDirectory"}
    assert not writable & set(service), f"writable paths: {writable & set(service)}"
    assert set(" ".join(service["RestrictAddressFamilies"]).split()) == ADDRESS_FAMILIES
    assert "PrivateNetwork" not in service or service["PrivateNetwork"] == ["no"], "it reports the host's network"
    read_only = set(" ".join(service.get("ReadOnlyPaths", [])).split())
    assert {"/run", "/tmp", "/var/tmp", "/dev/shm"} <= read_only, f"ReadOnlyPaths={read_only}"
    for hidden in ("InaccessiblePaths", "TemporaryFileSystem"):
        for value in service.get(hidden, []):
            assert "/sys" not in value, f"{hidden}={value} hides /sys, which the daemon reads"


# ------------------------------------- the unit, run by a real systemd

# PID 1 of a throw-away machine (new PID, mount, network, UTS and IPC
# namespaces, from unshare): a fresh /run, the daemon at its installed path,
# an Ethernet link with a default route (192.0.2.0/24, documentation
# addresses, nothing answers), then systemd booting a target that starts
# only the system bus. Its console is the pseudo-terminal given as $3.
BOOT = r"""#!/bin/bash
set -eu
machine=$1
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
for m in $(awk '$5 ~ "^/run/" {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || true; done
mount -t tmpfs -o mode=755,nosuid,nodev tmpfs /run
mount --bind "$machine/libexec" /usr/libexec
mount --bind "$3" /dev/console
# On a legacy or hybrid cgroup layout /sys/fs/cgroup is a tmpfs shared with
# the host: read-only here, so systemd cannot add to it.
if [ "$(stat -f -c %T /sys/fs/cgroup)" = tmpfs ]; then mount -o remount,bind,ro /sys/fs/cgroup; fi
ip link set lo up
ip link add eth0 type veth peer name peer0
ip addr add 192.0.2.10/24 dev eth0
ip link set eth0 up
ip link set peer0 up
ip route add default via 192.0.2.1
# Nothing answers for the gateway: its entry is permanent (the service would find it dead).
ip neigh replace 192.0.2.1 lladdr 02:00:5e:00:53:01 dev eth0 nud permanent
export SYSTEMD_UNIT_PATH="$machine/units" container=reachabilityd-test
exec "$2" --system --unit=reachabilityd-test.target --log-target=console --show-status=no --log-color=no
"""

# The units beside the shipped one. SYSTEMD_UNIT_PATH holds only these, so
# nothing of this machine's own units starts: stand-ins for the targets the
# default dependencies name, and a system bus whose configuration is the
# distribution's system.conf plus the shipped policy and activation file.
MACHINE_UNITS = {
    "reachabilityd-test.target": "[Unit]\nDefaultDependencies=no\nWants=dbus.socket dbus.service\n",
    "dbus.socket": "[Unit]\nDefaultDependencies=no\n[Socket]\nListenStream=/run/dbus/system_bus_socket\n",
    "dbus.service": ("[Unit]\nDefaultDependencies=no\nRequires=dbus.socket\n[Service]\nType=notify\n"
                     "NotifyAccess=main\nExecStart={dbus_daemon} --config-file={machine}/bus.conf "
                     "--address=systemd: --nofork --nopidfile --systemd-activation --nosyslog\n"),
    "system.slice": "[Unit]\nDefaultDependencies=no\n",
    # Logging only (no journald here): the daemon's output to a file.
    "reachabilityd.service.d/test-log.conf": "[Service]\nStandardOutput=append:{machine}/reachabilityd.log\n",
    **{f"{name}.target": f"[Unit]\nDescription=stand-in for {name}.target\n"
       for name in ("sysinit", "basic", "shutdown", "sockets", "timers", "paths", "slices", "local-fs",
                    "multi-user")},
}
MACHINE_BUS_CONFIG = """<busconfig>
  <include>/usr/share/dbus-1/system.conf</include>
  <servicedir>{machine}/system-services</servicedir>
  <include>{policy}</include>
</busconfig>
"""


def _cgroup_directories() -> list:
    """This process's cgroup directory in every mounted hierarchy."""
    mounts = []
    with open("/proc/self/mountinfo") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            tail = fields.index("-")
            if fields[tail + 1] in ("cgroup", "cgroup2"):
                mounts.append((fields[tail + 1], set(fields[tail + 3].split(",")), fields[3], fields[4]))
    directories = []
    with open("/proc/self/cgroup") as cgroups:
        for line in cgroups:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            for kind, options, root, point in mounts:
                unified = number == "0" and kind == "cgroup2"
                legacy = kind == "cgroup" and controllers and set(controllers.split(",")) <= options
                if (unified or legacy) and (path + "/").startswith(root.rstrip("/") + "/"):
                    directories.append(Path(point) / os.path.relpath(path, root))
                    break
    return directories


class SystemdMachine(BusClients):
    """systemd as PID 1 of its own namespaces, with the shipped unit, policy
    and activation file installed, and the daemon at /usr/libexec. Whatever
    it creates in the cgroup trees stays below a cgroup of its own, removed
    on close."""

    def __init__(self, directory: Path, binary: Path):
        self.directory = directory
        self.binary = binary
        self.client_script = directory / "client.py"
        self.address = "unix:path=/run/dbus/system_bus_socket"
        self.process = None
        self.cgroups: list = []
        self.console = None
        self.console_thread = None

    def _record_console(self, master: int) -> None:
        with open(self.directory / "console", "ab") as log:
            while True:
                try:
                    data = os.read(master, 4096)
                except OSError:
                    data = b""
                if not data:
                    break
                log.write(data)
                log.flush()
        os.close(master)

    def start(self) -> "SystemdMachine":
        machine = self.directory
        systemd = next((p for p in ("/usr/lib/systemd/systemd", "/lib/systemd/systemd") if os.access(p, os.X_OK)),
                       None)
        if systemd is None:
            unavailable("needs systemd (/usr/lib/systemd/systemd)")
        for tool in ("unshare", "nsenter", "ip", "systemctl", "dbus-daemon"):
            need_tool(tool)
        if not Path("/usr/share/dbus-1/system.conf").exists() or not Path("/usr/libexec").is_dir():
            unavailable("needs /usr/share/dbus-1/system.conf (dbus-daemon) and /usr/libexec")
        try:
            pwd.getpwnam("messagebus")
        except KeyError:
            unavailable("needs the messagebus user (dbus-system-bus-common)")
        units = machine / "units"
        (units / "reachabilityd.service.d").mkdir(parents=True)
        shutil.copy(UNIT, units / UNIT.name)
        for name, text in MACHINE_UNITS.items():
            (units / name).write_text(text.format(machine=machine, dbus_daemon=need_tool("dbus-daemon")))
        (machine / "bus.conf").write_text(MACHINE_BUS_CONFIG.format(machine=machine, policy=POLICY))
        (machine / "system-services").mkdir()
        shutil.copy(ACTIVATION, machine / "system-services" / ACTIVATION.name)
        (machine / "libexec").mkdir()
        shutil.copy(self.binary, machine / "libexec" / "reachabilityd")
        (machine / "boot").write_text(BOOT)
        (machine / "boot").chmod(0o755)
        self.client_script.write_text(CLIENT)
        for path in machine.rglob("*"):
            path.chmod(path.stat().st_mode | 0o044 | (0o011 if path.is_dir() else 0))

        tag = f"reachabilityd-test-{os.getpid()}-{machine.name}"
        for directory in _cgroup_directories():
            with_tag = directory / tag
            try:
                with_tag.mkdir()
            except OSError:
                continue
            self.cgroups.append(with_tag)

        def enter_cgroups():  # in the child, before exec: below our own cgroups
            for cgroup in self.cgroups:
                try:
                    with open(cgroup / "cgroup.procs", "w") as procs:
                        procs.write("0")
                except OSError:
                    pass  # a controller that takes no processes before it is configured (cpuset)

        master, self.console = os.openpty()
        tty.setraw(self.console)
        self.console_thread = threading.Thread(target=self._record_console, args=(master,), daemon=True)
        self.console_thread.start()
        with open(machine / "unshare.log", "wb") as log:
            self.process = subprocess.Popen(
                [need_tool("unshare"), "--pid", "--fork", "--kill-child", "--mount", "--net", "--uts", "--ipc",
                 "--propagation", "private", str(machine / "boot"), str(machine), systemd, os.ttyname(self.console)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=enter_cgroups)
        deadline = time.monotonic() + START_TIMEOUT
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        while self.enter is None and time.monotonic() < deadline and self.process.poll() is None:
            pids = children.read_text().split() if children.exists() else []
            if pids:
                self.enter = int(pids[0])
            time.sleep(0.05)
        socket = Path(f"/proc/{self.enter}/root/run/dbus/system_bus_socket")
        while time.monotonic() < deadline and self.process.poll() is None:
            if socket.exists() and self.has_owner("org.freedesktop.systemd1"):
                return self
            time.sleep(0.2)
        raise AssertionError(f"systemd did not bring up the system bus:\n{self.diagnostics()}")

    def systemctl(self, *args: str) -> str:
        done = subprocess.run([need_tool("nsenter"), "-t", str(self.enter), "-a", need_tool("systemctl"),
                               "--no-pager", *args], capture_output=True, text=True, timeout=60, check=False)
        return done.stdout + done.stderr

    def show(self, unit: str, *properties: str) -> dict:
        text = self.systemctl("show", unit, *(f"--property={p}" for p in properties))
        return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)

    def host_pid(self, pid_in_machine: int) -> int:
        """The PID, as this test sees it, of a process of the machine."""
        namespace = os.readlink(f"/proc/{self.enter}/ns/pid")
        for entry in Path("/proc").iterdir():
            try:
                if not entry.name.isdigit() or os.readlink(entry / "ns/pid") != namespace:
                    continue
                nspid = [line for line in (entry / "status").read_text().splitlines() if line.startswith("NSpid:")]
            except OSError:
                continue
            if nspid and int(nspid[0].split()[-1]) == pid_in_machine:
                return int(entry.name)
        raise AssertionError(f"no process {pid_in_machine} in the machine")

    def diagnostics(self) -> str:
        parts = []
        if self.enter is not None and self.process.poll() is None:
            parts.append(self.systemctl("status", "reachabilityd.service", "dbus.service"))
        for name in ("reachabilityd.log", "console", "unshare.log"):
            path = self.directory / name
            if path.exists():
                parts.append(f"--- {name}:\n{path.read_text(errors='replace')[-6000:]}")
        return "\n".join(parts)

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # unshare --kill-child takes systemd, and so the whole machine, with it
        if self.process is not None:
            self.process.wait()
        if self.console is not None:
            os.close(self.console)  # the recorder sees the end once the machine's processes are gone
            self.console_thread.join(timeout=5)
        deadline = time.monotonic() + 10
        for cgroup in self.cgroups:
            below = sorted((p for p in cgroup.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
            for directory in below + [cgroup]:
                while True:
                    try:
                        directory.rmdir()
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.05)


@pytest.fixture
def machine(service_user, request):  # pylint: disable=unused-argument
    need_root()
    probe = subprocess.run([PYTHON, "-c", "from gi.repository import Gio"], capture_output=True, check=False)
    if probe.returncode != 0:
        unavailable(f"needs python3-gi for {PYTHON}")
    binary = _daemon_binary()
    if not os.access(binary, os.X_OK):
        unavailable(f"needs the daemon at {binary} (run swift build, or set REACHABILITYD)")
    directory = private_dir("reach-machine-")
    booted = SystemdMachine(directory, binary)

    def close():
        try:
            booted.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    request.addfinalizer(close)
    return booted.start()


# Mounts the sandboxed daemon may write to: kernel interfaces, not storage.
WRITABLE_API_MOUNTS = ("/proc", "/dev/pts", "/dev/mqueue")


def test_unit_runs_the_daemon_in_its_sandbox(machine, service_user):  # pylint: disable=redefined-outer-name
    """The shipped unit, policy and activation file installed under a real
    systemd and dbus-daemon: an unprivileged client's call activates the
    daemon through systemd; under the unit's whole sandbox it answers (the
    system bus, rtnetlink, the resolver, /sys), as its own user, with no
    capability, under a seccomp filter, and with nothing writable."""
    [ping] = machine.run_as("nobody", [dict(call("org.freedesktop.DBus.Peer", "Ping"), activate=True)])
    assert "ok" in ping, f"{ping}\n{machine.diagnostics()}"
    state = machine.show(UNIT.name, "ActiveState", "SubState", "MainPID", "NRestarts")
    assert state.get("ActiveState") == "active", f"{state}\n{machine.diagnostics()}"

    deadline = time.monotonic() + 10
    while machine.run_as("nobody", [call("org.freedesktop.DBus.Properties", "Get", "(ss)", [TARGET, "Status"])]) \
            != [{"ok": "(<2>,)"}] and time.monotonic() < deadline:
        time.sleep(0.2)
    results = machine.run_as("nobody", [
        call("org.freedesktop.DBus.Properties", "GetAll", "(s)", [TARGET]),
        call(MANAGER, "Query", "(s)", [LOOPBACK]),
        call(MANAGER, "Query", "(s)", ["localhost"]),
        {"op": "subscribe", "sender": SERVICE},
        call(MANAGER, "WatchAddress", "(s)", ["192.0.2.1"]),
        {"op": "wait-signal", "interface": "org.freedesktop.DBus.ObjectManager", "member": "InterfacesAdded",
         "timeout": 10},
    ])
    for result in results:
        assert "ok" in result, f"{result}\n{machine.diagnostics()}"
    internet, loopback, localhost, _, _, _ = (result["ok"] for result in results)
    assert "'Status': <2>" in internet and "'InterfaceType': <'ethernet'>" in internet, internet
    assert "'Interface': <'eth0'>" in internet, internet
    assert loopback.startswith("(196610, 2,"), loopback  # Reachable | IsLocalAddress | IsDirect
    assert "'127.0.0.1'" in localhost or "'::1'" in localhost, localhost

    assert machine.owner_uid(SERVICE) == service_user.pw_uid
    process = machine.host_pid(int(state["MainPID"]))
    status = dict(line.split(":", 1) for line in Path(f"/proc/{process}/status").read_text().splitlines())
    print({key: status[key].strip() for key in ("Uid", "Gid", "CapEff", "CapBnd", "NoNewPrivs", "Seccomp")})
    assert set(status["Uid"].split()) == {str(service_user.pw_uid)}, status["Uid"]
    for capabilities in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(status[capabilities], 16) == 0, f"{capabilities}: {status[capabilities]}"
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"  # a filter is installed
    writable = []
    for line in Path(f"/proc/{process}/mountinfo").read_text().splitlines():
        fields = line.split()
        point, options = fields[4], fields[5].split(",")
        if "rw" in options and not any(point == api or point.startswith(api + "/") for api in WRITABLE_API_MOUNTS):
            writable.append(point)
    assert not writable, f"writable in the daemon's sandbox: {writable}"

    state = machine.show(UNIT.name, "ActiveState", "NRestarts")
    assert state == {"ActiveState": "active", "NRestarts": "0"}, f"{state}\n{machine.diagnostics()}"


# ----------------------------------------------- the files agree with each other


def test_install_files_agree():
    unit = unit_settings(UNIT)
    activation = activation_settings()
    policy = ET.parse(POLICY).getroot()
    contract = ET.parse(CONTRACT).getroot()

    assert activation["Name"] == SERVICE
    assert unit_value(unit, "Service", "BusName") == SERVICE
    assert activation["SystemdService"] == UNIT.name
    assert activation["Exec"] == unit_value(unit, "Service", "ExecStart") == "/usr/libexec/reachabilityd --system"
    assert activation["User"] == unit_value(unit, "Service", "User") == SERVICE_USER
    assert unit_value(unit, "Service", "DynamicUser") in ("yes", "true", "1", "on")
    # Bus-activated: nothing enables it (no [Install]); its pages are named; any exit that
    # systemctl did not ask for is restarted (a stray SIGHUP counts as clean for on-failure).
    assert "Install" not in unit, "reachabilityd.service is started by the bus, never enabled"
    assert "man:reachabilityd(8)" in " ".join(unit["Unit"]["Documentation"])
    assert unit_value(unit, "Service", "Restart") == "always"
    owners = {p.get("user") for p in policy.iter("policy") for rule in p if rule.tag == "allow" and rule.get("own")}
    assert SERVICE_USER in owners
    sysusers = [line.split() for line in SYSUSERS.read_text().splitlines() if line.strip() and line[0] != "#"]
    # The service's user, and the metrics writer's (its unit's User=, in the adm group by the unit).
    writer = unit_settings(UNIT.parent / "reachabilityd-metrics-textfile.service")
    assert [fields[:2] for fields in sysusers] == [["u", SERVICE_USER], ["u", unit_value(writer, "Service", "User")]]
    assert unit_value(writer, "Service", "SupplementaryGroups") == "adm"
    assert "DynamicUser" not in writer.get("Service", {}), "dbus-daemon drops DynamicUser= clients at Hello"
    interfaces = {interface.get("name") for interface in contract.iter("interface")}
    assert {MANAGER, TARGET} <= interfaces
    assert interfaces - {METRICS} <= ALLOWED_INTERFACES, \
        "every interface of the contract is open to callers, but the metrics (root's and adm's)"


def test_sysusers_creates_the_service_user():
    """systemd-sysusers, run on a scratch root, makes the user the policy and
    the unit name: a system user without a login shell."""
    need_root()
    sysusers = need_tool("systemd-sysusers")
    root = private_dir("reach-sysusers-")
    try:
        (root / "etc").mkdir()
        done = subprocess.run([sysusers, f"--root={root}", str(SYSUSERS)], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        entries = [line.split(":") for line in (root / "etc/passwd").read_text().splitlines()]
        [entry] = [entry for entry in entries if entry[0] == SERVICE_USER]
        assert 0 < int(entry[2]) < 1000, entry
        assert entry[6].endswith("nologin"), entry
    finally:
        shutil.rmtree(root, ignore_errors=True)


# Arguments that are valid for every method of the contract, by input signature.
CONTRACT_ARGUMENTS = {"": [], "s": [LOOPBACK], "o": [LOOPBACK_PATH], "ss": [LOOPBACK, LOOPBACK]}


@pytest.mark.parametrize("service", ["reachabilityd"], indirect=True)
def test_unprivileged_user_reaches_every_member_of_the_contract_and_nothing_else(bus, service):  # noqa: W0621
    """Derived from the XML, so that a member added there is covered here: under the shipped
    policy, nobody calls every method and reads every property of every interface (the Path
    interface's on the object WatchPath gives, which the Manager's methods created); a member
    that is not in the XML, on an interface the policy opens, gets the service's UnknownMethod
    (or UnknownProperty) — the policy lets the call through, the service refuses it."""
    contract = contract_members(CONTRACT)
    operations = [call(MANAGER, "WatchAddress", "(s)", [LOOPBACK])]  # Release below needs it held
    expected = []
    assert set(contract) == {MANAGER, TARGET, PATH, LOG_CONTROL, METRICS}, \
        "a new interface: say on which object it is tested"
    for interface in (MANAGER, TARGET, PATH, LOG_CONTROL):  # METRICS: root's and adm's (below)
        path = {PATH: PATH_PATH, LOG_CONTROL: LOG_CONTROL_PATH}.get(interface, ROOT_PATH)
        for method, (ins, _outs) in sorted(contract[interface]["methods"].items()):
            operations.append(call(interface, method, f"({ins})" if ins else "", CONTRACT_ARGUMENTS[ins], path))
            expected.append(f"{interface}.{method}")
        for prop in sorted(contract[interface]["properties"]):
            operations.append(call("org.freedesktop.DBus.Properties", "Get", "(ss)", [interface, prop], path))
            expected.append(f"{interface}.{prop} (property)")
    strangers = [(MANAGER, "Shutdown", ROOT_PATH), (TARGET, "SetFlags", ROOT_PATH), (PATH, "SetFlags", PATH_PATH),
                 ("org.freedesktop.DBus.Peer", "Reboot", ROOT_PATH)]
    for interface, method, path in strangers:
        operations.append(call(interface, method, path=path))
    operations.append(call("org.freedesktop.DBus.Properties", "Get", "(ss)", [TARGET, "Secret"]))
    results = bus.run_as("nobody", operations)
    assert "ok" in results[0], results[0]
    for what, result in zip(expected, results[1:]):
        assert "ok" in result, f"nobody could not use {what}: {result}"
    refused = results[1 + len(expected):]
    for (interface, method, _path), result in zip(strangers, refused):
        assert result.get("error") == "org.freedesktop.DBus.Error.UnknownMethod", f"{interface}.{method}: {result}"
    assert refused[-1].get("error") == "org.freedesktop.DBus.Error.UnknownProperty", refused[-1]


# ------------------------------------------------------ the log's settings (LogControl1)


def busctl_as(bus, user: str, *arguments: str) -> subprocess.CompletedProcess:  # pylint: disable=W0621
    """``busctl`` on ``bus`` as ``user`` (``setpriv``, with the user's groups: the bus reads
    them from the connection), as an administrator or a user types it."""
    argv = [need_tool("busctl"), f"--address={bus.address}", "--no-pager", *arguments]
    entry = pwd.getpwnam(user)
    if entry.pw_uid != os.geteuid():
        argv = [need_tool("setpriv"), f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups",
                "--"] + argv
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8"})
    print(f"as {user}: busctl {' '.join(arguments)} -> {done.returncode} {done.stdout.strip()} {done.stderr.strip()}")
    return done


@pytest.mark.parametrize("service", ["reachabilityd"], indirect=True)
def test_log_control_root_sets_everybody_reads(bus, service):  # pylint: disable=redefined-outer-name
    """``systemctl service-log-level`` through busctl: nobody reads LogLevel, LogTarget and
    SyslogIdentifier; nobody cannot set them (the shipped policy refuses, before the service
    would); root sets them, and nobody then reads root's values."""
    def get(user, name):
        done = busctl_as(bus, user, "get-property", SERVICE, LOG_CONTROL_PATH, LOG_CONTROL, name)
        assert done.returncode == 0, f"{user} cannot read {name}: {done.stderr}"
        return done.stdout.strip()

    def set_(user, name, value):
        return busctl_as(bus, user, "set-property", SERVICE, LOG_CONTROL_PATH, LOG_CONTROL, name, "s", value)

    assert get("nobody", "LogLevel") == 's "info"'
    assert get("nobody", "SyslogIdentifier") == 's "reachabilityd"'
    assert get("nobody", "LogTarget") == 's "console"', "standard error is a file here, not the journal"
    for name, value in (("LogLevel", "debug"), ("LogTarget", "null"), ("SyslogIdentifier", "x")):
        refused = set_("nobody", name, value)
        assert refused.returncode != 0, f"nobody set {name}"
        assert "denied" in refused.stderr.lower(), refused.stderr
    assert get("nobody", "LogLevel") == 's "info"', "a refused Set changed the level"
    done = set_("root", "LogLevel", "debug")
    assert done.returncode == 0, done.stderr
    assert get("nobody", "LogLevel") == 's "debug"'
    done = set_("root", "LogTarget", "null")
    assert done.returncode == 0, done.stderr
    assert get("nobody", "LogTarget") == 's "null"'
    done = set_("root", "LogTarget", "auto")
    assert done.returncode == 0, done.stderr
    assert get("nobody", "LogTarget") == 's "console"'
    # Values the service does not know, and the read-only identifier, are named errors for root too.
    for name, value, message in (("LogLevel", "verbose", 'LogLevel is one of emerg, alert, crit, err, warning, '
                                                          'notice, info, debug, not "verbose"'),
                                 ("LogTarget", "printer", 'not "printer"'),
                                 ("SyslogIdentifier", "x", "is read-only")):
        done = set_("root", name, value)
        assert done.returncode != 0, f"root set {name} to {value}"
        assert message in done.stderr, done.stderr
    assert get("nobody", "LogLevel") == 's "debug"'


# ------------------------------------------------------ the metrics: root and the adm group

ADM_USER = "reachtest-adm"


@pytest.fixture
def adm_user():
    """A system user in the adm group (none exists on a fresh Debian), removed afterwards."""
    need_root()
    created = False
    try:
        pwd.getpwnam(ADM_USER)
    except KeyError:
        subprocess.run([need_tool("useradd"), "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        "--groups", "adm", ADM_USER], check=True)
        created = True
    yield ADM_USER
    if created:
        subprocess.run([need_tool("userdel"), ADM_USER], check=False)


@pytest.mark.parametrize("service", ["reachabilityd"], indirect=True)
def test_metrics_are_roots_and_adms(adm_user, bus, service):  # pylint: disable=redefined-outer-name
    """Metrics.Read and Follow under the shipped policy: root and a member of adm get the
    text; nobody is refused by the bus (AccessDenied), and sees no text."""
    def read(user, method="Read"):
        return busctl_as(bus, user, "call", SERVICE, ROOT_PATH, METRICS, method)

    for user in ("root", adm_user):
        done = read(user)
        assert done.returncode == 0, f"{user}: {done.stderr}"
        assert done.stdout.startswith('s "') and "reachability_target_reachable" in done.stdout, done.stdout
        assert read(user, "Follow").returncode == 0
    for method in ("Read", "Follow"):
        refused = read("nobody", method)
        assert refused.returncode != 0 and "denied" in refused.stderr.lower(), refused
        assert "reachability_" not in refused.stdout
