"""The Path interface (Manager.WatchPath) against the real NetworkManager.

The harness's NetworkManager lab (one static Ethernet profile on ``nmveth0``,
IPv4 and IPv6 gateways, DNS 192.0.2.1), the daemon in NetworkManager's
namespaces. The profile is changed at run time with ``nmcli connection
modify`` and ``nmcli device reapply``, as a user does: metered "yes" makes
the path expensive and constrained, the DNS servers removed make
DnsConfigured false. Carrier loss is the peer going down. Each change is
announced by exactly one PropertiesChanged of the Path interface.
"""

import os
import time

import pytest

import harness
from harness import MANAGER_IFACE, NM_IFNAME, REACHABLE, ROOT_PATH, SERVICE, TRANSIENT_CONNECTION, UPSTREAM_V4, \
    UPSTREAM_V6
from test_kernel_backend import fail_or_skip, vpn_tun

PATH_PATH = ROOT_PATH + "/path"
PATH_IFACE = SERVICE + ".Path"
PROFILE = "reach-wired"


class PathOnline:
    """The lab, the daemon, the path object held by the lab's client, a recorder on it."""

    def __init__(self, lab):
        self.lab = lab
        root = lab.recorder()
        self.daemon = lab.daemon()
        root.sync()
        root.wait_props({"Backend": "networkmanager"}, "Backend networkmanager", interface=MANAGER_IFACE)
        root.wait_props({"Flags": REACHABLE}, "the connected answer")
        root.close()
        self.recorder = lab.recorder(PATH_PATH)
        assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
        self.recorder.sync(interfaces=(PATH_IFACE,))

    @property
    def props(self) -> dict:
        """The Path properties but NetworkIdentity (an opaque hash: test_network_identity.py's)."""
        return {k: v for k, v in self.recorder.state[PATH_IFACE].items() if k != "NetworkIdentity"}

    def wait(self, expected: dict, what: str, mark) -> dict:
        return self.recorder.wait_props(expected, what, mark=mark, interface=PATH_IFACE)

    def changes(self, mark, *names) -> list:
        """The values of ``names`` each PropertiesChanged since ``mark`` carried (those carrying any)."""
        self.recorder.barrier()
        return [{k: v for k, v in e.changed.items() if k in names} for e in self.recorder.since(mark, "properties")
                if e.interface == PATH_IFACE and set(names) & set(e.changed)]

    def nmcli(self, *args) -> None:
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.lab.bus.address)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        argv = [harness.need_tool("nmcli"), *args]
        done = harness.subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env, check=False)
        assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"

    def modify(self, *settings) -> None:
        """Change the profile and apply it to the device at once (no reconnection)."""
        self.nmcli("connection", "modify", PROFILE, *settings)
        self.nmcli("device", "reapply", NM_IFNAME)

    def index(self) -> int:
        return int(self.lab.ip_nm("-o", "link", "show", NM_IFNAME).stdout.split(":", 1)[0])


@pytest.fixture
def path_online(nm_lab):
    state = PathOnline(nm_lab)
    yield state
    state.recorder.close()
    assert state.daemon.running, f"the daemon exited during the test (status {state.daemon.returncode})"


def connected(online) -> dict:
    return {"Interfaces": [(NM_IFNAME, online.index(), "ethernet", False, True, True, [UPSTREAM_V4, UPSTREAM_V6])],
            "Flags": REACHABLE, "DnsConfigured": True, "Expensive": False, "Constrained": False,
            "LinkQuality": "good", "Reason": ""}


def test_connected(path_online):
    """NetworkManager's Ethernet device, both families with their gateways, DNS configured, not metered,
    LinkQuality good (a wire with carrier)."""
    assert path_online.props == connected(path_online)


def test_metered_yes_is_expensive_and_constrained(path_online):
    """connection.metered yes (the user's own setting): Expensive and Constrained; back to unknown
    (NetworkManager then guesses "no" for Ethernet): neither. One PropertiesChanged each way."""
    online = path_online
    mark = online.recorder.mark()
    online.modify("connection.metered", "yes")
    online.wait({"Expensive": True, "Constrained": True}, "metered yes", mark)
    online.modify("connection.metered", "unknown")
    online.wait({"Expensive": False, "Constrained": False}, "metered unknown", mark)
    # Reapplying removes and adds the IPv6 routes again: Interfaces may change meanwhile.
    assert online.changes(mark, "Expensive", "Constrained") == [{"Expensive": True, "Constrained": True},
                                    {"Expensive": False, "Constrained": False}], online.recorder.describe(mark)


def test_dns_configured_follows_networkmanager(path_online):
    """The profile's DNS server removed: NetworkManager's DNS configuration has no server,
    DnsConfigured false; put back: true. Announced once each."""
    online = path_online
    mark = online.recorder.mark()
    online.modify("ipv4.dns", "")
    online.wait({"DnsConfigured": False}, "no DNS server in NetworkManager's configuration", mark)
    online.modify("ipv4.dns", UPSTREAM_V4)
    online.wait({"DnsConfigured": True}, "the DNS server back", mark)
    assert online.changes(mark, "DnsConfigured") == [{"DnsConfigured": False}, {"DnsConfigured": True}], (
        online.recorder.describe(mark))


def test_carrier_lost_and_back(path_online):
    """The peer goes down: nmveth0 unusable, Flags 0. Back: the connected path again."""
    online = path_online
    mark = online.recorder.mark()
    online.lab.set_carrier(False)
    online.wait({"Interfaces": [(NM_IFNAME, online.index(), "ethernet", False, False, False, [])], "Flags": 0},
                "nmveth0 unusable without carrier", mark)
    online.lab.set_carrier(True)
    online.lab.wait_nm_state(harness.NM_STATE_CONNECTED_GLOBAL)
    online.wait(connected(online), "connected again", mark)


PULL_S = 2.5  # how long the cable is out: NetworkManager takes the IP configuration down meanwhile


def test_a_cable_pulled_and_put_back_is_the_same_network(path_online):
    """The cable out for 2.5 s, twice, and back into the same network (the same router): the
    identity is the same after each pull (it is "" meanwhile or unchanged, never another), and
    nothing says the network changed: no network-changed, and no dns-changed for NetworkManager's
    name servers going and coming with the connection. Before, one pull of 2 s gave two or three
    network-changed and six Invalidated in all."""
    online = path_online
    recorder = online.recorder
    harness.wait_until(lambda: recorder.state[PATH_IFACE]["NetworkIdentity"] != "", harness.CHANGE_TIMEOUT,
                       "an identity", recorder.describe)
    home = recorder.state[PATH_IFACE]["NetworkIdentity"]
    mark = recorder.mark()
    for pull in range(2):
        online.lab.set_carrier(False)
        online.wait({"Flags": 0}, f"no path with the cable out (#{pull + 1})", mark)
        # The scenario is time itself: how long the cable stays out.
        time.sleep(PULL_S)
        online.lab.set_carrier(True)
        online.lab.wait_nm_state(harness.NM_STATE_CONNECTED_GLOBAL)
        online.wait(connected(online), f"connected again (#{pull + 1})", mark)
        harness.wait_until(lambda: recorder.state[PATH_IFACE]["NetworkIdentity"] != "", harness.CHANGE_TIMEOUT,
                           "an identity again", recorder.describe)
    recorder.barrier()
    said = [e.changed["NetworkIdentity"] for e in recorder.since(mark, "properties")
            if e.interface == PATH_IFACE and "NetworkIdentity" in e.changed]
    assert set(said) <= {home, ""} and recorder.state[PATH_IFACE]["NetworkIdentity"] == home, (
        recorder.describe(mark))
    invalidated = [e.args[0] for e in recorder.since(mark) if e.member == "Invalidated"]
    assert "network-changed" not in invalidated and "dns-changed" not in invalidated, recorder.describe(mark)
    # At most one a pull (NetworkManager takes the addresses away with the carrier: a connection
    # made from one of them is broken, source-changed, if the routes come back before it).
    assert len(invalidated) <= 2, recorder.describe(mark)
    print(f"Invalidated over two pulls: {invalidated}")


def test_vpn_tun_beside_networkmanager(path_online):
    """A VPN client's tun device with a default route of a lower metric beside NetworkManager's
    Ethernet: tun0 first (the kernel's choice for IPv4), a VPN of type other, usable over IPv4
    without a gateway; nmveth0 after it (IPv6 still leaves there). Flags TransientConnection |
    Reachable. Removed: the connected path again."""
    if not os.path.exists("/dev/net/tun"):
        fail_or_skip("needs /dev/net/tun (the tun module)")
    online, lab = path_online, path_online.lab
    mark = online.recorder.mark()
    tun = None
    try:
        tun = vpn_tun(lab.ip_nm, lab.ns_nm)
        tun_index = int(lab.ip_nm("-o", "link", "show", "tun0").stdout.split(":", 1)[0])
        online.wait({"Interfaces": [("tun0", tun_index, "other", True, True, False, []),
                                    connected(online)["Interfaces"][0]],
                     "Flags": TRANSIENT_CONNECTION | REACHABLE}, "tun0 first, a VPN", mark)
        lab.ip_nm("link", "del", "tun0")
        online.wait(connected(online), "the connected path once tun0 is gone", mark)
    finally:
        if tun is not None:
            os.close(tun)
