"""Wi-Fi and mobile broadband (WWAN) paths, with NetworkManager mocked.

No Wi-Fi or modem hardware can exist in a test machine, so NetworkManager is
python-dbusmock with the project's template (templates/networkmanager_reach.py)
on a private system bus, and the kernel side is real: a network namespace
whose veth links are named like the mocked devices' IP interfaces (`wlan0`,
`wwan0`), so the route the kernel picks and the device type libnm reports
agree, as on a real machine. The daemon runs inside that namespace and serves
on the same private bus; the tests read its root object (the internet target).

Every wait is bounded and driven by the daemon's PropertiesChanged and
StatusChanged signals; nothing sleeps to synchronise.
"""

import contextlib
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import harness  # noqa: E402  (the shared bus configuration)

try:
    from gi.repository import Gio, GLib
except ImportError:  # checked in requirements(): a clear skip, or a failure under CI
    Gio = GLib = None

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = Path(__file__).resolve().parent / "templates" / "networkmanager_reach.py"
MM_TEMPLATE = Path(__file__).resolve().parent / "templates" / "modemmanager_reach.py"
DAEMON = Path(os.environ.get("REACHABILITYD", REPO / ".build" / "debug" / "reachabilityd"))

SERVICE, ROOT_PATH, TARGET_IFACE = harness.SERVICE, harness.ROOT_PATH, harness.TARGET_IFACE

NM_BUS_NAME = "org.freedesktop.NetworkManager"
MM_BUS_NAME = "org.freedesktop.ModemManager1"
MM_MOCK_PATH = "/org/freedesktop/ModemManager1"
NM_MOCK_PATH = "/org/freedesktop"
MOCK_IFACE = "org.freedesktop.DBus.Mock"
NM_SETTINGS = "/org/freedesktop/NetworkManager/Settings/"

# SCNetworkReachabilityFlags
REACHABLE = 0x2
CONNECTION_REQUIRED = 0x4
INTERVENTION_REQUIRED = 0x10
IS_WWAN = 0x40000

# NetworkManager values
DEVICE_DISCONNECTED, DEVICE_PREPARE, DEVICE_NEED_AUTH = 30, 40, 60
CONNECTIVITY_FULL = 4
METERED_YES = 1
MODEM_GSM_UMTS, MODEM_LTE = 0x4, 0x8

# Kernel side: documentation prefixes only.
WLAN_ADDR, WLAN_GW = "192.0.2.10/24", "192.0.2.1"
WWAN_ADDR, WWAN_GW = "198.51.100.10/24", "198.51.100.1"

START_TIMEOUT = 15.0  # process start-up (bus, mock, daemon)
CHANGE_TIMEOUT = 5.0  # a network change reaching the daemon's properties


# --- requirements -------------------------------------------------------------

def requirements():
    """What this machine lacks to run these tests (empty when nothing)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces)")
    for tool in ("ip", "dbus-daemon"):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            missing.append(f"the {tool} command")
    if Gio is None:
        missing.append("python3-gi (gi.repository.Gio) for " + sys.executable)
    try:
        import dbusmock  # noqa: F401 pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        missing.append("python3-dbusmock for " + sys.executable)
    if not os.access(DAEMON, os.X_OK):
        missing.append(f"the daemon at {DAEMON} (swift build, or set REACHABILITYD)")
    return missing


def require():
    missing = requirements()
    if not missing:
        return
    message = "Wi-Fi/WWAN tests need " + ", ".join(missing)
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set: missing requirements fail)", pytrace=False)
    pytest.skip(message)


def ip_command():
    return shutil.which("ip") or "/usr/sbin/ip"


# --- the environment ----------------------------------------------------------

# The harness's private system bus, everything allowed; {socket} is filled in per test.
BUS_CONF = harness.BUS_CONFIG.format(socket="{socket}", policy=harness.OPEN_POLICY, extra="")


class Env:
    """A private system bus with the NetworkManager mock, two network
    namespaces (the daemon's, with `wlan0` and `wwan0`, and an upstream one
    holding their peers), and the daemon once start_daemon() is called."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        tag = f"{os.getpid()}-{secrets.token_hex(3)}"
        self.netns = f"reach-wifi-{tag}"
        self.upstream = f"reach-wifiup-{tag}"
        self.namespaces = []
        self.processes = {}  # name -> Popen
        self.logs = {}  # name -> Path
        self.address = None
        self.socket_dir = None
        self.conn = None
        self.ctx = GLib.MainContext.new()
        self.subscriptions = []
        self.props = None  # the root Target's properties, kept current by signals
        self.status_changed = []  # (status, flags) in arrival order
        # ("PropertiesChanged", changed) and ("StatusChanged", (status, flags)) in arrival order
        self.events = []
        self.wifi = self.modem = None

    # processes

    def spawn(self, name, argv, **kwargs):
        log = self.tmp / f"{name}.log"
        self.logs[name] = log
        with open(log, "wb") as out:
            proc = subprocess.Popen(argv, stdout=kwargs.pop("stdout", out), stderr=out, **kwargs)
        self.processes[name] = proc
        return proc

    def stop(self, name):
        proc = self.processes.pop(name, None)
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def log(self, name):
        path = self.logs.get(name)
        if path is None or not path.exists():
            return "(no log)"
        text = path.read_text(errors="replace")
        return text if text.strip() else "(empty)"

    # the bus

    def start_bus(self):
        # A short directory for the socket: sun_path holds 108 bytes.
        self.socket_dir = tempfile.mkdtemp(prefix="reach-wifi-bus-")
        conf = self.tmp / "bus.conf"
        conf.write_text(BUS_CONF.format(socket=Path(self.socket_dir, "system_bus_socket")))
        proc = self.spawn("dbus-daemon", ["dbus-daemon", "--config-file", str(conf), "--nofork",
                                          "--nopidfile", "--print-address=1"],
                          stdout=subprocess.PIPE)
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(timeout=START_TIMEOUT):
                pytest.fail(f"dbus-daemon printed no address within {START_TIMEOUT}s: {self.log('dbus-daemon')}")
        self.address = proc.stdout.readline().decode().strip()
        if not self.address:
            pytest.fail(f"dbus-daemon exited: {self.log('dbus-daemon')}")
        # Signals of this connection are dispatched in self.ctx.
        self.ctx.push_thread_default()
        try:
            self.conn = Gio.DBusConnection.new_for_address_sync(
                self.address,
                Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
                None, None)
        finally:
            self.ctx.pop_thread_default()

    def bus_env(self):
        env = dict(os.environ)
        env["DBUS_SYSTEM_BUS_ADDRESS"] = self.address
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        return env

    def call(self, dest, path, iface, method, args=None, sig=None, timeout_ms=5000):
        params = GLib.Variant(sig, args) if sig is not None else None
        reply = self.conn.call_sync(dest, path, iface, method, params, None,
                                    Gio.DBusCallFlags.NONE, timeout_ms, None)
        return reply.unpack() if reply is not None else None

    def subscribe(self, sender, iface, member, path, callback):
        self.ctx.push_thread_default()
        try:
            sub = self.conn.signal_subscribe(sender, iface, member, path, None,
                                             Gio.DBusSignalFlags.NONE, callback)
        finally:
            self.ctx.pop_thread_default()
        self.subscriptions.append(sub)

    def pump(self, deadline):
        """Dispatch signals until one arrives or the deadline passes; False
        when the deadline has passed."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        timer = GLib.timeout_source_new(max(1, int(remaining * 1000)))
        timer.set_callback(lambda *_: False)
        timer.attach(self.ctx)
        try:
            self.ctx.iteration(True)
        finally:
            timer.destroy()
        while self.ctx.pending():
            self.ctx.iteration(False)
        return True

    def wait_for_name(self, name, timeout, process=None):
        owners = []
        self.subscribe("org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                       "/org/freedesktop/DBus",
                       lambda _c, _s, _p, _i, _m, params: owners.append(params.unpack()))
        has_owner = self.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                              "NameHasOwner", (name,), "(s)")[0]
        deadline = time.monotonic() + timeout
        while not has_owner:
            if process is not None and self.processes[process].poll() is not None:
                pytest.fail(f"{process} exited with status {self.processes[process].returncode} "
                            f"before owning {name}:\n{self.log(process)}", pytrace=False)
            if not self.pump(deadline):
                pytest.fail(f"{name} did not appear on the bus within {timeout}s"
                            + (f":\n{self.log(process)}" if process else ""), pytrace=False)
            has_owner = any(o[0] == name and o[2] for o in owners)

    # the NetworkManager mock

    def start_mock(self):
        self.spawn("dbusmock", [sys.executable, "-m", "dbusmock", "--system", "--template", str(TEMPLATE),
                                "-l", str(self.tmp / "dbusmock-calls.log"),
                                "-p", json.dumps({"Version": "1.42.4"})],
                   env=self.bus_env())
        self.logs["dbusmock-calls"] = self.tmp / "dbusmock-calls.log"
        self.wait_for_name(NM_BUS_NAME, START_TIMEOUT, process="dbusmock")
        self.wifi = self.mock("AddWiFiDevice", ("wifi0", "wlan0", DEVICE_DISCONNECTED), "(ssi)")
        self.modem = self.mock("AddModemDevice", ("modem0", "cdc-wdm0", "wwan0", DEVICE_DISCONNECTED,
                                                  MODEM_GSM_UMTS | MODEM_LTE, MODEM_LTE), "(sssiuu)")
        self.mock("AddAccessPoint", (self.wifi, "ap0", "HomeNet", "00:11:22:33:44:55", 2, 2437, 54000, 80, 0),
                  "(ssssuuuyu)")
        self.mock("AddWiFiConnection", (self.wifi, "wifihome", "HomeNet", ""), "(ssss)")
        self.mock("AddDeviceConnection", (self.modem, "mobile", {
            "connection.type": GLib.Variant("s", "gsm"),
            "connection.id": GLib.Variant("s", "Mobile"),
            "gsm.apn": GLib.Variant("s", "internet"),
        }), "(ssa{sv})")

    def mock(self, method, args=(), sig="()"):
        result = self.call(NM_BUS_NAME, NM_MOCK_PATH, MOCK_IFACE, method, args, sig)
        return result[0] if result else None

    # the ModemManager mock (its modem is NetworkManager's modem device's Udi)

    def start_modemmanager(self, quality, recent=True):
        """ModemManager on the bus with one modem, Modem/0 (the mocked modem
        device's Udi), whose SignalQuality is (quality, recent)."""
        self.spawn("modemmanager", [sys.executable, "-m", "dbusmock", "--system", "--template", str(MM_TEMPLATE)],
                   env=self.bus_env())
        self.wait_for_name(MM_BUS_NAME, START_TIMEOUT, process="modemmanager")
        modem = self.mm("AddModem", (quality, recent), "(ub)")
        assert modem == MM_MOCK_PATH + "/Modem/0", modem
        assert self.call(NM_BUS_NAME, self.modem, "org.freedesktop.DBus.Properties", "Get",
                         ("org.freedesktop.NetworkManager.Device", "Udi"), "(ss)")[0] == modem
        return modem

    def mm(self, method, args=(), sig="()"):
        result = self.call(MM_BUS_NAME, MM_MOCK_PATH, MOCK_IFACE, method, args, sig)
        return result[0] if result else None

    # kernel side

    def ip(self, *args, netns=None):
        argv = [ip_command()] + (["-n", netns] if netns else []) + list(args)
        done = subprocess.run(argv, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(argv)} failed: {done.stderr.strip()}", pytrace=False)
        return done.stdout

    def setup_namespaces(self):
        for ns in (self.netns, self.upstream):
            self.ip("netns", "add", ns)
            self.namespaces.append(ns)
            self.ip("link", "set", "lo", "up", netns=ns)
        for ours, theirs, addr, gw in (("wlan0", "upwlan0", WLAN_ADDR, WLAN_GW),
                                       ("wwan0", "upwwan0", WWAN_ADDR, WWAN_GW)):
            self.ip("link", "add", ours, "netns", self.netns, "type", "veth",
                    "peer", "name", theirs, "netns", self.upstream)
            self.ip("addr", "add", f"{gw}/24", "dev", theirs, netns=self.upstream)
            self.ip("link", "set", theirs, "up", netns=self.upstream)
            self.ip("addr", "add", addr, "dev", ours, netns=self.netns)

    def kernel_wifi_up(self, metric=0):
        """What NetworkManager does to the kernel when Wi-Fi connects."""
        self.ip("link", "set", "wlan0", "up", netns=self.netns)
        self.ip("route", "replace", "default", "via", WLAN_GW, "dev", "wlan0", "metric", str(metric),
                netns=self.netns)

    def kernel_wifi_down(self):
        self.ip("link", "set", "wlan0", "down", netns=self.netns)

    def kernel_wwan_up(self, metric=0):
        self.ip("link", "set", "wwan0", "up", netns=self.netns)
        self.ip("route", "replace", "default", "via", WWAN_GW, "dev", "wwan0", "metric", str(metric),
                netns=self.netns)

    def kernel_wwan_down(self):
        self.ip("link", "set", "wwan0", "down", netns=self.netns)

    def route_get(self):
        return self.ip("route", "get", "1.1.1.1", netns=self.netns).strip()

    # NetworkManager side

    def nm_wifi_up(self):
        self.mock("AddPrimaryActiveConnection",
                  (self.wifi, NM_SETTINGS + "wifihome", "/org/freedesktop/NetworkManager/AccessPoint/ap0",
                   "wifi"), "(ssss)")
        self.mock("SetConnectivity", (CONNECTIVITY_FULL,), "(u)")

    def nm_wifi_down(self):
        self.mock("RemoveActiveConnection", (self.wifi, "/org/freedesktop/NetworkManager/ActiveConnection/wifi"),
                  "(ss)")

    def nm_wwan_up(self, metered=METERED_YES):
        self.mock("SetDeviceMetered", (self.modem, metered), "(su)")
        self.mock("AddPrimaryActiveConnection", (self.modem, NM_SETTINGS + "mobile", "/", "mobile"), "(ssss)")
        self.mock("SetConnectivity", (CONNECTIVITY_FULL,), "(u)")

    def nm_activating(self, device, device_state):
        """Start activating the device's profile; the device stays in
        device_state (PREPARE, NEED_AUTH ...) until nm_complete()."""
        if device == self.wifi:
            args = (self.wifi, NM_SETTINGS + "wifihome", "/org/freedesktop/NetworkManager/AccessPoint/ap0", "wifi")
        else:
            args = (self.modem, NM_SETTINGS + "mobile", "/", "mobile")
        return self.mock("AddActivatingConnection", args + (device_state,), "(ssssu)")

    def nm_complete(self, active_connection):
        self.mock("CompleteActivation", (active_connection,), "(s)")
        self.mock("SetConnectivity", (CONNECTIVITY_FULL,), "(u)")

    def nm_wwan_down(self):
        self.mock("RemoveActiveConnection",
                  (self.modem, "/org/freedesktop/NetworkManager/ActiveConnection/mobile"), "(ss)")

    # the daemon

    def start_daemon(self):
        """Run the daemon in the namespace, serving on the private bus, and
        wait until its root target has a real answer (Status is not -1)."""
        self.subscribe(None, "org.freedesktop.DBus.Properties", "PropertiesChanged", ROOT_PATH,
                       self._on_properties_changed)
        self.subscribe(None, TARGET_IFACE, "StatusChanged", ROOT_PATH, self._on_status_changed)
        self.spawn("reachabilityd",
                   [ip_command(), "netns", "exec", self.netns, str(DAEMON), "--system", "--verbose"],
                   env=self.bus_env())
        self.wait_for_name(SERVICE, START_TIMEOUT, process="reachabilityd")
        self.props = self.call(SERVICE, ROOT_PATH, "org.freedesktop.DBus.Properties", "GetAll",
                               (TARGET_IFACE,), "(s)")[0]
        self.wait_until(lambda p: p["Status"] != -1, "the first answer (Status other than -1)",
                        timeout=START_TIMEOUT)

    def _on_properties_changed(self, _conn, _sender, _path, _iface, _member, params):
        iface, changed, invalidated = params.unpack()
        if iface != TARGET_IFACE:
            return
        self.events.append(("PropertiesChanged", changed))
        if self.props is not None:
            self.props.update(changed)
            for name in invalidated:
                self.props.pop(name, None)

    def _on_status_changed(self, _conn, _sender, _path, _iface, _member, params):
        self.status_changed.append(tuple(params.unpack()))
        self.events.append(("StatusChanged", self.status_changed[-1]))

    def wait_until(self, predicate, what, timeout=CHANGE_TIMEOUT):
        """Wait, dispatching the daemon's signals, until predicate(props)
        holds; fail with what was expected and what was seen."""
        deadline = time.monotonic() + timeout
        while not predicate(self.props):
            daemon = self.processes.get("reachabilityd")
            if daemon is not None and daemon.poll() is not None:
                pytest.fail(f"the daemon exited (status {daemon.returncode}) while waiting for {what}",
                            pytrace=False)
            if not self.pump(deadline):
                pytest.fail(f"timed out after {timeout}s waiting for {what}\n"
                            f"root Target now: {describe(self.props)}\n"
                            f"StatusChanged seen: {fmt_status(self.status_changed)}\n"
                            f"kernel route for 1.1.1.1: {self.route_get() or '(none)'}", pytrace=False)

    def wait_for_state(self, expected, what, timeout=CHANGE_TIMEOUT):
        self.wait_until(lambda p: all(p.get(k) == v for k, v in expected.items()), what, timeout)

    def wait_for_status_changed(self, expected, since, what, timeout=CHANGE_TIMEOUT):
        """Wait until the last StatusChanged received after the mark `since`
        is `expected` (status, flags): it follows the PropertiesChanged that
        carried the new values, so it may still be on its way."""
        self.wait_until(lambda _p: self.status_changed[since.status:] and self.status_changed[-1] == expected,
                        f"StatusChanged{expected} ({what})", timeout)

    def sync(self):
        """A round trip to the daemon; every signal it sent before the reply
        has been dispatched on return. Returns the properties read."""
        fresh = self.call(SERVICE, ROOT_PATH, "org.freedesktop.DBus.Properties", "GetAll",
                          (TARGET_IFACE,), "(s)")[0]
        while self.ctx.pending():
            self.ctx.iteration(False)
        return fresh

    def mark(self):
        """A point in the signal history, taken while nothing changes."""
        self.sync()
        return Mark(len(self.events), len(self.status_changed), self.props["Status"], self.props["Flags"])

    def assert_signals(self, since):
        """Since the mark: every StatusChanged follows a PropertiesChanged
        that carried the new Flags (or Status) and names them; every such
        change is followed by exactly one StatusChanged; no StatusChanged
        repeats the previous flags."""
        self.sync()
        status, flags = since.status_value, since.flags
        pending = None
        history = self.events[since.events:]
        context = "\n".join(f"  {kind} {fmt_status([args]) if kind == 'StatusChanged' else describe(args)}"
                             for kind, args in history)
        for kind, args in history:
            if kind == "PropertiesChanged":
                if "Flags" in args or "Status" in args:
                    assert pending is None, \
                        f"Flags/Status changed twice without StatusChanged in between:\n{context}"
                    flags = args.get("Flags", flags)
                    status = args.get("Status", status)
                    pending = (status, flags)
            else:
                assert pending is not None, \
                    f"StatusChanged{args} without a PropertiesChanged carrying Flags/Status before it:\n{context}"
                assert args == pending, \
                    f"StatusChanged{args} does not match the announced (Status, Flags) {pending}:\n{context}"
                pending = None
        assert pending is None, f"no StatusChanged followed the change to {pending}:\n{context}"
        assert_deduplicated(self.status_changed[since.status:])

    def assert_announced(self):
        """The properties as PropertiesChanged told them are the properties
        as GetAll reads them now: no change went unannounced."""
        fresh = self.sync()
        stale = {k: (self.props.get(k), v) for k, v in fresh.items() if self.props.get(k) != v}
        assert not stale, "changed without PropertiesChanged: " + ", ".join(
            f"{k} (announced {old!r}, now {new!r})" for k, (old, new) in stale.items())

    # teardown

    def close(self):
        for sub in self.subscriptions:
            self.conn.signal_unsubscribe(sub)
        self.subscriptions.clear()
        self.stop("reachabilityd")
        self.stop("modemmanager")
        self.stop("dbusmock")
        if self.conn is not None:
            self.conn.close_sync(None)
            self.conn = None
        self.stop("dbus-daemon")
        if self.socket_dir:
            shutil.rmtree(self.socket_dir, ignore_errors=True)
        for ns in reversed(self.namespaces):
            # Anything still running in the namespace was started here: end it by PID.
            pids = subprocess.run([ip_command(), "netns", "pids", ns], capture_output=True, text=True,
                                  check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            subprocess.run([ip_command(), "netns", "del", ns], capture_output=True, check=False)
        self.namespaces.clear()


class Mark:  # pylint: disable=too-few-public-methods
    """Where the signal history stood, and the root target's Status and
    Flags then."""

    def __init__(self, events, status, status_value, flags):
        self.events, self.status, self.status_value, self.flags = events, status, status_value, flags


# Before the daemon's first answer: Status -1 (unknown), Flags 0.
BEFORE_START = Mark(0, 0, -1, 0)


def fmt_flags(flags):
    names = [(0x1, "TransientConnection"), (0x2, "Reachable"), (0x4, "ConnectionRequired"),
             (0x8, "ConnectionOnTraffic"), (0x10, "InterventionRequired"), (0x20, "ConnectionOnDemand"),
             (0x10000, "IsLocalAddress"), (0x20000, "IsDirect"), (0x40000, "IsWWAN")]
    words = [name for bit, name in names if flags & bit]
    return f"{flags:#x} ({' '.join(words) or 'none'})"


def fmt_status(events):
    return ", ".join(f"({status}, {fmt_flags(flags)})" for status, flags in events) or "none"


def describe(props):
    """The interesting properties of a Target (or of one PropertiesChanged)."""
    if props is None:
        return "(not read yet)"
    keys = ("Flags", "Status", "Reachable", "ReachableViaWiFi", "ReachableViaWWAN", "ReachableViaEthernet",
            "ConnectionRequired", "InterfaceType", "Interface", "Connectivity", "Metered", "Vpn",
            "ReachableIPv4", "ReachableIPv6")
    shown = {k: props[k] for k in keys if k in props}
    if isinstance(shown.get("Flags"), int):
        shown["Flags"] = fmt_flags(shown["Flags"])
    return ", ".join(f"{k}={v!r}" for k, v in shown.items()) or "(nothing of note)"


@pytest.fixture
def env(tmp_path, request):
    require()
    environment = Env(tmp_path)
    failed_before = request.session.testsfailed
    try:
        environment.setup_namespaces()
        environment.start_bus()
        environment.start_mock()
        yield environment
    finally:
        failed = request.session.testsfailed > failed_before
        environment.close()
        if failed:
            # The call phase has been reported by now; print past pytest's
            # capture so the logs sit next to the failure.
            capman = request.config.pluginmanager.getplugin("capturemanager")
            with capman.global_and_fixture_disabled() if capman else contextlib.nullcontext():
                for name in ("reachabilityd", "dbusmock", "dbusmock-calls", "modemmanager"):
                    print(f"\n----- {name} log ({request.node.name}) -----\n{environment.log(name)}",
                          file=sys.stderr)


WIFI = {
    "Flags": REACHABLE,
    "Status": 2,
    "Reachable": True,
    "ReachableViaWiFi": True,
    "ReachableViaWWAN": False,
    "ReachableViaEthernet": False,
    "ConnectionRequired": False,
    "InterfaceType": "wifi",
    "Interface": "wlan0",
    "Metered": False,
    "Vpn": False,
    "ReachableIPv4": True,
}

WWAN = {
    "Flags": IS_WWAN | REACHABLE,
    "Status": 1,
    "Reachable": True,
    "ReachableViaWiFi": False,
    "ReachableViaWWAN": True,
    "ReachableViaEthernet": False,
    "ConnectionRequired": False,
    "InterfaceType": "wwan",
    "Interface": "wwan0",
    "Metered": True,
    "Vpn": False,
    "ReachableIPv4": True,
}


def assert_deduplicated(events):
    """StatusChanged comes once per change of Flags, never twice for the same
    flags in a row."""
    for before, after in zip(events, events[1:]):
        assert before != after, f"StatusChanged repeated {after} with nothing changed: {fmt_status(events)}"


# --- the tests ----------------------------------------------------------------

def test_wifi_active_at_start(env):
    """Wi-Fi already connected when the daemon starts: the default route
    leaves through wlan0, a Wi-Fi device in NetworkManager."""
    env.kernel_wifi_up()
    env.nm_wifi_up()
    assert "dev wlan0" in env.route_get()

    env.start_daemon()
    backend = env.call(SERVICE, ROOT_PATH, "org.freedesktop.DBus.Properties", "Get",
                       (SERVICE + ".Manager", "Backend"), "(ss)")[0]
    assert backend == "networkmanager", f"Backend is {backend!r} with NetworkManager (mocked) on the bus"
    env.wait_for_state(WIFI, "Wi-Fi reachability at start-up")
    assert env.props["Connectivity"] == "full"
    # This client listened before the daemon started: it learns the first
    # answer from StatusChanged too (the contract: Status leaving -1 is
    # announced even when a listener could not have read the -1).
    env.wait_for_status_changed((2, REACHABLE), BEFORE_START, "the first answer")
    env.assert_signals(BEFORE_START)
    env.assert_announced()


def test_wifi_connects_at_run_time(env):
    """Nothing connected, then Wi-Fi connects: one StatusChanged to (2,
    Reachable), and the properties follow."""
    env.start_daemon()
    env.wait_for_state({"Flags": 0, "Status": 0, "Reachable": False, "InterfaceType": "", "Interface": ""},
                       "not reachable with no default route")
    # Flags stay 0 but Status leaves -1: that too is a StatusChanged.
    env.wait_for_status_changed((0, 0), BEFORE_START, "the first answer, not reachable")
    start = seen = env.mark()

    env.kernel_wifi_up()
    env.nm_wifi_up()
    env.wait_for_state(WIFI, "Wi-Fi reachability after Wi-Fi connected")
    env.wait_for_status_changed((2, REACHABLE), seen, "Wi-Fi connected")
    env.assert_signals(start)
    env.assert_announced()


def test_wifi_to_wwan_and_back(env):
    """Wi-Fi drops and a metered modem takes the default route over (its IP
    interface wwan0, its control interface cdc-wdm0): IsWWAN, status 1,
    metered. Then Wi-Fi returns and everything goes back."""
    env.kernel_wifi_up()
    env.nm_wifi_up()
    env.start_daemon()
    env.wait_for_state(WIFI, "Wi-Fi reachability before the switch")
    start = seen = env.mark()

    # Wi-Fi is lost; the modem connects (NetworkManager configures the kernel
    # before it reports the device activated).
    env.nm_wifi_down()
    env.kernel_wifi_down()
    env.kernel_wwan_up()
    env.nm_wwan_up(metered=METERED_YES)
    assert "dev wwan0" in env.route_get()

    env.wait_for_state(WWAN, "WWAN reachability after the modem took over")
    assert env.props["Connectivity"] == "full"
    env.wait_for_status_changed((1, IS_WWAN | REACHABLE), seen, "the modem took over")
    env.assert_signals(start)
    env.assert_announced()
    seen = env.mark()

    # Wi-Fi comes back and becomes primary; the modem disconnects.
    env.kernel_wifi_up()
    env.nm_wifi_up()
    env.nm_wwan_down()
    env.kernel_wwan_down()
    assert "dev wlan0" in env.route_get()
    env.wait_for_state(WIFI, "Wi-Fi reachability after Wi-Fi returned")
    env.wait_for_status_changed((2, REACHABLE), seen, "Wi-Fi returned")
    env.assert_signals(start)
    env.assert_announced()


@pytest.mark.parametrize("nm_metered, metered", [(0, False), (2, False), (3, True), (4, False)],
                         ids=["unknown", "no", "guess-yes", "guess-no"])
def test_wwan_metered_follows_networkmanager(env, nm_metered, metered):
    """Metered comes from NetworkManager's verdict on the modem ("yes" or
    "guess-yes"), not from the device type: a modem can be unmetered."""
    env.kernel_wwan_up()
    env.nm_wwan_up(metered=nm_metered)
    env.start_daemon()
    env.wait_for_state(dict(WWAN, Metered=metered), f"WWAN reachability with NetworkManager Metered={nm_metered}")
    env.assert_announced()


def test_route_decides_between_wifi_and_wwan(env):
    """Wi-Fi and modem both connected, Wi-Fi primary with the better default
    route. When that route goes away by hand (NetworkManager is not told),
    the kernel sends packets through wwan0: the daemon follows the kernel's
    route, not NetworkManager's primary connection, and reports the modem's
    type and metered state. Putting the route back returns to Wi-Fi."""
    env.kernel_wwan_up(metric=700)
    env.nm_wwan_up(metered=METERED_YES)
    env.kernel_wifi_up(metric=600)
    env.nm_wifi_up()  # becomes primary
    assert "dev wlan0" in env.route_get()
    env.start_daemon()
    env.wait_for_state(WIFI, "Wi-Fi reachability while both are connected")
    start = seen = env.mark()

    env.ip("route", "del", "default", "via", WLAN_GW, "dev", "wlan0", netns=env.netns)
    assert "dev wwan0" in env.route_get()
    env.wait_for_state(WWAN, "WWAN reachability after the Wi-Fi default route was deleted by hand")
    env.wait_for_status_changed((1, IS_WWAN | REACHABLE), seen, "route deleted by hand")
    seen = env.mark()

    env.kernel_wifi_up(metric=600)
    env.wait_for_state(WIFI, "Wi-Fi reachability after the route came back")
    env.wait_for_status_changed((2, REACHABLE), seen, "route restored by hand")
    env.assert_signals(start)
    env.assert_announced()


def test_wifi_waiting_for_secrets(env):
    """Wi-Fi is activating and waits for its password (device NEED_AUTH), no
    route yet: ConnectionRequired and InterventionRequired, not reachable.
    When the activation completes and the route appears: Wi-Fi."""
    env.start_daemon()
    env.wait_for_state({"Status": 0, "Flags": 0}, "not reachable before anything connects")
    start = seen = env.mark()

    active = env.nm_activating(env.wifi, DEVICE_NEED_AUTH)
    expected = CONNECTION_REQUIRED | INTERVENTION_REQUIRED
    env.wait_for_state({"Flags": expected, "Status": 0, "Reachable": False, "ConnectionRequired": True,
                        "InterfaceType": "", "Interface": "", "Reason": "needs-auth"},
                       "ConnectionRequired|InterventionRequired while Wi-Fi waits for secrets")
    env.wait_for_status_changed((0, expected), seen, "Wi-Fi needs secrets")
    seen = env.mark()

    env.kernel_wifi_up()
    env.nm_complete(active)
    env.wait_for_state(WIFI, "Wi-Fi reachability once the secrets were given")
    env.wait_for_status_changed((2, REACHABLE), seen, "Wi-Fi connected after secrets")
    env.assert_signals(start)
    env.assert_announced()


def test_modem_activating(env):
    """The modem is activating (device PREPARE), no route yet:
    ConnectionRequired (a connection is on its way), not reachable. Then it
    connects: WWAN."""
    env.start_daemon()
    env.wait_for_state({"Status": 0, "Flags": 0}, "not reachable before anything connects")
    start = seen = env.mark()

    env.mock("SetDeviceMetered", (env.modem, METERED_YES), "(su)")
    active = env.nm_activating(env.modem, DEVICE_PREPARE)
    env.wait_for_state({"Flags": CONNECTION_REQUIRED, "Status": 0, "Reachable": False, "ConnectionRequired": True,
                        "Reason": "connecting"}, "ConnectionRequired while the modem is activating")
    env.wait_for_status_changed((0, CONNECTION_REQUIRED), seen, "modem activating")
    seen = env.mark()

    env.kernel_wwan_up()
    env.nm_complete(active)
    env.wait_for_state(WWAN, "WWAN reachability once the modem connected")
    env.wait_for_status_changed((1, IS_WWAN | REACHABLE), seen, "modem connected")
    env.assert_signals(start)
    env.assert_announced()


# --- the Path interface (Manager.WatchPath) -------------------------------------

PATH_PATH = ROOT_PATH + "/path"
PATH_IFACE = SERVICE + ".Path"
METERED_GUESS_YES = 3


class PathWatch:
    """The path object held by the test's connection, its properties kept current by signals."""

    def __init__(self, env):
        self.env = env
        self.changes = []  # the Path properties each PropertiesChanged carried, in arrival order
        env.subscribe(None, "org.freedesktop.DBus.Properties", "PropertiesChanged", PATH_PATH, self._changed)
        assert env.call(SERVICE, ROOT_PATH, SERVICE + ".Manager", "WatchPath") == (PATH_PATH,)
        self.props = env.call(SERVICE, PATH_PATH, "org.freedesktop.DBus.Properties", "GetAll", (PATH_IFACE,),
                              "(s)")[0]

    def _changed(self, _conn, _sender, _path, _iface, _member, params):
        iface, changed, _invalidated = params.unpack()
        if iface == PATH_IFACE:
            # NetworkIdentity aside (another default gateway is another network: test_network_identity.py's).
            shown = {k: v for k, v in changed.items() if k != "NetworkIdentity"}
            if shown:
                self.changes.append(shown)
            self.props.update(changed)

    def wait(self, expected, what):
        deadline = time.monotonic() + CHANGE_TIMEOUT
        while any(self.props.get(k) != v for k, v in expected.items()):
            if not self.env.pump(deadline):
                pytest.fail(f"timed out waiting for {what}: Path now {self.props}", pytrace=False)

    def index(self, name):
        return int(self.env.ip("-o", "link", "show", name, netns=self.env.netns).split(":", 1)[0])


def test_path_wifi_and_wwan_types_order_and_expensive(env):
    """Wi-Fi (metric 600) and a modem metered "yes" (metric 700) both connected: Interfaces lists
    wlan0 (wifi) first, then wwan0 (wwan), each with its gateway; not expensive (Wi-Fi is
    preferred). Wi-Fi's route removed by hand: wwan0 first, wlan0 unusable; Expensive and
    Constrained (metered "yes"). Each change announced once."""
    env.kernel_wwan_up(metric=700)
    env.nm_wwan_up(metered=METERED_YES)
    env.kernel_wifi_up(metric=600)
    env.nm_wifi_up()
    env.start_daemon()
    env.wait_for_state(WIFI, "Wi-Fi reachability while both are connected")
    path = PathWatch(env)
    wlan0 = ("wlan0", path.index("wlan0"), "wifi", False, True, False, [WLAN_GW])
    wwan0 = ("wwan0", path.index("wwan0"), "wwan", False, True, False, [WWAN_GW])
    path.wait({"Interfaces": [wlan0, wwan0], "Flags": REACHABLE, "Expensive": False, "Constrained": False,
               "LinkQuality": "good"}, "Wi-Fi first (its access point at 80 %), then the modem")
    assert path.props["Interfaces"] == [wlan0, wwan0], path.props

    env.ip("route", "del", "default", "via", WLAN_GW, "dev", "wlan0", netns=env.netns)
    unrouted = ("wlan0", path.index("wlan0"), "wifi", False, False, False, [])
    # No ModemManager on the bus: the modem's signal is not known.
    path.wait({"Interfaces": [wwan0, unrouted], "Flags": IS_WWAN | REACHABLE, "Expensive": True,
               "Constrained": True, "LinkQuality": "unknown"}, "the modem first, expensive and constrained")
    env.sync()
    assert path.changes == [{"Interfaces": [wwan0, unrouted], "Flags": IS_WWAN | REACHABLE, "Expensive": True,
                             "Constrained": True, "LinkQuality": "unknown"}], path.changes


def test_path_metered_guess_is_expensive_not_constrained(env):
    """A modem NetworkManager guesses metered: Expensive, not Constrained (no user setting)."""
    env.kernel_wwan_up()
    env.nm_wwan_up(metered=METERED_GUESS_YES)
    env.start_daemon()
    env.wait_for_state(dict(WWAN, Metered=True), "WWAN reachability")
    path = PathWatch(env)
    path.wait({"Expensive": True, "Constrained": False}, "expensive, not constrained")
    assert path.props["Interfaces"][0][:3] == ("wwan0", path.index("wwan0"), "wwan"), path.props


# --- LinkQuality ------------------------------------------------------------------

ACCESS_POINT = "/org/freedesktop/NetworkManager/AccessPoint/ap0"


def test_path_link_quality_follows_the_access_point(env):
    """Wi-Fi's LinkQuality is its access point's strength: 80 % good, 45 % moderate, 20 % minimal,
    75 % good again. A strength that stays within one quality (80 → 60, 45 → 35) announces
    nothing: exactly one PropertiesChanged per quality, carrying LinkQuality alone. Wi-Fi gone (no
    usable interface): unknown."""
    env.kernel_wifi_up()
    env.nm_wifi_up()
    env.start_daemon()
    env.wait_for_state(WIFI, "Wi-Fi reachability")
    path = PathWatch(env)
    path.wait({"LinkQuality": "good"}, "good at 80 %")
    env.sync()
    start = len(path.changes)
    for strength, quality in ((60, "good"), (45, "moderate"), (35, "moderate"), (20, "minimal"), (75, "good")):
        env.mock("SetAccessPointStrength", (ACCESS_POINT, strength), "(sy)")
        path.wait({"LinkQuality": quality}, f"{quality} at {strength} %")
    env.sync()
    assert path.changes[start:] == [{"LinkQuality": "moderate"}, {"LinkQuality": "minimal"},
                                    {"LinkQuality": "good"}], path.changes

    env.nm_wifi_down()
    env.kernel_wifi_down()
    path.wait({"Interfaces": [("wlan0", path.index("wlan0"), "wifi", False, False, False, []),
                              ("wwan0", path.index("wwan0"), "wwan", False, False, False, [])],
               "LinkQuality": "unknown"}, "no usable interface: unknown")


def test_path_link_quality_from_modemmanager(env):
    """The modem's LinkQuality is ModemManager's SignalQuality for the device's Udi, followed
    through PropertiesChanged: 70 % good, 40 % moderate, no longer recent: unknown, 10 % minimal.
    ModemManager leaving the bus: unknown; back with the modem at 90 %: good."""
    modem = env.start_modemmanager(70)
    env.kernel_wwan_up()
    env.nm_wwan_up()
    env.start_daemon()
    env.wait_for_state(WWAN, "WWAN reachability")
    path = PathWatch(env)
    # The daemon reads ModemManager asynchronously: "unknown" may come first.
    path.wait({"LinkQuality": "good"}, "good at 70 %")
    env.sync()
    start = len(path.changes)
    for quality, recent, expected in ((40, True, "moderate"), (40, False, "unknown"), (10, True, "minimal")):
        env.mm("SetSignalQuality", (modem, quality, recent), "(oub)")
        path.wait({"LinkQuality": expected}, f"{expected} at {quality} % (recent: {recent})")
    env.sync()
    assert path.changes[start:] == [{"LinkQuality": "moderate"}, {"LinkQuality": "unknown"},
                                    {"LinkQuality": "minimal"}], path.changes

    env.stop("modemmanager")
    path.wait({"LinkQuality": "unknown"}, "ModemManager gone: unknown")
    env.start_modemmanager(90)
    path.wait({"LinkQuality": "good"}, "ModemManager back, 90 %: good")
    env.sync()
    assert path.changes[start + 3:] == [{"LinkQuality": "unknown"}, {"LinkQuality": "good"}], path.changes
