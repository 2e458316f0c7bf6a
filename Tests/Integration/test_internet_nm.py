"""The internet target (the root object) against the real NetworkManager.

NetworkManager runs in a network namespace with one static Ethernet profile on
``nmveth0``; its peer ``upveth0`` sits in an "upstream" namespace with the
gateway addresses, dnsmasq and the connectivity-check web server. The daemon
runs in NetworkManager's namespaces and serves on the same private system bus.
Faults are real: the peer losing carrier, the conncheck server answering like
a captive portal or not at all, NetworkManager stopped and started.

Every wait is bounded and driven by the daemon's PropertiesChanged and
StatusChanged signals (and NetworkManager's StateChanged); nothing sleeps to
synchronise. NetworkManager's connectivity check is forced with its
CheckConnectivity method instead of waiting for its interval.
"""

import os
import signal
import time

import pytest

import conftest
import harness
from harness import (CONNECTION_REQUIRED, INTERVENTION_REQUIRED, MANAGER_IFACE, NM_STATE_CONNECTED_GLOBAL,
                     NM_STATE_DISCONNECTED, REACHABLE, ROOT_PATH, SERVICE, TARGET_IFACE, TRANSIENT_CONNECTION,
                     fmt_props)
from test_kernel_backend import fail_or_skip, vpn_tun

CONNECTED = {
    "Kind": "internet",
    "Name": "",
    "Flags": REACHABLE,
    "Status": 2,
    "Reachable": True,
    "ReachableViaWiFi": False,
    "ReachableViaWWAN": False,
    "ReachableViaEthernet": True,
    "ConnectionRequired": False,
    "InterfaceType": "ethernet",
    "Interface": harness.NM_IFNAME,
    "Addresses": [],
    "Connectivity": "full",
    "Metered": False,
    "Vpn": False,
    "ReachableIPv4": True,
    "ReachableIPv6": True,
    "Reason": "",
    "Error": "",
}

PORTAL_FLAGS = REACHABLE | CONNECTION_REQUIRED | INTERVENTION_REQUIRED  # 0x16


class Online:  # pylint: disable=too-few-public-methods
    """The lab with NetworkManager connected and the daemon showing it."""

    def __init__(self, lab, recorder, daemon, started_us):
        self.lab, self.recorder, self.daemon, self.started_us = lab, recorder, daemon, started_us

    def get_all(self):
        return self.lab.client.get_all(SERVICE, ROOT_PATH, TARGET_IFACE)

    def refresh(self):
        return self.lab.client.call(SERVICE, ROOT_PATH, TARGET_IFACE, "Refresh")


def now_us():
    return time.time_ns() // 1000


def differing(props, expected):
    return {k: props.get(k, "(missing)") for k, v in expected.items() if props.get(k) != v}


@pytest.fixture
def online(nm_lab):
    """NetworkManager connected, then the daemon started; waits for the daemon's connected answer."""
    yield from started_online(nm_lab)


def started_online(lab):
    recorder = lab.recorder()  # before the daemon: every signal it sends is seen
    started_us = now_us()
    daemon = lab.daemon()
    recorder.sync()
    recorder.wait_props({"Backend": "networkmanager"}, "Backend networkmanager", interface=MANAGER_IFACE)
    recorder.wait_answer(CONNECTED, "the connected answer after start-up", mark=harness.Mark(0, {}))
    yield Online(lab, recorder, daemon, started_us)
    recorder.close()
    assert daemon.running, f"the daemon exited during the test (status {daemon.returncode})"


def test_connected_at_start(online):
    """NetworkManager connected before the daemon starts: Reachable via Ethernet on nmveth0, both
    address families, full connectivity, and a single StatusChanged(2, Reachable) as the first answer."""
    props = online.get_all()
    assert not differing(props, CONNECTED), (f"GetAll differs from the connected answer: "
                                             f"{fmt_props(differing(props, CONNECTED))}")
    backend = online.lab.client.get(SERVICE, ROOT_PATH, MANAGER_IFACE, "Backend")
    assert backend == "networkmanager"
    assert online.started_us <= props["LastChanged"] <= now_us(), (
        f"LastChanged {props['LastChanged']} is not between the daemon's start ({online.started_us}) and now")
    changes = online.recorder.status_changes()
    assert changes == [(2, REACHABLE)], (
        "the first answer should be one StatusChanged(2, Reachable), with no transient state:\n"
        + online.recorder.describe())
    online.recorder.assert_announced(harness.Mark(0, {}))


def test_refresh_returns_the_properties(online):
    """Refresh() is the synchronous answer: (Flags, Status) equal to the properties; nothing changes."""
    mark = online.recorder.mark()
    flags, status = online.refresh()
    assert (flags, status) == (REACHABLE, 2)
    client = online.lab.client
    assert (flags, status) == (client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Flags"),
                               client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Status"))
    online.recorder.barrier()
    assert online.recorder.status_changes(mark) == [], (
        "Refresh with nothing changed emitted StatusChanged:\n" + online.recorder.describe(mark))


def test_carrier_lost_and_back(online):
    """The upstream peer goes down: not reachable (0, 0); NetworkManager deactivates (no route,
    connectivity none). It comes back: NetworkManager activates again and the answer is (2, Reachable).
    StatusChanged comes once per change of Flags, after the PropertiesChanged that carries them."""
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()

    lab.set_carrier(False)
    recorder.wait_answer({"Flags": 0, "Status": 0, "Reachable": False, "ReachableViaEthernet": False},
                         "not reachable after the carrier loss", mark=mark)
    lab.wait_nm_state(NM_STATE_DISCONNECTED)
    recorder.wait_props({"Flags": 0, "Status": 0, "Interface": "", "InterfaceType": "", "ReachableIPv4": False,
                         "ReachableIPv6": False, "Connectivity": "none"},
                        "no route and connectivity none once NetworkManager deactivated", mark=mark)

    up_us = now_us()
    lab.set_carrier(True)
    lab.wait_nm_state(NM_STATE_CONNECTED_GLOBAL)
    recorder.wait_answer(CONNECTED, "the connected answer after the carrier came back", mark=mark)

    changes = recorder.status_changes(mark)
    assert changes in ([(0, 0), (2, REACHABLE)], [(0, 0), (0, CONNECTION_REQUIRED), (2, REACHABLE)]), (
        "expected StatusChanged (0, 0) on the way down and (2, Reachable) on the way up, with at most one "
        "(0, ConnectionRequired) while NetworkManager activates; got:\n" + recorder.describe(mark))
    recorder.assert_announced(mark)
    assert recorder.props["LastChanged"] >= up_us, "LastChanged did not move when Flags changed"


def test_captive_portal(online):
    """The conncheck server answers like a portal: Connectivity "portal", Flags
    Reachable|ConnectionRequired|InterventionRequired, Status 0 (not reachable); the interface is still
    the one on the path. Back to the expected answer: connected again."""
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()

    lab.set_portal(True)
    assert lab.check_connectivity() == "portal", "NetworkManager did not see the portal (harness problem)"
    recorder.wait_answer({"Connectivity": "portal", "Flags": PORTAL_FLAGS, "Status": 0, "Reachable": False,
                          "ConnectionRequired": True, "ReachableViaEthernet": False, "Interface": harness.NM_IFNAME,
                          "InterfaceType": "ethernet", "Reason": "portal"}, "the captive-portal answer", mark=mark)
    assert online.refresh() == (PORTAL_FLAGS, 0)

    lab.set_portal(False)
    assert lab.check_connectivity() == "full"
    recorder.wait_answer(CONNECTED, "the connected answer after the portal was passed", mark=mark)

    assert recorder.status_changes(mark) == [(0, PORTAL_FLAGS), (2, REACHABLE)], recorder.describe(mark)
    recorder.assert_announced(mark)


def device_connectivity(lab) -> tuple:
    """NetworkManager's (Ip4Connectivity, Ip6Connectivity) of nmveth0, as names."""
    path = lab.client.call(harness.NM_NAME, harness.NM_PATH, harness.NM_IFACE, "GetDeviceByIpIface", "s",
                           (harness.NM_IFNAME,))[0]
    return tuple(harness.NM_CONNECTIVITY[lab.nm_get(name, path, "org.freedesktop.NetworkManager.Device")]
                 for name in ("Ip4Connectivity", "Ip6Connectivity"))


def test_captive_portal_whichever_family_ranks_best(online):
    """IPv4 behind a portal, IPv6's check failing (limited): NetworkManager's global connectivity
    is "portal" (it ranks portal above limited), and the internet target must say so in its Flags
    and Status too -- ConnectionRequired|InterventionRequired, Status 0, ReachableIPv6 false --
    although the IPv6 path alone would rank best. Connectivity, Flags and Status never disagree
    on the way in or out: exactly one StatusChanged each way."""
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()

    lab.conncheck.set_ipv6_response("")
    lab.set_portal(True)
    assert lab.check_connectivity() == "portal", "NetworkManager's global connectivity is not portal"
    harness.wait_until(lambda: device_connectivity(lab) == ("portal", "limited"), harness.CHANGE_TIMEOUT,
                       "nmveth0: IPv4 portal, IPv6 limited", lambda: f"  now: {device_connectivity(lab)}",
                       poll=0.05)
    portal = {"Connectivity": "portal", "Flags": PORTAL_FLAGS, "Status": 0, "Reachable": False,
              "ConnectionRequired": True, "ReachableViaEthernet": False, "ReachableIPv4": False,
              "ReachableIPv6": False, "Interface": harness.NM_IFNAME, "Vpn": False}
    recorder.wait_answer(portal, "the captive-portal answer although IPv6 alone is limited", mark=mark)
    assert online.refresh() == (PORTAL_FLAGS, 0)
    for event in recorder.since(mark, "properties"):
        shown = event.target
        if shown.get("Connectivity") == "portal":
            assert shown.get("Status") == 0 and shown.get("Flags") == PORTAL_FLAGS, (
                "Connectivity portal beside other Flags or Status:\n" + recorder.describe(mark))

    lab.conncheck.set_ipv6_response(None)
    lab.set_portal(False)
    assert lab.check_connectivity() == "full"
    recorder.wait_answer(CONNECTED, "the connected answer after the portal was passed", mark=mark)
    assert recorder.status_changes(mark) == [(0, PORTAL_FLAGS), (2, REACHABLE)], recorder.describe(mark)
    recorder.assert_announced(mark)


def test_limited_connectivity_keeps_reachable(online):
    """The conncheck server is down: Connectivity "limited", and Flags stay Reachable (packets still
    leave the machine): no StatusChanged, and no PropertiesChanged mentions Flags or Status."""
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()

    lab.conncheck.stop()
    assert lab.check_connectivity() == "limited", "NetworkManager did not see limited connectivity (harness)"
    recorder.wait_props({"Connectivity": "limited"}, "Connectivity limited", mark=mark)
    props = online.get_all()
    assert (props["Flags"], props["Status"], props["Reachable"]) == (REACHABLE, 2, True), fmt_props(props)
    assert online.refresh() == (REACHABLE, 2)

    lab.conncheck.start()
    assert lab.check_connectivity() == "full"
    recorder.wait_props({"Connectivity": "full"}, "Connectivity full again", mark=mark)
    assert not differing(online.get_all(), CONNECTED)

    recorder.barrier()
    assert recorder.status_changes(mark) == [], recorder.describe(mark)
    announced = [e for e in recorder.since(mark, "properties") if {"Flags", "Status"} & set(e.changed)]
    assert not announced, ("Flags/Status announced as changed although they did not change:\n"
                           + recorder.describe(mark))


def test_networkmanager_not_running_at_start(nm_lab_without_nm):
    """With --backend networkmanager, the daemon starts before NetworkManager: Backend "none",
    Status -1, Flags 0. NetworkManager starts and connects: Backend "networkmanager" and the
    connected answer, with no restart."""
    lab = nm_lab_without_nm
    recorder = lab.recorder()
    try:
        daemon = lab.daemon(args=["--system", "--backend", "networkmanager"])
        recorder.sync()
        assert recorder.state[MANAGER_IFACE]["Backend"] == "none", recorder.describe()
        assert (recorder.props["Status"], recorder.props["Flags"]) == (-1, 0), recorder.describe()
        assert lab.client.call(SERVICE, ROOT_PATH, TARGET_IFACE, "Refresh") == (0, -1)
        mark = recorder.mark()

        lab.start_nm()
        recorder.wait_props({"Backend": "networkmanager"}, "Backend networkmanager once NetworkManager runs",
                            interface=MANAGER_IFACE, mark=mark)
        recorder.wait_answer(CONNECTED, "the connected answer once NetworkManager connected", mark=mark)

        changes = recorder.status_changes(mark)
        assert changes and changes[-1] == (2, REACHABLE), recorder.describe(mark)
        recorder.assert_announced(mark)
        assert lab.client.call(SERVICE, ROOT_PATH, TARGET_IFACE, "Refresh") == (REACHABLE, 2)
        assert daemon.running
    finally:
        recorder.close()


def test_auto_backend_before_networkmanager_starts(nm_lab_without_nm):
    """In the default auto mode the daemon answers from the kernel while NetworkManager is not
    running (nmveth0 has no address yet: not reachable, Status 0), then switches to NetworkManager
    live when it starts and connects."""
    lab = nm_lab_without_nm
    recorder = lab.recorder()
    try:
        lab.daemon()
        recorder.sync()
        recorder.wait_props({"Backend": "kernel"}, "Backend kernel without NetworkManager", interface=MANAGER_IFACE)
        recorder.wait_answer({"Status": 0, "Flags": 0, "Connectivity": "unknown"}, "the kernel's answer")
        mark = recorder.mark()
        lab.start_nm()
        recorder.wait_props({"Backend": "networkmanager"}, "Backend networkmanager once NetworkManager runs",
                            interface=MANAGER_IFACE, mark=mark)
        recorder.wait_answer(CONNECTED, "the connected answer once NetworkManager connected", mark=mark)
        recorder.assert_announced(mark)
    finally:
        recorder.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_networkmanager_restarts(online, signum):
    """NetworkManager stops (cleanly or killed) and starts again: the daemon keeps running, leaves the
    NetworkManager backend while it is gone (Backend "none" with Status -1 and Flags 0, or "kernel"
    with the kernel's view), and returns to Backend "networkmanager" and the connected answer."""
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()

    lab.stop_nm(signum)
    harness.wait_until(lambda: recorder.state[MANAGER_IFACE].get("Backend") != "networkmanager",
                       harness.CHANGE_TIMEOUT, "Backend to leave networkmanager once NetworkManager is gone",
                       lambda: recorder.describe(mark))
    backend = recorder.state[MANAGER_IFACE]["Backend"]
    assert backend in ("none", "kernel"), backend
    if backend == "none":
        recorder.wait_answer({"Status": -1, "Flags": 0}, "Status -1 and Flags 0 with Backend none", mark=mark)
    else:
        recorder.wait_answer({"Status": 2, "Flags": REACHABLE, "Connectivity": "unknown"},
                             "the kernel's view (the route is still there)", mark=mark)
    assert online.daemon.running

    back = recorder.mark()
    lab.start_nm()
    recorder.wait_props({"Backend": "networkmanager"}, "Backend networkmanager again",
                        interface=MANAGER_IFACE, mark=mark)
    recorder.wait_answer(CONNECTED, "the connected answer after NetworkManager came back", mark=back)
    changes = recorder.status_changes(mark)
    assert not changes or changes[-1] == (2, REACHABLE), recorder.describe(mark)
    recorder.assert_announced(mark)


def test_vpn_tun_default_route_added_by_hand(online):
    """A VPN client started by hand beside NetworkManager: a tun device with a process attached,
    an address and a default route with a lower metric than NetworkManager's. The internet target
    follows the kernel: TransientConnection|Reachable (0x3), Vpn, Interface tun0, Connectivity
    still NetworkManager's global "full". The device removed: the connected answer again. One
    StatusChanged each way."""
    if not os.path.exists("/dev/net/tun"):
        fail_or_skip("needs /dev/net/tun (the tun module)")
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()
    tun = None
    try:
        tun = vpn_tun(lab.ip_nm, lab.ns_nm)
        vpn = dict(CONNECTED, Flags=TRANSIENT_CONNECTION | REACHABLE, Vpn=True, Interface="tun0",
                   InterfaceType="other", ReachableViaEthernet=False)
        recorder.wait_answer(vpn, "the VPN answer through tun0", mark=mark)
        assert online.refresh() == (TRANSIENT_CONNECTION | REACHABLE, 2)

        lab.ip_nm("link", "del", "tun0")
        recorder.wait_answer(CONNECTED, "the connected answer once tun0 is gone", mark=mark)
        online.refresh()
        recorder.barrier()
        assert recorder.status_changes(mark) == [(2, TRANSIENT_CONNECTION | REACHABLE), (2, REACHABLE)], (
            recorder.describe(mark))
        recorder.assert_announced(mark)
    finally:
        if tun is not None:
            os.close(tun)


# --- a dead upstream: what ended connections say -------------------------------------------


CONNECT = """
import socket, sys
for address in sys.argv[2:]:
    with socket.socket(socket.AF_INET6 if ":" in address else socket.AF_INET) as s:
        s.settimeout(float(sys.argv[1]))
        try:
            s.connect((address, 80))
            print(address, "answered", flush=True)
        except OSError as error:
            print(address, error, flush=True)
"""


DEAD = ("203.0.113.1", "203.0.113.2", "198.51.100.3")  # beyond the gateway, which forwards nothing


def connect_from_nm_namespace(lab, timeout: float, *addresses: str) -> str:
    """TCP connections to port 80 of ``addresses`` from the daemon's (NetworkManager's) namespace, one
    after another, each given up after ``timeout`` s: what a program there does."""
    argv = [harness.need_tool("nsenter"), "-t", str(lab.anchor.pid), "-n", "--", "/usr/bin/python3", "-c", CONNECT,
            str(timeout), *addresses]
    return harness.run(argv, timeout=len(addresses) * timeout + harness.START_TIMEOUT).stdout


@pytest.fixture
def online_checking_rarely(request):
    """``online`` with NetworkManager's connectivity check at its default interval (300 s): a
    dead upstream is not seen by NetworkManager itself for minutes."""
    conftest.require()
    lab = conftest._lab(request, harness.NMLab(conncheck_interval=300))  # pylint: disable=protected-access
    yield from started_online(lab)


def test_connections_nobody_answers_make_networkmanager_check_at_once(online_checking_rarely):
    """The upstream dies (the conncheck server stops; nothing beyond the gateway answers), and
    NetworkManager, which checks every 300 s, would say "full" for minutes. A program tries three
    destinations beyond the gateway, none answers: the daemon asks NetworkManager to check now, and
    the internet target's Connectivity is "limited" within 10 s of the first failing connection,
    its Flags still reachable (packets leave). The upstream back, and one connection answered:
    "full" again at once. Before, Connectivity stayed "full" until NetworkManager's interval."""
    online = online_checking_rarely
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()
    lab.conncheck.stop()
    first = time.monotonic()
    print(connect_from_nm_namespace(lab, 1.0, *DEAD))
    recorder.wait_props({"Connectivity": "limited"}, "Connectivity limited after three unanswered destinations",
                        mark=mark, timeout=max(0.1, 10.0 - (time.monotonic() - first)))
    print(f"limited {time.monotonic() - first:.2f} s after the first failing connection began")
    props = online.get_all()
    assert (props["Flags"], props["Status"]) == (REACHABLE, 2), fmt_props(props)
    log = online.daemon.log_text()
    assert "connections to 3 destinations went unanswered; asking NetworkManager" in log, log
    # Counts only: no destination is logged or exported.
    exported = repr(lab.client.call(SERVICE, ROOT_PATH, "org.freedesktop.DBus.ObjectManager", "GetManagedObjects"))
    for address in DEAD:
        assert address not in log and address not in exported, address

    mark = recorder.mark()
    lab.conncheck.start()
    answered = time.monotonic()
    assert "answered" in connect_from_nm_namespace(lab, 2.0, harness.UPSTREAM_V4)
    recorder.wait_props({"Connectivity": "full"}, "Connectivity full after a connection was answered", mark=mark)
    print(f"full {time.monotonic() - answered:.2f} s after the answered connection began")
    recorder.barrier()
    assert recorder.status_changes(mark) == [], recorder.describe(mark)


def test_one_dead_destination_among_working_ones_is_never_limited(online_checking_rarely):
    """One destination beyond the gateway never answers, tried again and again, while connections
    to the gateway's web server are answered: no check is asked, Connectivity stays "full". The
    same dead destination twenty times is one destination, not evidence of a dead upstream."""
    online = online_checking_rarely
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()
    for _ in range(4):
        connect_from_nm_namespace(lab, 0.3, *[DEAD[0]] * 5)
        assert "answered" in connect_from_nm_namespace(lab, 2.0, harness.UPSTREAM_V4)
    recorder.barrier()
    assert [e for e in recorder.since(mark, "properties") if "Connectivity" in e.changed] == [], recorder.describe(mark)
    assert "asking NetworkManager" not in online.daemon.log_text()


def test_answered_connections_do_not_wake_the_daemon(online):
    """The daemon follows how connections end (NetworkManager checks connectivity, here every 3 s:
    each check is a connection, answered), and no failure is pending: its main thread is not woken
    once in 7 s, two checks and more. The kernel drops answered connections before they reach the
    daemon (a socket filter) until one goes unanswered."""
    assert "following how TCP connections end" in online.daemon.log_text()
    pid = online.daemon.pid
    woken = harness.idle_wakeups(pid, 7.0).get(str(pid), 0)
    assert woken == 0, f"the daemon's main thread was woken {woken} times"
