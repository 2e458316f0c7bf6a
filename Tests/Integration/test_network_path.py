"""NetworkPath's NWPathMonitor, run as a program in the kernel two-uplink lab.

``network-path-example`` is the issue's snippet and Apple's documented sample
compiled against NetworkPath: a monitor (its required or prohibited types from
the command line) whose pathUpdateHandler prints one line per update, Apple's
sample handler on a queue of its own, and ``for await path in
NWPathMonitor()``. It runs in namespace A beside the daemon (``--backend
kernel``), once with the lab's bus as its system bus (the daemon's Path
object) and once with no bus at all (the same engine in-process), and every
test expects the same lines from both: carrier loss, a second uplink, IPv6
only, a VPN tunnel, required and prohibited interface types, the daemon
leaving and coming back. Wi-Fi and mobile broadband come from NetworkManager
mocked with python-dbusmock (test_wifi_wwan.py's lab); metered, a captive
portal and carrier loss from the real NetworkManager (the harness's NM lab). Lines are compared field by field with what the
kernel's state means in Apple's terms; a monitor never prints the same path
twice in a row.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading
import time

import pytest

import harness
from harness import CHANGE_TIMEOUT, OBJECT_MANAGER_IFACE, ROOT_PATH, SERVICE, STOP_TIMEOUT
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4, SECOND, SECOND_GATEWAY_V4, SECOND_METRIC, SECOND_PEER, SECOND_V4, TUN, UPLINK,
    UPLINK_METRIC, UPLINK_PEER, daemon_args, fail_or_skip, kernel_lab_without_carrier, online)
from test_wifi_wwan import METERED_YES, WIFI, WLAN_GW, WWAN_GW, env  # pylint: disable=unused-import

EXAMPLE = harness.daemon_binary().parent / "network-path-example"
PATH_OBJECT = ROOT_PATH + "/path"
NO_BUS = "unix:path=/nonexistent/network-path-test-bus"
MODES = ("daemon", "in-process")
FIRST_TIMEOUT = 3.0  # the first path comes at once after start
UPLINK_V6, GATEWAY_V6 = "2001:db8:1::10", "2001:db8:1::1"

# A wire with carrier: link quality good.
CONNECTED = {"status": "satisfied", "interfaces": UPLINK, "uses": "wiredEthernet", "ipv4": "true", "ipv6": "false",
             "gateways": f"{GATEWAY_V4}:0", "expensive": "false", "constrained": "false", "quality": "good"}
OFFLINE = {"status": "unsatisfied", "interfaces": "", "uses": "", "ipv4": "false", "ipv6": "false", "dns": "false",
           "gateways": "", "expensive": "false", "constrained": "false", "quality": "unknown"}
BOTH_UPLINKS = dict(CONNECTED, interfaces=f"{SECOND},{UPLINK}", gateways=f"{SECOND_GATEWAY_V4}:0,{GATEWAY_V4}:0")
# A tunnel has no link quality of its own; the wire under it is not the preferred interface.
VPN = dict(CONNECTED, interfaces=f"{TUN},{UPLINK}", uses="wiredEthernet,other", quality="unknown")


def parse(line: str) -> dict:
    """``handler satisfied k=v …`` as a dict with ``label`` and ``status``."""
    words = line.split(" ")
    fields = {"label": words[0], "status": words[1]}
    fields.update(word.split("=", 1) for word in words[2:] if "=" in word)
    return fields


class PathProgram:
    """network-path-example in namespace A, from the daemon or in-process; its lines are read by a
    thread (with the time each arrived) and queued."""

    def __init__(self, prefix: list, bus_address: str, directory, mode: str, *args: str):
        self.mode, self.args = mode, args
        env = dict(os.environ)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        env["DBUS_SYSTEM_BUS_ADDRESS"] = bus_address
        name = "-".join(["path", mode, *[a.strip("-").replace(",", "+") for a in args]])
        self.log = directory / f"{name}.log"
        with open(self.log, "ab") as log:
            self.popen = subprocess.Popen([*prefix, str(EXAMPLE), *args],
                                          stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True)
        self.queue: queue.Queue = queue.Queue()
        self.lines: list = []  # every line taken from the queue, parsed
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.popen.stdout:
            self.queue.put((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    def __repr__(self):
        return f"network-path-example {' '.join(self.args)} ({self.mode})"

    def _take(self, timeout: float):
        try:
            _, line = self.queue.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None
        self.lines.append(parse(line))
        return self.lines[-1]

    def handler_lines(self) -> list:
        return [line for line in self.lines if line["label"] == "handler"]

    def describe(self) -> str:
        shown = "\n".join(f"    {line}" for line in self.lines[-20:])
        return f"{self!r}; lines so far:\n{shown}\n  its log:\n{harness.tail(self.log, 30)}"

    def next(self, label: str, what: str, timeout: float = CHANGE_TIMEOUT) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            line = self._take(deadline - time.monotonic())
            if line is None:
                raise harness.WaitTimeout(f"{what}: no {label} line within {timeout} s from {self.describe()}")
            if line["label"] == label:
                return line

    def wait_for(self, expected: dict, what: str, label: str = "handler", timeout: float = CHANGE_TIMEOUT) -> dict:
        """The first ``label`` line (from the current one on) whose fields include ``expected``."""
        last = next((line for line in reversed(self.lines) if line["label"] == label), None)
        if last is not None and matches(last, expected):
            return last
        deadline = time.monotonic() + timeout
        while True:
            line = self.next(label, what, deadline - time.monotonic())
            if matches(line, expected):
                return line

    def drain(self, settle: float = 0.3) -> None:
        """Takes whatever else arrives within ``settle`` seconds."""
        while self._take(settle) is not None:
            pass

    def stop(self, signum=signal.SIGTERM) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signum)
        try:
            self.popen.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait()


def matches(line: dict, expected: dict) -> bool:
    return all(line.get(key) == value for key, value in expected.items())


@pytest.fixture
def programs():
    started = []

    def start(lab, mode, *args):
        """In the kernel lab's namespace A: from the daemon, or in-process with no bus at all."""
        bus = lab.bus.address if mode == "daemon" else NO_BUS
        started.append(PathProgram(harness.Namespaces.exec_argv(lab.ns_a), bus, lab.directory, mode, *args))
        return started[-1]

    def start_in(prefix, bus_address, directory, mode, *args):
        """Run by ``prefix`` (``ip netns exec``, ``nsenter``) with ``bus_address`` as its system bus."""
        started.append(PathProgram(prefix, bus_address, directory, mode, *args))
        return started[-1]

    start.start_in = start_in

    yield start
    for program in started:
        program.stop(signal.SIGKILL)


def both(programs, lab, *args) -> list:
    return [programs(lab, mode, *args) for mode in MODES]


def wait_all(running: list, expected: dict, what: str) -> list:
    return [program.wait_for(expected, f"{what} ({program!r})") for program in running]


def assert_same_answers(running: list) -> None:
    """Daemon and in-process end on the same path (every field), and neither printed a path twice."""
    for program in running:
        program.drain()
        lines = program.handler_lines()
        repeats = [a for a, b in zip(lines, lines[1:]) if a == b]
        assert not repeats, f"the same path reported twice in a row: {repeats}\n{program.describe()}"
    by_args: dict = {}
    for program in running:
        by_args.setdefault(program.args, []).append(program)
    for pair in by_args.values():
        finals = [p.handler_lines()[-1] for p in pair]
        assert all(final == finals[0] for final in finals), (
            "daemon and in-process disagree:\n" + "\n".join(p.describe() for p in pair))


def path_objects(lab) -> list:
    objects = lab.client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0]
    return [path for path in objects if path == PATH_OBJECT]


# --- tests ------------------------------------------------------------------------


def test_first_path_at_once_and_released_on_exit(online, programs):
    """Each program prints the current path at once after start (handler, Apple's sample and the
    sequence), the same from the daemon and in-process; the daemon's Path object exists while the
    program holds it and goes when the program is killed (leaving the bus releases it)."""
    lab = online.lab
    running = both(programs, lab)
    for program in running:
        first = program.next("handler", "the first path", timeout=FIRST_TIMEOUT)
        assert matches(first, CONNECTED), program.describe()
        program.wait_for(CONNECTED, "the first path from the sequence", label="sequence", timeout=FIRST_TIMEOUT)
        program.wait_for({"status": "connected", "expensive": "false"}, "Apple's sample", label="sample",
                         timeout=FIRST_TIMEOUT)
    assert path_objects(lab) == [PATH_OBJECT]
    assert_same_answers(running)
    running[0].stop(signal.SIGKILL)
    harness.wait_until(lambda: path_objects(lab) == [], CHANGE_TIMEOUT, "the Path object released on exit",
                       lambda: str(path_objects(lab)))


def test_carrier_loss_and_return(online, programs):
    """kveth0 loses carrier: unsatisfied, no interface; carrier back: satisfied over kveth0."""
    lab = online.lab
    running = both(programs, lab)
    wait_all(running, CONNECTED, "connected")
    lab.set_peer(UPLINK_PEER, False)
    wait_all(running, OFFLINE, "unsatisfied without carrier")
    lab.set_peer(UPLINK_PEER, True)
    wait_all(running, CONNECTED, "satisfied with carrier back")
    assert_same_answers(running)


def test_second_uplink(online, programs):
    """kveth1 without a default route is not a path; with one (metric 50) it comes first, kveth0
    second, both gateways in that order. kveth1 loses carrier but keeps its route (``linkdown``):
    the kernel still sends internet traffic there, so the path is unsatisfied although kveth0 could
    carry it. kveth1 set down (its routes go): kveth0 alone again."""
    lab = online.lab
    running = both(programs, lab)
    wait_all(running, CONNECTED, "connected")
    lab.add_uplink(SECOND, SECOND_PEER, SECOND_V4, SECOND_GATEWAY_V4)
    lab.wait_operstate(SECOND, "UP")
    lab.ip_a("route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "metric", SECOND_METRIC)
    wait_all(running, BOTH_UPLINKS, "both uplinks, kveth1 first")
    for program in running:
        assert all(line["interfaces"] in (UPLINK, f"{SECOND},{UPLINK}") for line in program.handler_lines()), (
            "kveth1 without its default route is no path: " + program.describe())
    lab.set_peer(SECOND_PEER, False)
    wait_all(running, OFFLINE, "unsatisfied while the kernel still chooses kveth1's dead route")
    lab.ip_a("link", "set", SECOND, "down")
    wait_all(running, CONNECTED, "kveth0 alone once kveth1 is down")
    assert_same_answers(running)


REQUIREMENTS = [  # (arguments, path while kveth0 is up)
    (("--required", "wiredEthernet"), CONNECTED),
    (("--required", "wifi"), OFFLINE),
    (("--required", "cellular"), OFFLINE),
    (("--prohibited", "wiredEthernet"), OFFLINE),
    (("--prohibited", "wifi,cellular"), CONNECTED),
]


def test_required_and_prohibited_interface_types(online, programs):
    """A monitor requiring Ethernet, or prohibiting only Wi-Fi and cellular, follows kveth0; one
    requiring Wi-Fi or cellular, or prohibiting Ethernet, is unsatisfied throughout and reports
    nothing when kveth0 flaps (its path did not change)."""
    lab = online.lab
    running = [(programs(lab, mode, *args), path) for args, path in REQUIREMENTS for mode in MODES]
    for program, path in running:
        program.wait_for(path, "the first path", timeout=FIRST_TIMEOUT)
    lab.set_peer(UPLINK_PEER, False)
    for program, path in running:
        program.wait_for(OFFLINE, "unsatisfied without carrier")
    lab.set_peer(UPLINK_PEER, True)
    for program, path in running:
        program.wait_for(path, "the path with carrier back")
    assert_same_answers([program for program, _ in running])
    for program, path in running:
        if path is OFFLINE:
            assert len(program.handler_lines()) == 1, "its path never changed: " + program.describe()
            # Its own requirement leaves out the one interface there is: that is why.
            assert program.handler_lines()[0]["reason"] == "interface-prohibited", program.describe()


def test_ipv6_only(online, programs):
    """IPv4's default route removed: unsatisfied. An IPv6 default route: satisfied over kveth0 with
    IPv6 alone, its IPv6 gateway."""
    lab = online.lab
    lab.ip_b("addr", "add", f"{GATEWAY_V6}/64", "dev", "kup0", "nodad")
    lab.ip_a("addr", "add", f"{UPLINK_V6}/64", "dev", UPLINK, "nodad")
    running = both(programs, lab)
    wait_all(running, CONNECTED, "connected")
    lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
    wait_all(running, OFFLINE, "unsatisfied without an IPv4 default route")
    lab.ip_a("-6", "route", "add", "default", "via", GATEWAY_V6, "dev", UPLINK)
    wait_all(running, dict(CONNECTED, ipv4="false", ipv6="true", gateways=f"[{GATEWAY_V6}]:0"), "IPv6 only")
    assert_same_answers(running)


def test_vpn_tunnel(online, programs):
    """A full tunnel through tun0 (metric 20) over kveth0: tun0 first, kveth0 second; the path uses
    Ethernet (the underlay) and other (the tunnel). Prohibiting other leaves kveth0; requiring other
    leaves tun0, still over Ethernet. kveth0 loses carrier: the tunnel has no way out, every monitor
    is unsatisfied; carrier back: the tunnel again; the tunnel removed: kveth0 alone."""
    if not os.path.exists("/dev/net/tun"):
        fail_or_skip("needs /dev/net/tun (the tun module)")
    lab = online.lab
    kinds = [((), VPN, CONNECTED), (("--prohibited", "other"), dict(CONNECTED, quality="unknown"), CONNECTED),
             (("--required", "other"), dict(VPN, interfaces=TUN, gateways=""), OFFLINE)]
    running = [(programs(lab, mode, *args), tunnel, plain) for args, tunnel, plain in kinds for mode in MODES]
    for program, _, plain in running:
        program.wait_for(plain, "before the tunnel", timeout=FIRST_TIMEOUT)
    tun = lab.add_vpn_tun()
    for program, tunnel, _ in running:
        program.wait_for(tunnel, "through the tunnel")
    lab.set_peer(UPLINK_PEER, False)
    for program, _, _ in running:
        program.wait_for(OFFLINE, "no underlay, no path")
    lab.set_peer(UPLINK_PEER, True)
    for program, tunnel, _ in running:
        program.wait_for(tunnel, "through the tunnel with carrier back")
    lab.ip_a("link", "del", TUN)
    lab.detach_tun(tun)
    for program, _, plain in running:
        program.wait_for(plain, "the tunnel gone")
    assert_same_answers([program for program, _, _ in running])


def test_daemon_leaves_and_returns(online, programs):
    """The daemon stops: the path is unsatisfied, nothing known; it starts again: the monitor holds
    the new instance's Path object and reports kveth0 again."""
    lab = online.lab
    program = programs(lab, "daemon")
    program.wait_for(CONNECTED, "connected", timeout=FIRST_TIMEOUT)
    lab.daemons[-1].stop()
    program.wait_for(OFFLINE, "unsatisfied with the daemon gone")
    online.daemon = lab.daemon(args=daemon_args("--backend", "kernel"))  # the fixture checks it still runs
    program.wait_for(CONNECTED, "connected through the daemon's new instance")
    assert path_objects(lab) == [PATH_OBJECT]
    program.drain()
    lines = program.handler_lines()
    assert not [a for a, b in zip(lines, lines[1:]) if a == b], program.describe()


# --- Wi-Fi and mobile broadband, NetworkManager mocked ------------------------------

# The access point's strength is 80 %: good.
WIFI_PATH = {"status": "satisfied", "interfaces": "wlan0,wwan0", "uses": "wifi", "expensive": "false",
             "constrained": "false", "gateways": f"{WLAN_GW}:0,{WWAN_GW}:0", "ipv4": "true", "quality": "good"}
WIFI_ONLY = dict(WIFI_PATH, interfaces="wlan0", gateways=f"{WLAN_GW}:0")
# A modem that is not the preferred interface: expensive (a modem), constrained and its quality
# unknown (the facts tell them for the preferred interface); without ModemManager it stays unknown.
MODEM_BESIDE = dict(WIFI_PATH, interfaces="wwan0", uses="cellular", expensive="true", gateways=f"{WWAN_GW}:0",
                    quality="unknown")
# The modem preferred, metered "yes" by the user: expensive and constrained.
MODEM_ALONE = dict(MODEM_BESIDE, constrained="true")
WIFI_WWAN_KINDS = [  # (arguments, both connected, Wi-Fi gone)
    ((), WIFI_PATH, MODEM_ALONE),
    (("--required", "wifi"), WIFI_ONLY, OFFLINE),
    (("--required", "cellular"), MODEM_BESIDE, MODEM_ALONE),
    (("--prohibited", "wifi"), MODEM_BESIDE, MODEM_ALONE),
    (("--prohibited", "cellular,wiredEthernet"), WIFI_ONLY, OFFLINE),
]


def test_wifi_and_wwan_through_networkmanager(env, programs):  # pylint: disable=redefined-outer-name
    """Wi-Fi (metric 600) and a modem metered "yes" (metric 700): the path is Wi-Fi first, then the
    modem, not expensive; a monitor requiring cellular, or prohibiting Wi-Fi, gets the modem alone,
    expensive. Wi-Fi disconnected: the modem is the path, expensive and constrained (the user's
    metered setting); a monitor requiring Wi-Fi is unsatisfied. The in-process programs start
    before the daemon (so they choose in-process, with NetworkManager through libnm), the others
    after it; both give the same paths."""
    env.kernel_wwan_up(metric=700)
    env.nm_wwan_up(metered=METERED_YES)
    env.kernel_wifi_up(metric=600)
    env.nm_wifi_up()
    running = []
    for mode in ("in-process", "daemon"):
        if mode == "daemon":
            env.start_daemon()
            env.wait_for_state(WIFI, "the daemon's Wi-Fi answer")
        prefix = harness.Namespaces.exec_argv(env.netns)
        started = [(programs.start_in(prefix, env.address, env.tmp, mode, *args), connected, gone)
                   for args, connected, gone in WIFI_WWAN_KINDS]
        for program, connected, _ in started:
            program.wait_for(connected, "both connected", timeout=FIRST_TIMEOUT)
            program.wait_for({}, "the sequence's first path", label="sequence", timeout=FIRST_TIMEOUT)
        running += started
    env.nm_wifi_down()
    env.kernel_wifi_down()
    for program, _, gone in running:
        program.wait_for(gone, "Wi-Fi gone")
    assert_same_answers([program for program, _, _ in running])


def test_link_quality_through_networkmanager(env, programs):  # pylint: disable=redefined-outer-name
    """linkQuality from the access point's strength and ModemManager's signal quality, the same from
    the daemon and in-process. Wi-Fi (80 %) preferred over a modem (ModemManager: 60 %): good for a
    plain monitor, unknown for one requiring cellular (not the preferred interface). The strength
    falls to 40 %: moderate; 10 %: minimal. Wi-Fi gone: the modem is preferred, good at 60 %, for
    both monitors; ModemManager says 20 %: minimal."""
    modem = env.start_modemmanager(60)
    env.kernel_wwan_up(metric=700)
    env.nm_wwan_up(metered=METERED_YES)
    env.kernel_wifi_up(metric=600)
    env.nm_wifi_up()
    kinds = [((), dict(WIFI_PATH, quality="good")), (("--required", "cellular"), MODEM_BESIDE)]
    running = []
    for mode in ("in-process", "daemon"):
        if mode == "daemon":
            env.start_daemon()
            env.wait_for_state(WIFI, "the daemon's Wi-Fi answer")
        prefix = harness.Namespaces.exec_argv(env.netns)
        for args, connected in kinds:
            program = programs.start_in(prefix, env.address, env.tmp, mode, *args)
            program.wait_for(connected, "both connected", timeout=FIRST_TIMEOUT)
            running.append(program)
    plain = [program for program in running if not program.args]
    cellular = [program for program in running if program.args]
    for strength, quality in ((40, "moderate"), (10, "minimal")):
        env.mock("SetAccessPointStrength", ("/org/freedesktop/NetworkManager/AccessPoint/ap0", strength), "(sy)")
        wait_all(plain, dict(WIFI_PATH, quality=quality), f"the access point at {strength} %")
    env.nm_wifi_down()
    env.kernel_wifi_down()
    wait_all(running, dict(MODEM_ALONE, quality="good"), "the modem preferred, 60 %")
    env.mm("SetSignalQuality", (modem, 20, True), "(oub)")
    wait_all(running, dict(MODEM_ALONE, quality="minimal"), "the modem at 20 %")
    for program in cellular:
        assert [line["quality"] for line in program.handler_lines()] == ["unknown", "good", "minimal"], (
            program.describe())
    assert_same_answers(running)


# --- the real NetworkManager ---------------------------------------------------------

NM_PATH_CONNECTED = {"status": "satisfied", "interfaces": harness.NM_IFNAME, "uses": "wiredEthernet", "ipv4": "true",
                     "ipv6": "true", "dns": "true", "expensive": "false", "constrained": "false", "quality": "good",
                     "gateways": f"{harness.UPSTREAM_V4}:0,[{harness.UPSTREAM_V6}]:0"}
NM_PROFILE = "reach-wired"


def nmcli(lab, *args) -> None:
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    argv = [harness.need_tool("nmcli"), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env, check=False)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"


def set_metered(lab, value: str) -> None:
    """The profile's metered setting, applied at once, as a user does with nmcli."""
    nmcli(lab, "connection", "modify", NM_PROFILE, "connection.metered", value)
    nmcli(lab, "device", "reapply", harness.NM_IFNAME)


def test_networkmanager_metered_portal_and_carrier(nm_lab, programs):
    """NetworkManager's Ethernet profile: satisfied over nmveth0, both families, DNS. Metered "yes"
    (the user's setting): expensive and constrained; back to "unknown": neither. A captive portal:
    unsatisfied (the internet's flags speak for the preferred interface); gone: satisfied. Carrier
    lost: unsatisfied; back: satisfied. The in-process programs (libnm) start before the daemon,
    the daemon's after; both give the same paths."""
    lab = nm_lab
    prefix = [harness.need_tool("nsenter"), "-t", str(lab.anchor.pid), "-n", "-m", "-u", "--"]
    kinds = [(), ("--required", "wiredEthernet")]
    running = [programs.start_in(prefix, lab.bus.address, lab.directory, "in-process", *args) for args in kinds]
    for program in running:
        program.wait_for(NM_PATH_CONNECTED, "connected (in-process)")
    root = lab.recorder()
    try:
        lab.daemon()
        root.sync()
        root.wait_props({"Backend": "networkmanager"}, "Backend networkmanager", interface=harness.MANAGER_IFACE)
    finally:
        root.close()
    daemon_side = [programs.start_in(prefix, lab.bus.address, lab.directory, "daemon", *args) for args in kinds]
    for program in daemon_side:
        program.wait_for(NM_PATH_CONNECTED, "connected (daemon)", timeout=FIRST_TIMEOUT)
    assert path_objects(lab) == [PATH_OBJECT], "the daemon-side programs hold the path object"
    running += daemon_side

    set_metered(lab, "yes")
    wait_all(running, dict(NM_PATH_CONNECTED, expensive="true", constrained="true"), "metered yes")
    set_metered(lab, "unknown")
    wait_all(running, NM_PATH_CONNECTED, "metered unknown")

    lab.set_portal(True)
    assert lab.check_connectivity() == "portal", "NetworkManager did not see the portal (harness problem)"
    wait_all(running, {"status": "unsatisfied", "interfaces": ""}, "behind a captive portal")
    lab.set_portal(False)
    assert lab.check_connectivity() == "full"
    wait_all(running, NM_PATH_CONNECTED, "the portal gone")

    lab.set_carrier(False)
    wait_all(running, OFFLINE, "carrier lost")
    lab.set_carrier(True)
    wait_all(running, NM_PATH_CONNECTED, "carrier back")
    assert_same_answers(running)
