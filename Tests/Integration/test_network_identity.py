"""The network under a connection (docs/design.md, "The network under a connection"): ``Path.NetworkIdentity`` and
``Path.Invalidated(s reason)``, with the kernel backend in the lab of ``tenants.py`` (an uplink
``ten0`` whose default route goes through 192.0.2.254).

The gateway's link-layer address is the test's (a permanent neighbour entry): a carrier flap
on the same network keeps the identity and invalidates nothing; another host behind the same
IP address (another link-layer address) is another network — a new identity and
``Invalidated("network-changed")`` once, while ``Flags`` stay the same. Another preferred source
address is nothing while the one before stays on the link (a privacy address rotating); a source
connections were made from that leaves the link is ``source-changed``; a new name server
``dns-changed``; each once. A VPN (a tun
device with a process attached, OpenVPN's two /1 routes over the default route) that comes or
goes is ``vpn-changed``, once each way, and not ``network-changed``: the network under it stays.

Wi-Fi comes from NetworkManager mocked with python-dbusmock (test_wifi_wwan.py's lab): a roam to
another access point of the same SSID, even through a moment without one, is the same network;
another SSID behind the same gateway address and prefix is another.
"""

import os
import re
import select
import subprocess
import time

import harness
from harness import MANAGER_IFACE, ROOT_PATH, SERVICE
from tenants import GATEWAY_V4, UPLINK
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4 as KERNEL_GATEWAY_V4, TUN, UPLINK as KERNEL_UPLINK, UPLINK_PEER as KERNEL_PEER,
    kernel_lab_without_carrier, online, vpn_tun)
from test_wifi_wwan import NM_SETTINGS, WIFI, WLAN_GW, PathWatch, env  # pylint: disable=unused-import

PATH_PATH = ROOT_PATH + "/path"
PATH_IFACE = SERVICE + ".Path"
ROUTER_A, ROUTER_B = "02:00:5e:00:53:01", "02:00:5e:00:53:02"


def watch_path(lab):
    recorder = lab.recorder(PATH_PATH)
    assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
    recorder.sync(interfaces=(PATH_IFACE,))
    return recorder


def identity(recorder):
    return recorder.state[PATH_IFACE]["NetworkIdentity"]


def invalidations(recorder, mark):
    recorder.barrier()
    return [e.args[0] for e in recorder.since(mark) if e.member == "Invalidated" and e.signal_interface == PATH_IFACE]


def router(lab, mac):
    lab.namespaces.ip(lab.netns, "neigh", "replace", GATEWAY_V4, "lladdr", mac, "dev", UPLINK, "nud", "permanent")


def test_network_identity_follows_the_gateway_not_a_flap(tenant_lab):
    lab = tenant_lab
    router(lab, ROUTER_A)
    lab.start_daemon()
    path = watch_path(lab)
    first = identity(path)
    assert re.fullmatch(r"[0-9a-f]{32}", first), f"NetworkIdentity {first!r}"
    flags = path.state[PATH_IFACE]["Flags"]
    assert flags & harness.REACHABLE, path.describe()

    # A carrier flap on the same network: the same identity after it, nothing invalidated.
    mark = path.mark()
    lab.namespaces.ip(lab.netns, "link", "set", UPLINK + "p", "down")
    path.wait_props({"Flags": 0}, "no path while the carrier is lost", interface=PATH_IFACE)
    lab.namespaces.ip(lab.netns, "link", "set", UPLINK + "p", "up")
    path.wait_props({"Flags": flags}, "the path back after the flap", interface=PATH_IFACE)
    assert identity(path) == first, "the same network after a flap"
    assert "network-changed" not in invalidations(path, mark), path.history(mark)

    # Another router behind the gateway's address: another network; the flags stay.
    mark = path.mark()
    router(lab, ROUTER_B)
    harness.wait_until(lambda: identity(path) not in (first, ""), harness.CHANGE_TIMEOUT,
                       "a new NetworkIdentity for another router", path.describe)
    assert invalidations(path, mark) == ["network-changed"], path.history(mark)
    assert path.state[PATH_IFACE]["Flags"] == flags
    second = identity(path)

    # Back to the first router: its identity again (keyed, not random).
    mark = path.mark()
    router(lab, ROUTER_A)
    harness.wait_until(lambda: identity(path) == first, harness.CHANGE_TIMEOUT, "the first network's identity again",
                       path.describe)
    assert invalidations(path, mark) == ["network-changed"], path.history(mark)
    assert second != first


def change_sources(lab) -> None:
    """192.0.2.2 added and made the default route's preferred source, then 192.0.2.1 again, each
    step once the daemon has evaluated the path after the one before (its debug line: the daemon
    coalesces the events of one moment into one evaluation, which would never see 192.0.2.2
    preferred); then 192.0.2.2, a source connections were made from, is removed."""
    daemon = lab.daemon_process

    def evaluated() -> int:
        return daemon.log_text().count("path evaluated in ")

    for command in (("addr", "add", "192.0.2.2/24", "dev", UPLINK),
                    ("route", "replace", "default", "via", GATEWAY_V4, "dev", UPLINK, "src", "192.0.2.2"),
                    ("route", "replace", "default", "via", GATEWAY_V4, "dev", UPLINK, "src", "192.0.2.1")):
        before = evaluated()
        lab.namespaces.ip(lab.netns, *command)
        harness.wait_until(lambda before=before: evaluated() > before, harness.CHANGE_TIMEOUT,
                           f"the path evaluated after ip {' '.join(command)}", daemon.log_text)
    lab.namespaces.ip(lab.netns, "addr", "del", "192.0.2.2/24", "dev", UPLINK)


def test_invalidated_once_per_event_with_its_reason(tenant_lab):
    lab = tenant_lab
    router(lab, ROUTER_A)
    lab.start_daemon(verbose=True)
    path = watch_path(lab)
    flags = path.state[PATH_IFACE]["Flags"]
    before = identity(path)

    # Another preferred source address on the same network, and back, while both stay on the
    # link (a privacy address rotating: the older one still carries its connections): nothing.
    # Then one that connections were made from leaves the link: source-changed, once.
    mark = path.mark()
    change_sources(lab)
    harness.wait_until(lambda: "source-changed" in invalidations(path, mark), harness.CHANGE_TIMEOUT,
                       "Invalidated(source-changed)", lambda: path.history(mark))
    assert invalidations(path, mark) == ["source-changed"], path.history(mark)

    # Another name server (the daemon's resolv.conf is the lab's).
    mark = path.mark()
    lab.resolver.write_text("# written by the test\nnameserver 127.0.0.1\nnameserver 192.0.2.53\n")
    harness.wait_until(lambda: "dns-changed" in invalidations(path, mark), harness.CHANGE_TIMEOUT,
                       "Invalidated(dns-changed)", lambda: path.history(mark))
    assert invalidations(path, mark) == ["dns-changed"], path.history(mark)
    assert path.state[PATH_IFACE]["Flags"] == flags and identity(path) == before


def test_a_vpn_that_comes_and_goes_is_vpn_changed(tenant_lab):
    lab = tenant_lab
    router(lab, ROUTER_A)
    lab.start_daemon()
    path = watch_path(lab)
    flags = path.state[PATH_IFACE]["Flags"]
    home = identity(path)

    def ip(*args):
        return lab.namespaces.ip(lab.netns, *args)

    # OpenVPN's layout ("def1"): two /1 routes through the tunnel over the uplink's default route.
    mark = path.mark()
    tun = vpn_tun(ip, lab.netns, metric=None)
    try:
        ip("route", "add", "0.0.0.0/1", "dev", TUN)
        ip("route", "add", "128.0.0.0/1", "dev", TUN)
        path.wait_props({"Flags": flags | harness.TRANSIENT_CONNECTION}, "the path through the VPN",
                        interface=PATH_IFACE)
        assert invalidations(path, mark) == ["vpn-changed"], path.history(mark)
    finally:
        # The client ends: the tunnel and its routes go in one event, as a tunnel that is not
        # persistent goes when its process closes it (closing first would be two events here:
        # the persistent tunnel without its process loses its carrier, then it is deleted).
        mark = path.mark()
        ip("link", "del", TUN)
        os.close(tun)
    path.wait_props({"Flags": flags}, "the path through the uplink again", interface=PATH_IFACE)
    harness.wait_until(lambda: identity(path) == home, harness.CHANGE_TIMEOUT, "the home network's identity again",
                       path.describe)
    assert invalidations(path, mark) == ["vpn-changed"], path.history(mark)


EXAMPLE = harness.daemon_binary().parent / "network-path-example"


class Output:
    """A process's standard output, as lines, read while a test waits for them."""

    def __init__(self, process):
        self.process = process
        self.lines = []
        self.buffer = b""

    def wait(self, done, what):
        """Reads until ``done(lines)``, at most CHANGE_TIMEOUT."""
        deadline = time.monotonic() + harness.CHANGE_TIMEOUT
        while not done(self.lines):
            left = deadline - time.monotonic()
            assert left > 0, f"{what}: lines so far {self.lines}"
            if select.select([self.process.stdout], [], [], left)[0]:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                assert chunk, f"the program ended ({self.process.poll()}): {self.lines}"
                self.buffer += chunk
                *complete, self.buffer = self.buffer.split(b"\n")
                self.lines.extend(line.decode() for line in complete)

    def handler_lines(self, count, what):
        """The program's ``handler`` lines, once there are at least ``count``."""
        self.wait(lambda lines: sum(1 for line in lines if line.startswith("handler ")) >= count, what)
        return [line for line in self.lines if line.startswith("handler ")]


def test_nwpathmonitor_gets_a_new_path_on_another_network(tenant_lab):
    """network-path-example (Apple's NWPathMonitor code) through the daemon: another router behind
    the gateway's address changes nothing NWPath shows, and the monitor still delivers a new path,
    as Apple's does on a gateway change."""
    lab = tenant_lab
    router(lab, ROUTER_A)
    lab.start_daemon()
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
    process = subprocess.Popen(harness.Namespaces.exec_argv(lab.netns) + [str(EXAMPLE)],  # pylint: disable=consider-using-with
                               stdout=subprocess.PIPE, env=env)
    output = Output(process)

    try:
        first = output.handler_lines(1, "the first path")[0]
        assert first.startswith("handler satisfied"), first
        router(lab, ROUTER_B)
        second = output.handler_lines(2, "a new path for another router")[1]
        assert second == first, "the same path in every field NWPath has, delivered again"
    finally:
        process.terminate()
        process.wait(5)


APP = harness.daemon_binary().parent / "reachability-example"


def test_network_invalidation_monitor_delivers_each_reason_once(tenant_lab):
    """The Swift client's NetworkInvalidationMonitor (reachability-example --invalidations) through
    the daemon: another router, then another source address, each delivered once with its reason."""
    lab = tenant_lab
    router(lab, ROUTER_A)
    lab.start_daemon(verbose=True)
    path = watch_path(lab)
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
    process = subprocess.Popen(harness.Namespaces.exec_argv(lab.netns)  # pylint: disable=consider-using-with
                               + [str(APP), "--daemon", "--invalidations"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    output = Output(process)
    lines = output.lines

    def wait_line(predicate, what):
        output.wait(lambda lines: any(predicate(line) for line in lines), what)

    def said():
        return [line.split(" ", 1)[1] for line in lines if line.startswith("invalidated ")]

    try:
        wait_line(lambda line: line.startswith("status reachable"), "the first answer")
        mark = path.mark()
        router(lab, ROUTER_B)
        wait_line(lambda line: line == "invalidated network-changed", "the monitor's network-changed")
        assert invalidations(path, mark) == ["network-changed"], path.history(mark)
        change_sources(lab)
        wait_line(lambda line: line == "invalidated source-changed", "the monitor's source-changed")
        assert said() == ["network-changed", "source-changed"], lines
    finally:
        process.terminate()
        process.wait(5)


HOME_AP, ROAMED_AP, CAFE_AP = (f"/org/freedesktop/NetworkManager/AccessPoint/{name}" for name in ("ap0", "ap1", "ap2"))


def test_wifi_ssid_roam_keeps_the_network_another_ssid_is_another(env):  # pylint: disable=redefined-outer-name
    """Wi-Fi on HomeNet (ap0, 80 %), its gateway's link-layer address fixed. A roam to ap1 of the
    same SSID, a moment without an access point (LinkQuality unknown) and back to ap0: the same
    NetworkIdentity, no Invalidated, and network-path-example (NWPathMonitor, through the daemon)
    prints only the link quality's changes. The device connects to CafeNet (ap2, 20 %) instead,
    the kernel's addressing unchanged (same gateway address, same prefix): a new identity and
    exactly one Invalidated("network-changed"), the Flags the same; back on HomeNet: its identity
    again, once more network-changed."""
    env.mock("AddAccessPoint", (env.wifi, "ap1", "HomeNet", "00:11:22:33:44:66", 2, 5180, 54000, 70, 0),
             "(ssssuuuyu)")
    env.mock("AddAccessPoint", (env.wifi, "ap2", "CafeNet", "00:11:22:33:44:77", 2, 2412, 54000, 20, 0),
             "(ssssuuuyu)")
    env.mock("AddWiFiConnection", (env.wifi, "wificafe", "CafeNet", ""), "(ssss)")
    env.kernel_wifi_up()
    # The router's own address, as the neighbour table has it: fixed, so that only the SSID differs.
    router_mac = env.ip("-o", "link", "show", "upwlan0", netns=env.upstream).split("link/ether ", 1)[1].split()[0]
    env.ip("neigh", "replace", WLAN_GW, "lladdr", router_mac, "dev", "wlan0", "nud", "permanent", netns=env.netns)
    env.nm_wifi_up()
    env.start_daemon()
    env.wait_for_state(WIFI, "Wi-Fi reachability")
    invalidated = []
    env.subscribe(None, PATH_IFACE, "Invalidated", PATH_PATH,
                  lambda _c, _s, _p, _i, _m, params: invalidated.append(params.unpack()[0]))
    path = PathWatch(env)
    path.wait({"LinkQuality": "good"}, "good at 80 %")
    home = path.props["NetworkIdentity"]
    flags = path.props["Flags"]
    assert re.fullmatch(r"[0-9a-f]{32}", home), path.props
    assert flags & harness.REACHABLE, path.props

    monitor_env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=env.address)
    monitor_env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    process = subprocess.Popen(harness.Namespaces.exec_argv(env.netns) + [str(EXAMPLE)],  # pylint: disable=consider-using-with
                               stdout=subprocess.PIPE, env=monitor_env)
    output = Output(process)

    def quality(line):
        return line.split(" quality=", 1)[1].split(" ", 1)[0]

    try:
        first = output.handler_lines(1, "the monitor's first path")[0]
        assert first.startswith("handler satisfied") and quality(first) == "good", first

        # (a) Roaming within HomeNet: straight to ap1 (70 %: good, nothing shows), then a moment
        # without an access point (as between two BSSs), then ap0.
        env.mock("SetActiveAccessPoint", (env.wifi, ROAMED_AP), "(ss)")
        env.mock("SetActiveAccessPoint", (env.wifi, "/"), "(ss)")
        path.wait({"LinkQuality": "unknown"}, "no access point for a moment")
        env.mock("SetActiveAccessPoint", (env.wifi, HOME_AP), "(ss)")
        path.wait({"LinkQuality": "good"}, "back on ap0")
        env.sync()
        assert path.props["NetworkIdentity"] == home, "a roam within one SSID is the same network"
        assert invalidated == [], invalidated
        assert path.props["Flags"] == flags, path.props
        lines = output.handler_lines(3, "the monitor's paths through the roam")
        assert [quality(line) for line in lines] == ["good", "unknown", "good"], lines
        assert all(line == first for line in lines[2:]), lines
    finally:
        process.terminate()
        process.wait(5)

    # (b) Another SSID behind the same addressing: NetworkManager reconnects the device to CafeNet.
    env.nm_wifi_down()
    env.mock("AddPrimaryActiveConnection", (env.wifi, NM_SETTINGS + "wificafe", CAFE_AP, "cafe"), "(ssss)")
    path.wait({"LinkQuality": "minimal", "Flags": flags}, "connected to CafeNet (20 %)")
    harness.wait_until(lambda: path.props["NetworkIdentity"] not in (home, ""), harness.CHANGE_TIMEOUT,
                       "another NetworkIdentity on another SSID", lambda: str(path.props))
    env.sync()
    cafe = path.props["NetworkIdentity"]
    assert invalidated == ["network-changed"], invalidated
    assert path.props["Flags"] == flags, path.props

    # Back on HomeNet: its identity again (keyed, not random), one more network-changed.
    env.mock("RemoveActiveConnection", (env.wifi, "/org/freedesktop/NetworkManager/ActiveConnection/cafe"), "(ss)")
    env.nm_wifi_up()
    path.wait({"LinkQuality": "good", "Flags": flags}, "HomeNet again")
    harness.wait_until(lambda: path.props["NetworkIdentity"] == home, harness.CHANGE_TIMEOUT,
                       "HomeNet's identity again", lambda: str(path.props))
    env.sync()
    assert invalidated == ["network-changed", "network-changed"], invalidated
    assert cafe != home


# --- a real gateway that resolves (the kernel lab of test_kernel_backend.py) ------------------

KERNEL_GATEWAY_V6, KERNEL_UPLINK_V6 = "2001:db8:1::1", "2001:db8:1::10"


def identities(recorder, mark) -> list:
    """Every NetworkIdentity the path announced since ``mark``, in order."""
    recorder.barrier()
    return [e.changed["NetworkIdentity"] for e in recorder.since(mark)
            if e.kind == "properties" and e.interface == PATH_IFACE and "NetworkIdentity" in e.changed]


def resolved(lab, gateway: str) -> bool:
    return "REACHABLE" in lab.ip_a("neigh", "show", gateway, "dev", KERNEL_UPLINK).stdout


def test_identity_set_once_and_kept_through_resolution_a_family_and_a_replug(online):
    """A network whose gateways (IPv4 and IPv6, a live host in namespace B) are not resolved when
    the path is first watched: the service has the kernel resolve them (no program sends a packet),
    and the identity is announced once, whatever resolves when. One family's default route deleted
    and added back, each family in turn: the same identity, nothing invalidated. The carrier lost
    and back twice (the kernel flushes the gateways' entries; they are resolved again): the same
    identity, no network-changed. Then a replug onto another network (the gateway's host gets
    another link-layer address while the carrier is out): network-changed, once. Before, the
    identity changed when each gateway's entry resolved and when a family's route went or came."""
    lab = online.lab
    lab.ip_b("addr", "add", f"{KERNEL_GATEWAY_V6}/64", "dev", KERNEL_PEER, "nodad")
    lab.ip_a("addr", "add", f"{KERNEL_UPLINK_V6}/64", "dev", KERNEL_UPLINK, "nodad")
    lab.ip_a("-6", "route", "add", "default", "via", KERNEL_GATEWAY_V6, "dev", KERNEL_UPLINK)
    lab.ip_a("neigh", "flush", "dev", KERNEL_UPLINK)
    path = watch_path(lab)
    mark = path.mark()
    harness.wait_until(lambda: resolved(lab, KERNEL_GATEWAY_V4) and resolved(lab, KERNEL_GATEWAY_V6),
                       harness.CHANGE_TIMEOUT, "both gateways resolved by the service",
                       lambda: lab.ip_a("neigh").stdout)
    harness.wait_until(lambda: identity(path) != "", harness.CHANGE_TIMEOUT, "an identity", path.describe)
    home = identity(path)
    assert re.fullmatch(r"[0-9a-f]{32}", home), f"NetworkIdentity {home!r}"
    assert [i for i in identities(path, mark) if i] in ([], [home]), path.history(mark)

    mark = path.mark()
    for family, gateway in (("-4", KERNEL_GATEWAY_V4), ("-6", KERNEL_GATEWAY_V6)):
        lab.ip_a(family, "route", "del", "default", "via", gateway, "dev", KERNEL_UPLINK)
        online.sync()
        lab.ip_a(family, "route", "add", "default", "via", gateway, "dev", KERNEL_UPLINK)
        online.sync()
    assert identity(path) == home and identities(path, mark) == [], path.history(mark)
    assert invalidations(path, mark) == [], path.history(mark)

    for flap in range(2):
        lab.set_peer(KERNEL_PEER, False)
        path.wait_props({"Flags": 0}, f"no path without carrier (#{flap + 1})", interface=PATH_IFACE)
        lab.set_peer(KERNEL_PEER, True)
        path.wait_props({"Flags": harness.REACHABLE}, f"the path back (#{flap + 1})", interface=PATH_IFACE)
        harness.wait_until(lambda: resolved(lab, KERNEL_GATEWAY_V4), harness.CHANGE_TIMEOUT,
                           "the gateway resolved again", lambda: lab.ip_a("neigh").stdout)
        online.sync()
    assert identity(path) == home, path.history(mark)
    assert "network-changed" not in invalidations(path, mark), path.history(mark)

    mark = path.mark()
    lab.set_peer(KERNEL_PEER, False)
    path.wait_props({"Flags": 0}, "no path without carrier", interface=PATH_IFACE)
    lab.ip_b("link", "set", KERNEL_PEER, "address", ROUTER_B)
    lab.set_peer(KERNEL_PEER, True)
    harness.wait_until(lambda: identity(path) not in (home, ""), harness.CHANGE_TIMEOUT,
                       "another network's identity", path.describe)
    online.sync()
    assert invalidations(path, mark) == ["network-changed"], path.history(mark)
