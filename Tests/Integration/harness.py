"""Integration-test harness for reachabilityd.

Everything the integration tests need to run the real daemon against real
programs, isolated from the machine and from each other:

* :class:`PrivateBus` -- a dbus-daemon of type ``system`` with a generated
  configuration, listening on a socket in a private temporary directory.
* :class:`Namespaces` -- network namespaces with names unique to this test
  session (several harnesses can run side by side).
* :class:`Dnsmasq` and :class:`ConncheckServer` -- the "upstream" host's DNS
  server and NetworkManager's connectivity-check web server (whose answer can
  be switched to trigger the captive-portal state, and which can be stopped
  to trigger the limited state).
* :class:`NetworkManager` -- the real NetworkManager, in its own network
  namespace and private mount namespace, reading a generated configuration
  and one static Ethernet profile.
* :class:`NMLab` -- all of the above wired together: two namespaces joined by
  a veth pair (``nmveth0`` on NetworkManager's side, ``upveth0`` upstream),
  ``192.0.2.0/24`` and ``2001:db8:1::/64``.
* :class:`Daemon` -- reachabilityd as a separate process, its stderr kept in
  a log file, started and stopped by PID.
* :class:`BusClient` and :class:`SignalRecorder` -- property reads, method
  calls and D-Bus errors through Gio; a recorder of ``PropertiesChanged`` and
  ``StatusChanged`` that lets a test wait, bounded and with a clear failure
  message, for a condition.

Waiting is driven by D-Bus signals wherever one exists (the GLib main context
is iterated until the condition holds or the deadline passes). Readiness of
external programs with no signal to wait for (a process binding its socket)
is checked at short intervals, always with a deadline.

Every process is started by this module and stopped by its PID; every
namespace is deleted by name. Nothing is ever killed by process name.

The module needs Python 3.9+, python3-gi (Gio) and, for the NetworkManager
parts, root, ``ip`` (iproute2), ``nsenter``/``unshare`` (util-linux),
``NetworkManager`` and ``dnsmasq``. :func:`requirements` lists what is
missing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

try:
    import gi

    gi.require_version("Gio", "2.0")
    gi.require_version("GLib", "2.0")
    from gi.repository import Gio, GLib
except (ImportError, ValueError):  # reported by requirements()
    Gio = GLib = None

# --- names and constants -------------------------------------------------------

REPO = Path(__file__).resolve().parents[2]
CONTRACT_XML = REPO / "dbus" / "io.github.reachabilityd.Reachability1.xml"



def _contract_names(xml_path: Path = CONTRACT_XML) -> tuple:
    """The service's name, root path and interfaces, read from the contract (never spelled here)."""
    text = xml_path.read_text()
    interfaces = {i.get("name").rsplit(".", 1)[1]: i.get("name")
                  for i in ElementTree.fromstring(text).findall("interface")}
    service = text.split("Bus name:", 1)[1].split()[0]
    root = text.split("Root object:", 1)[1].split()[0]
    return service, root, interfaces


SERVICE, ROOT_PATH, INTERFACES = _contract_names()
MANAGER_IFACE = INTERFACES["Manager"]
TARGET_IFACE = INTERFACES["Target"]

DBUS_NAME = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"
PROPERTIES_IFACE = "org.freedesktop.DBus.Properties"
INTROSPECTABLE_IFACE = "org.freedesktop.DBus.Introspectable"
PEER_IFACE = "org.freedesktop.DBus.Peer"
OBJECT_MANAGER_IFACE = "org.freedesktop.DBus.ObjectManager"
STANDARD_IFACES = (PROPERTIES_IFACE, INTROSPECTABLE_IFACE, PEER_IFACE, OBJECT_MANAGER_IFACE)

NM_NAME = "org.freedesktop.NetworkManager"
NM_PATH = "/org/freedesktop/NetworkManager"
NM_IFACE = "org.freedesktop.NetworkManager"

# SCNetworkReachabilityFlags (Apple's values)
TRANSIENT_CONNECTION = 1 << 0
REACHABLE = 1 << 1
CONNECTION_REQUIRED = 1 << 2
CONNECTION_ON_TRAFFIC = 1 << 3
INTERVENTION_REQUIRED = 1 << 4
CONNECTION_ON_DEMAND = 1 << 5
IS_LOCAL_ADDRESS = 1 << 16
IS_DIRECT = 1 << 17
IS_WWAN = 1 << 18
FLAG_NAMES = (
    (TRANSIENT_CONNECTION, "TransientConnection"),
    (REACHABLE, "Reachable"),
    (CONNECTION_REQUIRED, "ConnectionRequired"),
    (CONNECTION_ON_TRAFFIC, "ConnectionOnTraffic"),
    (INTERVENTION_REQUIRED, "InterventionRequired"),
    (CONNECTION_ON_DEMAND, "ConnectionOnDemand"),
    (IS_LOCAL_ADDRESS, "IsLocalAddress"),
    (IS_DIRECT, "IsDirect"),
    (IS_WWAN, "IsWWAN"),
)

# AFNetworking's status values
STATUS_UNKNOWN, STATUS_NOT_REACHABLE, STATUS_WWAN, STATUS_WIFI_ETHERNET = -1, 0, 1, 2

# NetworkManager values
NM_STATE_DISCONNECTED = 20
NM_STATE_CONNECTED_SITE = 60
NM_STATE_CONNECTED_GLOBAL = 70
NM_CONNECTIVITY = {0: "unknown", 1: "none", 2: "portal", 3: "limited", 4: "full"}

# Addresses of the lab: documentation prefixes only.
NM_IFNAME = "nmveth0"
UPSTREAM_IFNAME = "upveth0"
UPSTREAM_V4, UPSTREAM_V6 = "192.0.2.1", "2001:db8:1::1"
NM_V4, NM_V6 = "192.0.2.10", "2001:db8:1::10"
SOMEHOST = ("somehost.test", "192.0.2.50", "2001:db8:1::50")
CONNCHECK_HOST = "conncheck.test"
CONNCHECK_OK = "reachabilityd conncheck: online\n"
CONNCHECK_PORTAL = "<html><body>Please sign in to the hotspot</body></html>\n"

# Deadlines (seconds). Generous: they bound failures, they do not pace tests.
START_TIMEOUT = float(os.environ.get("REACH_TEST_START_TIMEOUT", "30"))
CHANGE_TIMEOUT = float(os.environ.get("REACH_TEST_CHANGE_TIMEOUT", "15"))
CALL_TIMEOUT = 10.0
STOP_TIMEOUT = 5.0


# Labs not closed yet: closed at interpreter exit if a test run is interrupted.
_OPEN_LABS: list = []


@atexit.register
def _close_open_labs() -> None:
    for lab in list(_OPEN_LABS):
        with contextlib.suppress(Exception):
            lab.close()


# --- small helpers ------------------------------------------------------------


class HarnessError(RuntimeError):
    """The test environment itself could not be set up (not a daemon bug)."""


class WaitTimeout(AssertionError):
    """A bounded wait ran out; the message says what was awaited and what was seen."""


def daemon_binary() -> Path:
    """The reachabilityd executable under test: ``$REACHABILITYD`` or the debug build."""
    # Absolute: the daemon is started through nsenter, whose working directory may differ.
    return Path(os.environ.get("REACHABILITYD") or REPO / ".build" / "debug" / "reachabilityd").resolve()


def tool(name: str) -> Optional[str]:
    """Absolute path of a command, also looking in the sbin directories."""
    found = shutil.which(name)
    if found:
        return found
    for directory in ("/usr/sbin", "/sbin", "/usr/bin", "/bin"):
        candidate = Path(directory, name)
        if os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def need_tool(name: str) -> str:
    found = tool(name)
    if found is None:
        raise HarnessError(f"the {name} command is not installed")
    return found


def requirements(*, root: bool = True, networkmanager: bool = True, daemon: bool = True) -> list:
    """What this machine lacks to run a kind of test (an empty list when nothing).

    ``root``: network namespaces; ``networkmanager``: NetworkManager, dnsmasq,
    iproute2, util-linux; ``daemon``: the reachabilityd binary."""
    missing = []
    if Gio is None:
        missing.append(f"python3-gi (gi.repository.Gio) for {sys.executable}")
    if root and os.geteuid() != 0:
        missing.append("root (network namespaces, NetworkManager)")
    tools = ["dbus-daemon"]
    if networkmanager:
        tools += ["ip", "nsenter", "unshare", "mount", "NetworkManager", "dnsmasq"]
    for name in tools:
        if tool(name) is None:
            missing.append(f"the {name} command")
    if daemon and not os.access(daemon_binary(), os.X_OK):
        missing.append(f"the daemon at {daemon_binary()} (run swift build, or set REACHABILITYD)")
    return missing


def fmt_flags(flags: Optional[int]) -> str:
    """``0x16 (Reachable ConnectionRequired InterventionRequired)``."""
    if not isinstance(flags, int):
        return repr(flags)
    words = [name for bit, name in FLAG_NAMES if flags & bit]
    unknown = flags & ~sum(bit for bit, _ in FLAG_NAMES)
    if unknown:
        words.append(f"unknown bits {unknown:#x}")
    return f"{flags:#x} ({' '.join(words) or 'none'})"


def fmt_props(props: Optional[dict], keys: Optional[Iterable[str]] = None) -> str:
    """A one-line rendering of (some of) a Target's properties."""
    if props is None:
        return "(not read)"
    keys = list(keys) if keys is not None else sorted(props)
    shown = []
    for key in keys:
        if key not in props:
            continue
        value = props[key]
        shown.append(f"{key}={fmt_flags(value) if key == 'Flags' else repr(value)}")
    return ", ".join(shown) or "(none)"


def tail(path: Optional[Path], lines: int = 200) -> str:
    """The last lines of a log file ("" when it does not exist)."""
    if path is None:
        return ""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    chunks = text.splitlines()
    if len(chunks) > lines:
        return f"[... {len(chunks) - lines} earlier lines ...]\n" + "\n".join(chunks[-lines:])
    return "\n".join(chunks)


def main_context():
    """The GLib main context signal callbacks are dispatched in."""
    return GLib.MainContext.default()


def pump(context=None) -> None:
    """Dispatch everything that is already pending, without blocking."""
    context = context or main_context()
    while context.pending():
        context.iteration(False)


@contextlib.contextmanager
def metrics_changes(client: "BusClient"):
    """``client`` follows the service's metrics (``Metrics.Follow``) within the block: a list
    that grows by one with each ``Metrics.Changed`` it receives (dispatched by ``pump``)."""
    changes: list = []
    subscription = client.conn.signal_subscribe(SERVICE, SERVICE + ".Metrics", "Changed", ROOT_PATH, None, 0,
                                                lambda *_: changes.append(1))
    try:
        client.call(SERVICE, ROOT_PATH, SERVICE + ".Metrics", "Follow")
        yield changes
    finally:
        client.conn.signal_unsubscribe(subscription)


def thread_wakeups(pid: int) -> dict:
    """``{thread id: voluntary plus involuntary context switches}`` of a process now."""
    switches = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            lines = (task / "status").read_text().splitlines()
            switches[task.name] = sum(int(line.split()[1]) for line in lines
                                      if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))
    return switches


def threads_asleep(pid: int, within: float = 1.0) -> bool:
    """Wait (at most ``within`` s) until every thread of ``pid`` is asleep. A thread's switches
    are counted when it goes to sleep: one still running the last of its work (the line it has
    just printed) would be counted once more as it reaches its poll, a wake-up that is not one.
    False if some thread was still running at the end (a busy thread: its count will show it)."""
    deadline = time.monotonic() + within
    while True:
        states = []
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError, IndexError):
                # The state follows the command name, which may itself hold spaces and ')'.
                states.append((task / "stat").read_text().rsplit(")", 1)[1].split()[0])
        if all(state in "SDITt" for state in states) or time.monotonic() >= deadline:
            return all(state in "SDITt" for state in states)
        time.sleep(0.002)


def idle_wakeups(pid: int, seconds: float) -> dict:
    """``{thread id: wake-ups}`` over ``seconds`` of a process left alone, for the threads alive
    the whole time and woken at least once (a thread that ends meanwhile, such as a thread pool's
    idle worker timing out, is not counted: it does not come back). The window opens once every
    thread is asleep (see threads_asleep). Observing idleness takes the time it observes."""
    threads_asleep(pid)
    before = thread_wakeups(pid)
    time.sleep(seconds)
    after = thread_wakeups(pid)
    return {thread: after[thread] - before[thread] for thread in before.keys() & after.keys()
            if after[thread] != before[thread]}


def wait_until(
    condition: Callable[[], Any],
    timeout: float,
    what: str,
    describe: Optional[Callable[[], str]] = None,
    poll: Optional[float] = None,
):
    """Iterate the GLib main context until ``condition()`` is truthy; return its value.

    Signals (D-Bus) wake the loop, so a condition fed by signals is seen at
    once. ``poll`` (seconds) additionally re-checks at that interval, for
    conditions that no signal announces (a process exiting). When ``timeout``
    passes, raise :class:`WaitTimeout` naming ``what`` and, if given, the
    output of ``describe()``."""
    context = main_context()
    deadline = time.monotonic() + timeout
    while True:
        pump(context)
        result = condition()
        if result:
            return result
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            message = f"timed out after {timeout:.1f} s waiting for {what}"
            if describe is not None:
                message += "\n" + describe()
            raise WaitTimeout(message)
        step = remaining if poll is None else min(remaining, poll)
        source = GLib.timeout_source_new(max(1, int(step * 1000)))
        source.set_callback(lambda *_: False)
        source.attach(context)
        try:
            context.iteration(True)
        finally:
            source.destroy()


def read_line(stream, timeout: float) -> Optional[str]:
    """One line from a pipe, or None when nothing came within ``timeout`` or it closed. The
    pipe must be unbuffered (``bufsize=0``) when more lines may follow: select() cannot see the
    lines a buffered reader has already taken from it."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        return None
    line = stream.readline()
    return line.decode(errors="replace") if isinstance(line, bytes) else (line or None)


def short_tmpdir(prefix: str = "reach-") -> Path:
    """A new private directory for sockets and state, never under /run (the
    NetworkManager namespace mounts its own /run) and short enough for
    AF_UNIX socket paths."""
    base = tempfile.gettempdir()
    if base == "/run" or base.startswith("/run/") or len(base) > 40:
        base = "/tmp"
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=base))
    path.chmod(0o755)
    return path


def contract_members(xml_path: Path = CONTRACT_XML) -> dict:
    """The contract XML as ``{interface: {"methods": {...}, "signals": {...}, "properties": {...}}}``.

    Methods map to ``(in signature, out signature)``, signals to their
    signature, properties to ``(type, access, EmitsChangedSignal or None)``."""
    tree = ElementTree.parse(xml_path)
    result = {}
    for interface in tree.getroot().iter("interface"):
        methods, signals, properties = {}, {}, {}
        for method in interface.findall("method"):
            args = method.findall("arg")
            ins = "".join(a.get("type") for a in args if a.get("direction", "in") == "in")
            outs = "".join(a.get("type") for a in args if a.get("direction") == "out")
            methods[method.get("name")] = (ins, outs)
        for sig in interface.findall("signal"):
            signals[sig.get("name")] = "".join(a.get("type") for a in sig.findall("arg"))
        for prop in interface.findall("property"):
            emits = None
            for annotation in prop.findall("annotation"):
                if annotation.get("name") == "org.freedesktop.DBus.Property.EmitsChangedSignal":
                    emits = annotation.get("value")
            properties[prop.get("name")] = (prop.get("type"), prop.get("access"), emits)
        result[interface.get("name")] = {"methods": methods, "signals": signals, "properties": properties}
    return result


# --- processes ----------------------------------------------------------------


class Process:
    """A child process with its output in a log file; stopped by PID only."""

    def __init__(self, name: str, argv: list, log: Path, env: Optional[dict] = None,
                 stdout_pipe: bool = False):
        self.name = name
        self.argv = [str(a) for a in argv]
        self.log = log
        with open(log, "ab") as out:
            shown = " ".join(a if len(a) < 120 and "\n" not in a else "<script>" for a in self.argv)
            out.write(f"===== {time.strftime('%H:%M:%S')} starting: {shown}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdout_pipe else out,
                stderr=out,
                env=env,
                start_new_session=True,  # a Ctrl-C of pytest does not reach it first
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    @property
    def returncode(self) -> Optional[int]:
        return self.popen.poll()

    def send_signal(self, signum: int) -> None:
        if self.running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def stop(self, timeout: float = STOP_TIMEOUT, signum: int = signal.SIGTERM) -> Optional[int]:
        """Send ``signum`` (SIGTERM), wait up to ``timeout``, then SIGKILL. Returns the exit status."""
        if self.running:
            self.send_signal(signum)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.send_signal(signal.SIGKILL)
                self.popen.wait(STOP_TIMEOUT)
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        return self.popen.returncode

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""


# --- D-Bus --------------------------------------------------------------------


BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
{policy}
{extra}
</busconfig>
"""

OPEN_POLICY = """  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_type="method_return"/>
    <allow send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="signal"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
  </policy>"""


# The default policy of a system bus, after Debian's /usr/share/dbus-1/system.conf:
# every user may connect; nobody owns a name or sends a method call unless a service's
# file allows it; signals and requested replies pass; everybody may talk to the bus
# driver (except UpdateActivationEnvironment, and the statistics, which only root may read).
SYSTEM_POLICY = """  <policy context="default">
    <allow user="*"/>
    <deny own="*"/>
    <deny send_type="method_call"/>
    <allow send_type="signal"/>
    <allow send_requested_reply="true" send_type="method_return"/>
    <allow send_requested_reply="true" send_type="error"/>
    <allow receive_type="method_call"/>
    <allow receive_type="method_return"/>
    <allow receive_type="error"/>
    <allow receive_type="signal"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"
          send_member="UpdateActivationEnvironment"/>
    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Debug.Stats"/>
  </policy>
  <policy user="root">
    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Debug.Stats"/>
  </policy>"""


class PrivateBus:
    """A dbus-daemon of type ``system`` on a socket in ``directory``.

    By default one policy allows everyone everything. ``policy`` replaces it
    and ``extra_config`` is inserted verbatim (for example ``<include>`` of the
    project's shipped policy file, to test it). No service directories, no
    ``<user>``: nothing is ever activated."""

    def __init__(self, directory: Path, name: str = "bus", policy: str = OPEN_POLICY, extra_config: str = ""):
        self.directory = Path(directory)
        self.name = name
        self.socket = self.directory / f"{name}.sock"
        self.config = self.directory / f"{name}.conf"
        self.log = self.directory / f"{name}.log"
        self.policy = policy
        self.extra_config = extra_config
        self.process: Optional[Process] = None
        self.address: Optional[str] = None

    def start(self, timeout: float = START_TIMEOUT) -> str:
        """Start the bus and return its address once it accepts connections."""
        self.config.write_text(BUS_CONFIG.format(socket=self.socket, policy=self.policy, extra=self.extra_config))
        self.process = Process(
            f"dbus-daemon ({self.name})",
            [need_tool("dbus-daemon"), f"--config-file={self.config}", "--nofork", "--nopidfile",
             "--print-address=1"],
            self.log,
            stdout_pipe=True,
        )
        line = read_line(self.process.popen.stdout, timeout)
        if not line or not line.strip():
            raise HarnessError(f"dbus-daemon did not start:\n{self.process.log_text()}")
        self.address = line.strip()
        return self.address

    def client(self) -> "BusClient":
        """A new client connection to this bus."""
        return BusClient(self.address)

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


class DBusCallError(Exception):
    """A D-Bus method call returned an error; ``name`` is the D-Bus error name."""

    def __init__(self, name: str, message: str):
        super().__init__(f"{name}: {message}")
        self.name = name
        self.message = message


def _unpack(variant):
    return None if variant is None else variant.unpack()


class BusClient:
    """A Gio connection to a bus, with the few calls the tests need.

    Values come back as plain Python values (``Variant.unpack()``); D-Bus
    errors are raised as :class:`DBusCallError` carrying the error name."""

    def __init__(self, address: str):
        self.address = address
        flags = (Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
                 | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION)
        self.conn = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
        self.conn.set_exit_on_close(False)

    def close(self) -> None:
        with contextlib.suppress(GLib.Error):
            self.conn.close_sync(None)

    def call(self, dest: str, path: str, interface: str, method: str, signature: str = "", args: tuple = (),
             timeout: float = CALL_TIMEOUT, auto_start: bool = False) -> tuple:
        """Call a method; return the unpacked reply tuple. ``auto_start``: the bus may start
        the destination for the call (by default it may not)."""
        parameters = GLib.Variant(f"({signature})", tuple(args)) if signature else None
        flags = Gio.DBusCallFlags.NONE if auto_start else Gio.DBusCallFlags.NO_AUTO_START
        try:
            reply = self.conn.call_sync(dest, path, interface, method, parameters, None,
                                        flags, int(timeout * 1000), None)
        except GLib.Error as error:
            name = Gio.DBusError.get_remote_error(error) or f"(local error) {error.domain}:{error.code}"
            Gio.DBusError.strip_remote_error(error)
            raise DBusCallError(name, error.message) from None
        return tuple(_unpack(reply) or ())

    def call_error(self, *args, **kwargs) -> Optional[DBusCallError]:
        """Like :meth:`call`, but return the error (or None when the call succeeded)."""
        try:
            self.call(*args, **kwargs)
        except DBusCallError as error:
            return error
        return None

    def get(self, dest: str, path: str, interface: str, name: str):
        return self.call(dest, path, PROPERTIES_IFACE, "Get", "ss", (interface, name))[0]

    def get_all(self, dest: str, path: str, interface: str) -> dict:
        return dict(self.call(dest, path, PROPERTIES_IFACE, "GetAll", "s", (interface,))[0])

    def get_all_typed(self, dest: str, path: str, interface: str) -> dict:
        """GetAll, keeping each value's D-Bus type: ``{name: (type string, value)}``."""
        parameters = GLib.Variant("(s)", (interface,))
        reply = self.conn.call_sync(dest, path, PROPERTIES_IFACE, "GetAll", parameters, None,
                                    Gio.DBusCallFlags.NO_AUTO_START, int(CALL_TIMEOUT * 1000), None)
        result = {}
        vardict = reply.get_child_value(0)
        for i in range(vardict.n_children()):
            entry = vardict.get_child_value(i)
            key = entry.get_child_value(0).get_string()
            value = entry.get_child_value(1).get_variant()
            result[key] = (value.get_type_string(), value.unpack())
        return result

    def name_owner(self, name: str) -> Optional[str]:
        try:
            return self.call(DBUS_NAME, DBUS_PATH, DBUS_NAME, "GetNameOwner", "s", (name,))[0]
        except DBusCallError:
            return None

    def wait_for_name(self, name: str, timeout: float = START_TIMEOUT,
                      alive: Optional[Callable[[], bool]] = None, describe: Optional[Callable[[], str]] = None) -> str:
        """Wait until ``name`` has an owner; return the owner's unique name.

        ``alive`` (optional) is checked too: when it turns false (the process
        that should take the name exited) the wait fails at once."""
        state = {"dead": False}

        def owned():
            owner = self.name_owner(name)
            if owner:
                return owner
            if alive is not None and not alive():
                state["dead"] = True
                return "dead"
            return None

        subscription = self.conn.signal_subscribe(DBUS_NAME, DBUS_NAME, "NameOwnerChanged", DBUS_PATH, name,
                                                  Gio.DBusSignalFlags.NONE, lambda *_: None)
        try:
            owner = wait_until(owned, timeout, f"the bus name {name} to be owned", describe, poll=0.05)
        finally:
            self.conn.signal_unsubscribe(subscription)
        if state["dead"]:
            raise HarnessError(f"the process meant to own {name} exited first"
                               + ("\n" + describe() if describe else ""))
        return owner

    def wait_for_name_gone(self, name: str, timeout: float = START_TIMEOUT) -> None:
        wait_until(lambda: self.name_owner(name) is None, timeout, f"the bus name {name} to be released",
                   poll=0.05)


class Event:
    """One recorded signal.

    ``kind`` is ``"properties"`` (PropertiesChanged; ``interface`` is the
    changed interface, ``changed`` the new values, ``invalidated`` the names)
    or ``"status"`` (StatusChanged; ``status`` and ``flags``) or ``"other"``.
    ``target`` is a copy of the recorder's mirror of the Target properties
    right after this event was applied."""

    def __init__(self, index: int, member: str, interface: str, args: tuple, target: dict):
        self.index = index
        self.time = time.monotonic()
        self.member = member
        self.signal_interface = interface
        self.args = args
        self.kind = "other"
        self.interface = interface
        self.changed: dict = {}
        self.invalidated: list = []
        self.status: Optional[int] = None
        self.flags: Optional[int] = None
        if member == "PropertiesChanged" and interface == PROPERTIES_IFACE:
            self.kind = "properties"
            self.interface, changed, invalidated = args
            self.changed = dict(changed)
            self.invalidated = list(invalidated)
        elif member == "StatusChanged" and interface == TARGET_IFACE:
            self.kind = "status"
            self.status, self.flags = args
        self.target = target

    def __repr__(self) -> str:
        if self.kind == "status":
            return f"#{self.index} StatusChanged(status={self.status}, flags={fmt_flags(self.flags)})"
        if self.kind == "properties":
            short = self.interface.rsplit(".", 1)[-1]
            extra = f" invalidated={self.invalidated}" if self.invalidated else ""
            return f"#{self.index} PropertiesChanged[{short}]({fmt_props(self.changed)}){extra}"
        return f"#{self.index} {self.signal_interface}.{self.member}"


class Mark:
    """A point in a recorder's history: the next event index and the Target
    properties at that point."""

    def __init__(self, index: int, target: dict):
        self.index = index
        self.target = dict(target)


class SignalRecorder:
    """Records every signal on one object path of a bus and mirrors its properties.

    Subscribe (the constructor does) before the daemon starts to miss
    nothing; call :meth:`sync` once the service is up to read the current
    properties with GetAll; afterwards every ``PropertiesChanged`` is applied
    to the mirror (``self.props`` for the Target interface, ``self.state``
    per interface) and every signal appended to ``self.events`` in arrival
    order. Signals are dispatched while a wait iterates the GLib main
    context, so a test never misses one between two waits."""

    def __init__(self, client: BusClient, path: str = ROOT_PATH, service: str = SERVICE):
        self.client = client
        self.path = path
        self.service = service
        self.events: list = []
        self.state: dict = {TARGET_IFACE: {}, MANAGER_IFACE: {}}
        # sender None: a well-known-name sender does not survive the daemon
        # restarting; the path is the daemon's own.
        self._subscription = client.conn.signal_subscribe(
            None, None, None, path, None, Gio.DBusSignalFlags.NONE, self._on_signal)

    @property
    def props(self) -> dict:
        """The mirrored Target properties."""
        return self.state[TARGET_IFACE]

    def close(self) -> None:
        if self._subscription is not None:
            self.client.conn.signal_unsubscribe(self._subscription)
            self._subscription = None

    def _on_signal(self, _conn, _sender, _path, interface, member, parameters):
        args = tuple(parameters.unpack()) if parameters is not None else ()
        if member == "PropertiesChanged" and interface == PROPERTIES_IFACE and len(args) == 3:
            changed_iface, changed, _invalidated = args
            self.state.setdefault(changed_iface, {}).update(changed)
        self.events.append(Event(len(self.events), member, interface, args, dict(self.props)))

    def sync(self, interfaces: Iterable[str] = (TARGET_IFACE, MANAGER_IFACE)) -> dict:
        """Read the properties with GetAll (after dispatching pending signals); return the Target's."""
        pump()
        for interface in interfaces:
            self.state[interface] = self.client.get_all(self.service, self.path, interface)
        return self.props

    def mark(self) -> Mark:
        """Remember where the history stands now (dispatching what is pending first)."""
        pump()
        return Mark(len(self.events), self.props)

    def since(self, mark: Optional[Mark] = None, kind: Optional[str] = None) -> list:
        events = self.events[mark.index if mark else 0:]
        return [e for e in events if kind is None or e.kind == kind]

    def status_changes(self, mark: Optional[Mark] = None) -> list:
        """``[(status, flags), ...]`` of the StatusChanged signals since ``mark``."""
        return [(e.status, e.flags) for e in self.since(mark, "status")]

    def history(self, mark: Optional[Mark] = None, limit: int = 60) -> str:
        events = self.since(mark)
        lines = [repr(e) for e in events[-limit:]]
        if len(events) > limit:
            lines.insert(0, f"[... {len(events) - limit} earlier signals ...]")
        return "\n".join("    " + line for line in lines) or "    (no signal)"

    def describe(self, mark: Optional[Mark] = None) -> str:
        return (f"  Target properties now: {fmt_props(self.props)}\n"
                f"  Manager properties now: {fmt_props(self.state.get(MANAGER_IFACE))}\n"
                f"  signals{' since the mark' if mark else ''}:\n{self.history(mark)}")

    def wait(self, condition: Callable[[dict], Any], what: str, timeout: float = CHANGE_TIMEOUT,
             mark: Optional[Mark] = None):
        """Wait until ``condition(props)`` holds for the mirrored Target properties."""
        return wait_until(lambda: condition(self.props), timeout, what, lambda: self.describe(mark))

    def wait_props(self, expected: dict, what: str, timeout: float = CHANGE_TIMEOUT,
                   mark: Optional[Mark] = None, interface: str = TARGET_IFACE) -> dict:
        """Wait until every property in ``expected`` has the expected value."""
        def matches():
            current = self.state.get(interface, {})
            return all(current.get(k, object()) == v for k, v in expected.items())

        def describe():
            current = self.state.get(interface, {})
            wrong = {k: current.get(k, "(missing)") for k, v in expected.items() if current.get(k, object()) != v}
            return (f"  expected: {fmt_props(expected)}\n  differing now: {fmt_props(wrong)}\n"
                    + self.describe(mark))

        wait_until(matches, timeout, what, describe)
        return dict(self.state.get(interface, {}))

    def wait_status(self, status: int, flags: int, what: str, timeout: float = CHANGE_TIMEOUT,
                    mark: Optional[Mark] = None, last: bool = False) -> Event:
        """Wait for a StatusChanged(status, flags) after ``mark`` (with ``last``:
        as the latest StatusChanged); return it."""
        def found():
            events = self.since(mark, "status")
            if last:
                events = events[-1:]
            for event in events:
                if (event.status, event.flags) == (status, flags):
                    return event
            return None
        return wait_until(found, timeout, f"StatusChanged({status}, {fmt_flags(flags)}): {what}",
                          lambda: self.describe(mark))

    def wait_answer(self, expected: dict, what: str, timeout: float = CHANGE_TIMEOUT,
                    mark: Optional[Mark] = None) -> dict:
        """Wait for the properties in ``expected`` and, when they include Flags
        and Status, until the latest StatusChanged since ``mark`` announces
        them (or, with none since ``mark``, until the state at ``mark`` was
        already that answer). StatusChanged follows its PropertiesChanged,
        so waiting for the properties alone can return before it arrives."""
        props = self.wait_props(expected, what, timeout, mark)
        if "Flags" in expected and "Status" in expected:
            answer = (expected["Status"], expected["Flags"])
            before = (mark.target.get("Status"), mark.target.get("Flags")) if mark else None

            def announced():
                events = self.since(mark, "status")
                latest = (events[-1].status, events[-1].flags) if events else before
                return latest == answer

            wait_until(announced, timeout, f"StatusChanged({answer[0]}, {fmt_flags(answer[1])}) "
                       f"after the properties: {what}", lambda: self.describe(mark))
        return props

    def barrier(self) -> None:
        """A round trip to the service (Peer.Ping), then dispatch: every signal
        it sent before answering has been recorded when this returns."""
        self.client.call(self.service, self.path, PEER_IFACE, "Ping")
        pump()

    def check_announced(self, mark: Mark) -> list:
        """Problems with the signals since ``mark`` (an empty list when none).

        Checked: every StatusChanged carries (status, flags) different from
        the previous one (flags may repeat only when status enters or leaves
        -1); the properties were announced before it (the mirror already held
        the new Flags and Status when it arrived, and a PropertiesChanged of
        the Target carrying the new Flags, or the new Status, came after the
        previous StatusChanged)."""
        problems = []
        previous = (mark.target.get("Status"), mark.target.get("Flags"))
        pending_changes: dict = {}
        for event in self.since(mark):
            if event.kind == "properties" and event.interface == TARGET_IFACE:
                pending_changes.update(event.changed)
                continue
            if event.kind != "status":
                continue
            current = (event.status, event.flags)
            if current == previous:
                problems.append(f"{event!r} repeats the previous state {previous}")
            elif event.flags == previous[1] and STATUS_UNKNOWN not in (event.status, previous[0]):
                problems.append(f"{event!r} has the same flags as the previous state {previous}")
            if event.target.get("Flags") != event.flags or event.target.get("Status") != event.status:
                problems.append(f"{event!r} arrived while the announced properties were "
                                f"Flags={fmt_flags(event.target.get('Flags'))}, Status={event.target.get('Status')}")
            if event.flags != previous[1] and pending_changes.get("Flags") != event.flags:
                problems.append(f"{event!r} was not preceded by a PropertiesChanged carrying Flags="
                                f"{fmt_flags(event.flags)}")
            if event.status != previous[0] and pending_changes.get("Status") != event.status:
                problems.append(f"{event!r} was not preceded by a PropertiesChanged carrying Status={event.status}")
            previous = current
            pending_changes = {}
        return problems

    def assert_announced(self, mark: Mark) -> None:
        problems = self.check_announced(mark)
        assert not problems, ("signal order or de-duplication is wrong:\n  " + "\n  ".join(problems)
                              + "\n" + self.describe(mark))


# --- the daemon under test ----------------------------------------------------


class Daemon:
    """reachabilityd as a separate process.

    ``bus_address`` is where it serves (and where the tests look for it);
    ``system_bus_address`` is what it gets as ``DBUS_SYSTEM_BUS_ADDRESS`` (the
    bus NetworkManager is on; by default the same bus). ``enter`` is a PID
    whose network, mount and UTS namespaces it runs in (``nsenter -t PID -n
    -m -u``), so it sees NetworkManager's interfaces and resolv.conf.
    ``args`` default to ``--system`` (plus ``--verbose`` unless
    ``REACH_TEST_QUIET`` is set). Its stderr is kept in ``log``."""

    def __init__(self, bus_address: str, log: Path, *, system_bus_address: Optional[str] = None,
                 enter: Optional[int] = None, args: Optional[list] = None, binary: Optional[Path] = None):
        self.bus_address = bus_address
        self.system_bus_address = system_bus_address or bus_address
        self.log = Path(log)
        self.enter = enter
        self.binary = Path(binary or daemon_binary())
        if args is None:
            args = ["--system"] + ([] if os.environ.get("REACH_TEST_QUIET") else ["--verbose"])
        self.args = list(args)
        self.process: Optional[Process] = None
        self.owner: Optional[str] = None

    def argv(self) -> list:
        argv = [str(self.binary)] + self.args
        if self.enter is not None:
            argv = [need_tool("nsenter"), "-t", str(self.enter), "-n", "-m", "-u", "--"] + argv
        return argv

    def environment(self) -> dict:
        env = dict(os.environ)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        env["DBUS_SYSTEM_BUS_ADDRESS"] = self.system_bus_address
        # Tests/sanitize.sh: leak checking for the daemon only (see there).
        if os.environ.get("REACH_TEST_DAEMON_ASAN_OPTIONS"):
            env["ASAN_OPTIONS"] = os.environ["REACH_TEST_DAEMON_ASAN_OPTIONS"]
        return env

    def start(self, client: Optional[BusClient] = None, wait: bool = True, timeout: float = START_TIMEOUT) -> "Daemon":
        """Start the process and (by default) wait until it owns the bus name."""
        if not os.access(self.binary, os.X_OK):
            raise HarnessError(f"reachabilityd is not built at {self.binary}")
        self.process = Process("reachabilityd", self.argv(), self.log, env=self.environment())
        if wait:
            self.wait_ready(client, timeout)
        return self

    def wait_ready(self, client: Optional[BusClient] = None, timeout: float = START_TIMEOUT) -> str:
        own = client is None
        client = client or BusClient(self.bus_address)
        try:
            self.owner = client.wait_for_name(
                SERVICE, timeout, alive=lambda: self.running,
                describe=lambda: f"reachabilityd (exit status {self.returncode}) log:\n{tail(self.log, 80)}")
        finally:
            if own:
                client.close()
        return self.owner

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return bool(self.process and self.process.running)

    @property
    def returncode(self) -> Optional[int]:
        return self.process.returncode if self.process else None

    def stop(self, timeout: float = STOP_TIMEOUT) -> Optional[int]:
        """SIGTERM (then SIGKILL after ``timeout``); return the exit status."""
        return self.process.stop(timeout) if self.process else None

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def dump(self, file=sys.stderr) -> None:
        print(f"----- reachabilityd log ({self.log}) -----\n{self.log_text()}", file=file)


class ActivatedDaemon(Daemon):
    """reachabilityd as the bus starts it: the lab's activation file (``Lab.activatable``)
    runs what :class:`Daemon` would run, its stderr appended to ``log``. Each instance the
    bus starts is found through the bus (``GetConnectionUnixProcessID`` of the name) and
    stopped by that PID."""

    def __init__(self, bus_address: str, log: Path, **kwargs):
        super().__init__(bus_address, log, **kwargs)
        self.pids: list = []

    def exec_line(self) -> str:
        """The activation file's ``Exec=``: a shell that puts the bus in the environment, the
        log on stderr, and then is the daemon (``exec``: the PID the bus reports is the daemon's)."""
        argv = " ".join(self.argv())
        return f"/bin/sh -c 'exec env DBUS_SYSTEM_BUS_ADDRESS={self.system_bus_address} {argv} 2>>{self.log}'"

    def owner_pid(self, client: BusClient) -> int:
        """The PID of the name's owner now (remembered, to be stopped at the end)."""
        pid = client.call(DBUS_NAME, DBUS_PATH, DBUS_NAME, "GetConnectionUnixProcessID", "s", (SERVICE,))[0]
        if pid not in self.pids:
            self.pids.append(pid)
        return pid

    @staticmethod
    def alive(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def kill(self, client: BusClient, signum: int = signal.SIGTERM, wait_gone: bool = True) -> int:
        """Stop the instance that owns the name now, by its PID; wait until the process has
        ended and (``wait_gone``, unless a client may start it again at once) the name is
        gone. Returns the PID."""
        pid = self.owner_pid(client)
        os.kill(pid, signum)
        if wait_gone:
            client.wait_for_name_gone(SERVICE, STOP_TIMEOUT)
        wait_until(lambda: not self.alive(pid), STOP_TIMEOUT, f"reachabilityd (PID {pid}) to end", poll=0.05)
        return pid

    @property
    def running(self) -> bool:
        return any(self.alive(pid) for pid in self.pids)

    def stop(self, timeout: float = STOP_TIMEOUT) -> Optional[int]:
        for pid in self.pids:
            for signum in (signal.SIGTERM, signal.SIGKILL):
                if not self.alive(pid):
                    break
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signum)
                deadline = time.monotonic() + timeout
                while self.alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
        return None


# --- network namespaces and upstream services ---------------------------------


def run(argv: list, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess:
    """Run a short command; on failure raise :class:`HarnessError` with its output."""
    argv = [str(a) for a in argv]
    result = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                            check=False)
    if check and result.returncode != 0:
        raise HarnessError(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result


class Namespaces:
    """Network namespaces named ``reach-<pid>-<random>-<role>``, deleted by :meth:`close`."""

    def __init__(self, tag: Optional[str] = None):
        self.tag = tag or f"{os.getpid()}-{secrets.token_hex(3)}"
        self.names: list = []

    def create(self, role: str) -> str:
        name = f"reach-{self.tag}-{role}"
        run([need_tool("ip"), "netns", "add", name])
        self.names.append(name)
        run([need_tool("ip"), "-n", name, "link", "set", "lo", "up"])
        return name

    @staticmethod
    def exec_argv(name: str) -> list:
        return [need_tool("ip"), "netns", "exec", name]

    def ip(self, name: str, *args, check: bool = True) -> subprocess.CompletedProcess:
        """``ip -n NAME ARGS``."""
        return run([need_tool("ip"), "-n", name, *args], check=check)

    def sysctl(self, name: str, key: str, value: str) -> None:
        path = "/proc/sys/" + key.replace(".", "/")
        run(self.exec_argv(name) + ["/bin/sh", "-c", f"echo {value} > {path}"])

    @staticmethod
    def pids(name: str) -> list:
        result = run([need_tool("ip"), "netns", "pids", name], check=False)
        return [int(p) for p in result.stdout.split() if p.isdigit()]

    def close(self) -> None:
        """Kill what is left in the namespaces (by PID) and delete them."""
        for name in reversed(self.names):
            for pid in self.pids(name):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            run([need_tool("ip"), "netns", "del", name], check=False)
        self.names.clear()


class Dnsmasq:
    """dnsmasq in a namespace: authoritative for ``.test``, nothing forwarded."""

    def __init__(self, netns: str, directory: Path, listen: str = UPSTREAM_V4,
                 host_records: Iterable[str] = (), extra_args: Iterable[str] = ()):
        self.netns = netns
        self.directory = Path(directory)
        self.listen = listen
        self.host_records = list(host_records)
        self.extra_args = list(extra_args)
        self.log = self.directory / "dnsmasq.log"
        self.process: Optional[Process] = None

    def start(self, timeout: float = START_TIMEOUT) -> None:
        argv = Namespaces.exec_argv(self.netns) + [
            need_tool("dnsmasq"), "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
            "--bind-interfaces", f"--listen-address={self.listen}", "--local=/test/", "--log-facility=-",
            "--log-queries", f"--pid-file={self.directory / 'dnsmasq.pid'}", "--user=nobody", "--group=nogroup",
        ] + [f"--host-record={record}" for record in self.host_records] + self.extra_args
        self.process = Process("dnsmasq", argv, self.log)
        wait_until(lambda: "started, version" in tail(self.log, 50) or not self.process.running,
                   timeout, "dnsmasq to start", poll=0.02)
        if not self.process.running:
            raise HarnessError(f"dnsmasq exited:\n{tail(self.log)}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()


CONNCHECK_SERVER = r"""
import socket, socketserver, sys
from http.server import BaseHTTPRequestHandler

RESPONSE_FILE = sys.argv[1]

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_GET(self):
        # An IPv6 client gets RESPONSE_FILE.ipv6 instead when it exists; empty, the connection
        # is closed without an answer (the check fails: "limited" for that family).
        if not self.client_address[0].startswith("::ffff:"):
            try:
                with open(RESPONSE_FILE + ".ipv6", "rb") as f:
                    body = f.read()
                if not body:
                    self.close_connection = True
                    return
                self._answer(body)
                return
            except OSError:
                pass
        try:
            with open(RESPONSE_FILE, "rb") as f:
                body = f.read()
        except OSError:
            body = b""
        self._answer(body)

    def _answer(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, fmt, *args):
        sys.stderr.write("conncheck: %s %s\n" % (self.client_address[0], fmt % args))
        sys.stderr.flush()

class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    address_family = socket.AF_INET6
    allow_reuse_address = True
    daemon_threads = True

    def server_bind(self):
        self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        super().server_bind()

server = Server(("::", 80), Handler)
print("ready", flush=True)
server.serve_forever()
"""


class ConncheckServer:
    """NetworkManager's connectivity-check web server, in a namespace, on port 80 (IPv4 and IPv6).

    Every GET answers 200 with the content of ``response_file``:
    :meth:`set_response` switches it (``CONNCHECK_PORTAL`` makes NetworkManager
    report a captive portal). :meth:`stop` makes the check fail (limited
    connectivity); :meth:`start` brings it back."""

    def __init__(self, netns: str, directory: Path, response: str = CONNCHECK_OK):
        self.netns = netns
        self.directory = Path(directory)
        self.response_file = self.directory / "conncheck-response"
        self.log = self.directory / "conncheck.log"
        self.process: Optional[Process] = None
        self.set_response(response)

    def set_response(self, text: str) -> None:
        """Atomically replace the answer (takes effect at the next request)."""
        temp = self.response_file.with_suffix(".new")
        temp.write_text(text)
        temp.chmod(0o644)
        temp.replace(self.response_file)

    def set_ipv6_response(self, text: Optional[str]) -> None:
        """A different answer for IPv6 clients: ``""`` closes their connections unanswered (their
        check fails), ``None`` gives them the common answer again."""
        override = self.response_file.with_name(self.response_file.name + ".ipv6")
        if text is None:
            override.unlink(missing_ok=True)
            return
        temp = override.with_suffix(".new")
        temp.write_text(text)
        temp.chmod(0o644)
        temp.replace(override)

    def start(self, timeout: float = START_TIMEOUT) -> None:
        script = self.directory / "conncheck_server.py"
        script.write_text(CONNCHECK_SERVER)
        argv = Namespaces.exec_argv(self.netns) + [sys.executable, script, self.response_file]
        self.process = Process("conncheck", argv, self.log, stdout_pipe=True)
        line = read_line(self.process.popen.stdout, timeout)
        if not line or line.strip() != "ready":
            self.process.stop()
            raise HarnessError(f"the conncheck server did not start:\n{tail(self.log)}")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    @property
    def running(self) -> bool:
        return bool(self.process and self.process.running)


# --- NetworkManager -----------------------------------------------------------


NM_CONF = """[main]
plugins=keyfile
auth-polkit=false
no-auto-default=*
hostname-mode=none
dns=default
rc-manager=file
systemd-resolved=false
dhcp=internal

[logging]
level={log_level}

[keyfile]
path={keyfile_dir}

[connectivity]
enabled={conncheck_enabled}
uri=http://{conncheck_host}/check
response={response}
interval={interval}

[device-reachabilityd-test]
match-device=interface-name:{ifname}
managed=1
carrier-wait-timeout=1000
"""

NM_PROFILE = """[connection]
id=reach-wired
uuid={uuid}
type=ethernet
interface-name={ifname}
autoconnect=true

[ethernet]

[ipv4]
method=manual
address1={v4}/24,{gw4}
dns={gw4};
dns-options=timeout:1;attempts:1;

[ipv6]
method=manual
address1={v6}/64,{gw6}
addr-gen-mode=eui64
"""

# Run (as /bin/sh -c) inside `ip netns exec NS unshare --mount --uts
# --propagation private`: the private mount namespace NetworkManager (and the
# daemon under test) live in. Positional arguments: the private directory.
NM_NAMESPACE_SCRIPT = r"""
set -e
dir="$1"
# Without a read-only /sys NetworkManager waits for udev forever and leaves
# every device unmanaged.
mount -o remount,bind,ro /sys
mount --bind "$dir/run" /run
mkdir -p /var/lib/NetworkManager
mount --bind "$dir/varlib" /var/lib/NetworkManager
# rc-manager=file replaces /etc/resolv.conf by renaming a temporary file over
# it: /etc must be writable, and must not be the machine's.
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$dir/etc-upper,workdir=$dir/etc-work" /etc
echo ready
exec sleep infinity
"""


class NetworkManager:
    """The real NetworkManager, started in an existing namespace anchor.

    ``anchor`` is the PID of the process holding the network, mount and UTS
    namespaces (see :class:`NMLab`); NetworkManager is started there with
    ``nsenter`` and can be stopped, killed and started again (the
    "NetworkManager restarted" fault) without losing the namespaces."""

    def __init__(self, anchor: int, directory: Path, bus_address: str):
        self.anchor = anchor
        self.directory = Path(directory)
        self.bus_address = bus_address
        self.log = self.directory / "NetworkManager.log"
        self.process: Optional[Process] = None

    def argv(self) -> list:
        d = self.directory
        return [need_tool("nsenter"), "-t", str(self.anchor), "-n", "-m", "-u", "--",
                need_tool("NetworkManager"), "--debug", f"--config={d / 'NetworkManager.conf'}",
                f"--config-dir={d / 'conf.d'}", f"--system-config-dir={d / 'system-conf.d'}",
                f"--intern-config={d / 'NetworkManager-intern.conf'}", f"--state-file={d / 'NetworkManager.state'}",
                f"--pid-file={d / 'NetworkManager.pid'}"]

    def start(self, client: Optional[BusClient] = None, timeout: float = START_TIMEOUT) -> None:
        """Start NetworkManager and wait until it is on the bus."""
        env = dict(os.environ)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        env["DBUS_SYSTEM_BUS_ADDRESS"] = self.bus_address
        self.process = Process("NetworkManager", self.argv(), self.log, env=env)
        own = client is None
        client = client or BusClient(self.bus_address)
        try:
            client.wait_for_name(NM_NAME, timeout, alive=lambda: self.running,
                                 describe=lambda: f"NetworkManager log:\n{tail(self.log, 60)}")
        finally:
            if own:
                client.close()

    @property
    def pid(self) -> Optional[int]:
        return self.process.pid if self.process else None

    @property
    def running(self) -> bool:
        return bool(self.process and self.process.running)

    def stop(self, signum: int = signal.SIGTERM) -> Optional[int]:
        """Stop it (SIGTERM, or e.g. SIGKILL for a crash) and wait for the process to end."""
        if self.process is None:
            return None
        return self.process.stop(signum=signum)


class Lab:
    """What every lab has: a private directory, a private system bus with a client,
    the daemons started on it, their logs for a failure report, and a teardown
    that stops every process by PID. Subclasses build their network in
    ``start``, say how a daemon is started (``new_daemon``), which other
    processes to stop after the daemons (``services``), and what to release
    once the bus is gone (``release``)."""

    prefix = "reach-"

    def __init__(self):
        self.directory = short_tmpdir(self.prefix)
        self.bus = PrivateBus(self.directory, "system")
        self.client: Optional[BusClient] = None
        self.daemons: list = []
        self.closed = False
        _OPEN_LABS.append(self)

    def start_bus(self) -> None:
        self.bus.start()
        self.client = self.bus.client()

    def new_daemon(self, log: Path, args: Optional[list]):
        return Daemon(self.bus.address, log, args=args)

    def daemon(self, start: bool = True, args: Optional[list] = None, name: str = "reachabilityd"):
        """A reachabilityd serving on the lab's bus (where ``new_daemon`` puts it)."""
        daemon = self.new_daemon(self.directory / f"{name}-{len(self.daemons)}.log", args)
        self.daemons.append(daemon)
        if start:
            daemon.start(self.client)
        return daemon

    def enable_activation(self) -> None:
        """Before ``start``: the bus gets a service directory (empty until ``activatable``)."""
        self.servicedir = self.directory / "services"
        self.servicedir.mkdir(exist_ok=True)
        self.bus.extra_config += f"\n  <servicedir>{self.servicedir}</servicedir>"

    def activatable(self, args: Optional[list] = None, name: str = "activated") -> ActivatedDaemon:
        """Makes the bus start reachabilityd, as ``new_daemon`` would run it, for a call to its
        name (an activation file, the bus told to read it). Needs ``enable_activation``."""
        template = self.new_daemon(self.directory / f"{name}-{len(self.daemons)}.log", args)
        daemon = ActivatedDaemon(template.bus_address, template.log, system_bus_address=template.system_bus_address,
                                 enter=template.enter, args=template.args, binary=template.binary)
        self.daemons.append(daemon)
        (self.servicedir / f"{SERVICE}.service").write_text(
            f"[D-BUS Service]\nName={SERVICE}\nExec={daemon.exec_line()}\n")
        self.client.call(DBUS_NAME, DBUS_PATH, DBUS_NAME, "ReloadConfig")
        return daemon

    def recorder(self, path: str = ROOT_PATH) -> SignalRecorder:
        return SignalRecorder(self.client, path)

    def logs(self) -> list:
        """``[(title, text)]``: each daemon's log (subclasses add theirs)."""
        return [(f"reachabilityd log ({d.log.name}, exit status {d.returncode})", tail(d.log, 2000))
                for d in self.daemons if d.log_text()]

    def services(self) -> list:
        """Processes to stop after the daemons, in order."""
        return []

    def release(self) -> None:
        """What to give back after the bus is stopped (namespaces…)."""

    def close(self) -> None:
        """Stop every process by PID, release the rest, delete the directory. Idempotent."""
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(ValueError):
            _OPEN_LABS.remove(self)
        errors = []
        for stoppable in [*self.daemons, *self.services()]:
            if stoppable is None:
                continue
            try:
                stoppable.stop()
            except Exception as error:  # pylint: disable=broad-except
                errors.append(f"{stoppable!r}: {error}")
        if self.client is not None:
            self.client.close()
        self.bus.stop()
        self.release()
        if not os.environ.get("REACH_TEST_KEEP"):
            shutil.rmtree(self.directory, ignore_errors=True)
        if errors:
            raise HarnessError("teardown: " + "; ".join(errors))


class NMLab(Lab):
    """A private system bus, NetworkManager in one network namespace, an
    upstream host (dnsmasq, conncheck server) in another, a veth pair between.

    ::

        lab = NMLab()
        try:
            lab.start()              # NetworkManager connected (State 70)
            daemon = lab.daemon()    # reachabilityd in NetworkManager's namespaces
            ...
        finally:
            lab.close()

    ``lab.start(networkmanager=False)`` prepares everything except
    NetworkManager (start it later with :meth:`start_nm`). All names, sockets
    and state are private to the instance, so several labs can run at once."""

    prefix = "reach-nm-"

    def __init__(self, *, nm_log_level: str = "INFO", conncheck_interval: int = 3):
        super().__init__()
        self.namespaces = Namespaces()
        self.nm_log_level = os.environ.get("REACH_TEST_NM_LOG_LEVEL", nm_log_level)
        self.conncheck_interval = conncheck_interval
        self.ns_nm: Optional[str] = None
        self.ns_up: Optional[str] = None
        self.anchor: Optional[Process] = None
        self.dnsmasq: Optional[Dnsmasq] = None
        self.conncheck: Optional[ConncheckServer] = None
        self.nm: Optional[NetworkManager] = None

    # -- set-up --

    def start(self, networkmanager: bool = True) -> "NMLab":
        """Bring everything up; with ``networkmanager`` wait for NetworkManager's State 70."""
        self.start_bus()
        self._network()
        self._upstream_services()
        self._nm_files()
        self._anchor()
        self.nm = NetworkManager(self.anchor.pid, self.directory, self.bus.address)
        if networkmanager:
            self.start_nm()
        return self

    def _network(self) -> None:
        ns = self.namespaces
        self.ns_nm = ns.create("nm")
        self.ns_up = ns.create("up")
        for key in ("net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"):
            ns.sysctl(self.ns_nm, key, "0")
        run([need_tool("ip"), "link", "add", NM_IFNAME, "netns", self.ns_nm, "type", "veth",
             "peer", "name", UPSTREAM_IFNAME, "netns", self.ns_up])
        ns.sysctl(self.ns_nm, f"net.ipv6.conf.{NM_IFNAME}.accept_dad", "0")
        # The upstream keeps its IPv6 addresses while its link is down (the
        # kernel flushes them by default), so a carrier bounce heals by itself.
        ns.sysctl(self.ns_up, f"net.ipv6.conf.{UPSTREAM_IFNAME}.keep_addr_on_down", "1")
        ns.ip(self.ns_up, "addr", "add", f"{UPSTREAM_V4}/24", "dev", UPSTREAM_IFNAME)
        ns.ip(self.ns_up, "addr", "add", f"{UPSTREAM_V6}/64", "dev", UPSTREAM_IFNAME, "nodad")
        ns.ip(self.ns_up, "link", "set", UPSTREAM_IFNAME, "up")

    def _upstream_services(self) -> None:
        self.dnsmasq = Dnsmasq(self.ns_up, self.directory, host_records=[
            f"{CONNCHECK_HOST},{UPSTREAM_V4},{UPSTREAM_V6}", ",".join(SOMEHOST)])
        self.dnsmasq.start()
        self.conncheck = ConncheckServer(self.ns_up, self.directory)
        self.conncheck.start()

    def _nm_files(self) -> None:
        d = self.directory
        for sub in ("run", "varlib", "etc-upper", "etc-work", "conf.d", "system-conf.d", "connections"):
            (d / sub).mkdir(mode=0o755)
        (d / "NetworkManager.conf").write_text(NM_CONF.format(
            log_level=self.nm_log_level, keyfile_dir=d / "connections", conncheck_enabled="true",
            conncheck_host=CONNCHECK_HOST, response=CONNCHECK_OK.strip(), interval=self.conncheck_interval,
            ifname=NM_IFNAME))
        profile = d / "connections" / "reach-wired.nmconnection"
        profile.write_text(NM_PROFILE.format(uuid=uuid.uuid4(), ifname=NM_IFNAME, v4=NM_V4, gw4=UPSTREAM_V4,
                                             v6=NM_V6, gw6=UPSTREAM_V6))
        profile.chmod(0o600)

    def _anchor(self) -> None:
        argv = Namespaces.exec_argv(self.ns_nm) + [
            need_tool("unshare"), "--mount", "--uts", "--propagation", "private",
            "/bin/sh", "-c", NM_NAMESPACE_SCRIPT, "nm-namespace", self.directory]
        self.anchor = Process("namespace anchor", argv, self.directory / "anchor.log", stdout_pipe=True)
        line = read_line(self.anchor.popen.stdout, START_TIMEOUT)
        if not line or line.strip() != "ready":
            raise HarnessError(f"could not prepare NetworkManager's mount namespace:\n{tail(self.anchor.log)}")

    # -- NetworkManager --

    def start_nm(self, wait_connected: bool = True, timeout: float = START_TIMEOUT) -> None:
        """Start NetworkManager (again) and, by default, wait for State 70 (CONNECTED_GLOBAL)."""
        self.nm.start(self.client, timeout)
        if wait_connected:
            self.wait_nm_state(NM_STATE_CONNECTED_GLOBAL, timeout)

    def stop_nm(self, signum: int = signal.SIGTERM) -> None:
        """Stop NetworkManager and wait until its name has left the bus."""
        self.nm.stop(signum)
        self.client.wait_for_name_gone(NM_NAME)

    def nm_get(self, name: str, path: str = NM_PATH, interface: str = NM_IFACE):
        return self.client.get(NM_NAME, path, interface, name)

    def wait_nm_state(self, state: int, timeout: float = CHANGE_TIMEOUT) -> None:
        """Wait (NetworkManager's StateChanged wakes the wait) until its State is ``state``."""
        subscription = self.client.conn.signal_subscribe(NM_NAME, NM_IFACE, "StateChanged", NM_PATH, None,
                                                         Gio.DBusSignalFlags.NONE, lambda *_: None)

        def current():
            try:
                return self.nm_get("State")
            except DBusCallError:
                return None
        try:
            wait_until(lambda: current() == state, timeout, f"NetworkManager State {state}",
                       lambda: f"  State is {current()}\n  NetworkManager log:\n{tail(self.nm.log, 40)}", poll=0.1)
        finally:
            self.client.conn.signal_unsubscribe(subscription)

    def check_connectivity(self) -> str:
        """NetworkManager's CheckConnectivity(): run a check now; return the result's name."""
        return NM_CONNECTIVITY.get(self.client.call(NM_NAME, NM_PATH, NM_IFACE, "CheckConnectivity",
                                                    timeout=30)[0], "?")

    def nm_connectivity(self) -> str:
        return NM_CONNECTIVITY.get(self.nm_get("Connectivity"), "?")

    # -- faults --

    def set_carrier(self, up: bool) -> None:
        """Carrier of nmveth0, by setting its upstream peer down or up."""
        self.namespaces.ip(self.ns_up, "link", "set", UPSTREAM_IFNAME, "up" if up else "down")

    def set_portal(self, portal: bool) -> None:
        """Make the connectivity check see a captive portal (wrong answer), or not."""
        self.conncheck.set_response(CONNCHECK_PORTAL if portal else CONNCHECK_OK)

    def ip_nm(self, *args, check: bool = True) -> subprocess.CompletedProcess:
        """``ip`` in NetworkManager's namespace."""
        return self.namespaces.ip(self.ns_nm, *args, check=check)

    def in_nm_namespace(self, argv: list, check: bool = True) -> subprocess.CompletedProcess:
        """Run a command where the daemon runs (NetworkManager's network, mount and UTS namespaces)."""
        return run([need_tool("nsenter"), "-t", str(self.anchor.pid), "-n", "-m", "-u", "--", *argv], check=check)

    # -- the daemon --

    def new_daemon(self, log: Path, args: Optional[list]) -> Daemon:
        """A reachabilityd in NetworkManager's namespaces, serving on the lab's bus."""
        return Daemon(self.bus.address, log, enter=self.anchor.pid, args=args)

    # -- reporting and teardown --

    def logs(self) -> list:
        """``[(title, text)]``: each daemon's log, then the tails of the other logs."""
        result = super().logs()
        if self.nm is not None:
            result.append(("NetworkManager log (tail)", tail(self.nm.log, 150)))
        for title, path in (("dnsmasq log (tail)", self.directory / "dnsmasq.log"),
                            ("conncheck server log (tail)", self.directory / "conncheck.log")):
            result.append((title, tail(path, 40)))
        return [(title, text) for title, text in result if text]

    def services(self) -> list:
        return [self.nm, self.conncheck, self.dnsmasq, self.anchor]

    def release(self) -> None:
        self.namespaces.close()


class PlainLab(Lab):
    """A private system bus with no NetworkManager on it, and the daemon on it,
    in the machine's network namespace (no root needed). What the daemon
    shows there is the "NetworkManager not running" state."""

    prefix = "reach-bus-"

    def start(self) -> "PlainLab":
        self.start_bus()
        return self

