"""The Path interface (Manager.WatchPath): the paths to the internet per interface, kernel backend.

The kernel lab of test_kernel_backend.py (namespace A with ``kveth0`` on
192.0.2.0/24, default route via 192.0.2.1 metric 100, the daemon running
there with ``--backend kernel``), with the resolver file the daemon reads
(``/etc/resolv.conf``) bind-mounted from the test's directory inside the
daemon's own mount namespace, so a test decides whether it names a server.
Every change is a real kernel change made with ``ip``. Every test checks
the Path properties the daemon announces and that each change of the
network that changes them is announced by exactly one PropertiesChanged;
"nothing more was announced" is checked after ``Refresh()`` and a ``Ping``
round trip. The daemon's ``--verbose`` log says each time it evaluated the
paths ("path evaluated"): the lifecycle test counts those lines to show
that nothing is evaluated while no client holds the path object.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ElementTree

import pytest

import harness
from harness import MANAGER_IFACE, OBJECT_MANAGER_IFACE, REACHABLE, ROOT_PATH, SERVICE, TARGET_IFACE, \
    TRANSIENT_CONNECTION
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    AT_START, GATEWAY_V4, KERNEL_CONNECTED, SECOND, SECOND_GATEWAY_V4, SECOND_PEER, SECOND_V4, TUN, UPLINK,
    UPLINK_METRIC, UPLINK_PEER, NetnsDaemon, daemon_args, fail_or_skip, kernel_lab, kernel_lab_without_carrier,
    recorder_before_start)

PATH_PATH = ROOT_PATH + "/path"
PATH_IFACE = SERVICE + ".Path"
UPLINK_V6, GATEWAY_V6 = "2001:db8:1::10", "2001:db8:1::1"
WITH_SERVER = "# written by the test\nnameserver 192.0.2.1\n"
WITHOUT_SERVER = "# written by the test: no server\nsearch test\n"


class ResolverDaemon(NetnsDaemon):
    """reachabilityd in namespace A, with ``/etc/resolv.conf`` bind-mounted from ``resolver`` in the
    private mount namespace ``ip netns exec`` makes (mounts there do not reach the machine)."""

    def __init__(self, resolver, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.resolver = resolver

    def argv(self) -> list:
        return harness.Namespaces.exec_argv(self.netns) + [
            "/bin/sh", "-c", 'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(self.resolver),
            str(self.binary)] + self.args


class LinkedResolverDaemon(NetnsDaemon):
    """reachabilityd in namespace A whose ``/etc/resolv.conf`` is a symbolic link to ``target``
    (as systemd-resolved's and resolvconf's are), made in an overlay of ``/etc`` in the private
    mount namespace ``ip netns exec`` makes: the machine's ``/etc`` is not changed."""

    def __init__(self, target: Path, overlay: Path, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.target = target
        self.overlay = overlay

    def argv(self) -> list:
        overlay = self.overlay
        for part in ("upper", "work"):
            (overlay / part).mkdir(parents=True, exist_ok=True)
        script = ('mount -t overlay overlay -o "lowerdir=/etc,upperdir=$0/upper,workdir=$0/work" /etc'
                  ' && ln -sfn "$1" /etc/resolv.conf && shift && exec "$@"')
        return harness.Namespaces.exec_argv(self.netns) + [
            "/bin/sh", "-c", script, str(overlay), str(self.target), str(self.binary)] + self.args


class PathLab:  # pylint: disable=too-few-public-methods
    """The kernel lab, the daemon with a resolver file of the test's, a recorder on the root object
    (InterfacesAdded/Removed) and, once watched, one on the path object."""

    def __init__(self, lab, args: list, resolver_text: Optional[str] = WITH_SERVER):
        """``resolver_text`` None: the resolver file is a symbolic link to a file not made yet, in a
        directory not made yet (``/run/systemd/resolve/`` before systemd-resolved starts)."""
        self.lab = lab
        log = lab.directory / f"reachabilityd-{len(lab.daemons)}.log"
        self.root = recorder_before_start(lab)
        if resolver_text is None:
            self.resolver = lab.directory / "run" / "resolve" / "resolv.conf"
            self.resolver.parent.parent.mkdir(exist_ok=True)
            self.daemon = LinkedResolverDaemon(self.resolver, lab.directory / "etc-overlay", lab.ns_a,
                                               lab.bus.address, log, args=args)
        else:
            self.resolver = lab.directory / "resolv.conf"
            self.resolver.write_text(resolver_text)
            self.daemon = ResolverDaemon(self.resolver, lab.ns_a, lab.bus.address, log, args=args)
        lab.daemons.append(self.daemon)
        self.daemon.start(lab.client)
        self.root.sync()
        self.path = lab.recorder(PATH_PATH)

    def watch(self, client=None) -> dict:
        """WatchPath; the Path properties (GetAll) after it."""
        answer = (client or self.lab.client).call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath")
        assert answer == (PATH_PATH,), answer
        self.path.sync(interfaces=(PATH_IFACE,))
        return self.props

    @property
    def props(self) -> dict:
        """The Path properties but NetworkIdentity (an opaque hash: test_network_identity.py's)."""
        return {k: v for k, v in self.path.state.get(PATH_IFACE, {}).items() if k != "NetworkIdentity"}

    def sync(self) -> None:
        """Refresh (the daemon re-reads the kernel and announces what changed), then a Ping on
        the path object: every signal sent before is recorded."""
        self.lab.client.call(SERVICE, ROOT_PATH, TARGET_IFACE, "Refresh")
        self.root.barrier()
        if self.lab.client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0].get(PATH_PATH):
            self.path.barrier()
        harness.pump()

    def wait(self, expected: dict, what: str, mark=None) -> dict:
        return self.path.wait_props(expected, what, mark=mark, interface=PATH_IFACE)

    def changes(self, mark) -> list:
        """The Path properties carried by each PropertiesChanged since ``mark`` (NetworkIdentity
        aside: another default gateway is another network, test_network_identity.py's)."""
        changes = [{k: v for k, v in e.changed.items() if k != "NetworkIdentity"}
                   for e in self.path.since(mark, "properties") if e.interface == PATH_IFACE]
        return [c for c in changes if c]

    def evaluations(self) -> int:
        return self.daemon.log_text().count("path evaluated")

    def index(self, name: str) -> int:
        return int(self.lab.ip_a("-o", "link", "show", name).stdout.split(":", 1)[0])


def interface(lab: PathLab, name: str, kind: str = "ethernet", vpn: bool = False, ipv4: bool = False,
              ipv6: bool = False, gateways=()) -> tuple:
    """One entry of Interfaces, as GetAll unpacks it."""
    return (name, lab.index(name), kind, vpn, ipv4, ipv6, list(gateways))


def second_uplink(lab) -> None:
    lab.add_uplink(SECOND, SECOND_PEER, SECOND_V4, SECOND_GATEWAY_V4)
    lab.wait_operstate(SECOND, "UP")


@pytest.fixture
def path_lab(kernel_lab_without_carrier):
    """``--backend kernel`` started before kveth0 has carrier, then connected (as ``online``)."""
    lab = kernel_lab_without_carrier
    state = PathLab(lab, daemon_args("--backend", "kernel"))
    lab.set_peer(UPLINK_PEER, True)
    state.root.wait_answer(KERNEL_CONNECTED, "the kernel's connected answer once kveth0 has carrier", mark=AT_START)
    yield state
    state.root.close()
    state.path.close()
    assert state.daemon.running, f"the daemon exited during the test (status {state.daemon.returncode})"


def connected(lab: PathLab) -> dict:
    """kveth0 (a veth: wired Ethernet, LinkQuality good while it carries the path)."""
    return {"Interfaces": [interface(lab, UPLINK, ipv4=True, gateways=[GATEWAY_V4])], "Flags": REACHABLE,
            "DnsConfigured": True, "Expensive": False, "Constrained": False, "LinkQuality": "good", "Reason": ""}


def test_watch_path_release_and_disconnect(kernel_lab):
    """Nothing is evaluated while nobody holds the path object, through network changes. WatchPath:
    the object appears (InterfacesAdded carrying its evaluated properties) and is introspectable from
    the root; a second client shares it; Release by one keeps it, the other leaving the bus removes
    it, and the last holder's Release is told with InterfacesRemoved; the network changes after
    that are not evaluated for it. Release of
    an object not held is UnknownTarget; WatchPath counts against no target limit (one per client)."""
    lab = kernel_lab
    # --verbose whatever REACH_TEST_QUIET says: the log lines are what this test counts.
    path_lab = PathLab(lab, ["--system", "--backend", "kernel", "--max-targets-per-client", "1", "--verbose"])
    root = path_lab.root
    root.wait_answer(KERNEL_CONNECTED, "connected at start", mark=AT_START)
    lab.ip_a("addr", "add", "192.0.2.20/24", "dev", UPLINK)
    path_lab.sync()
    assert path_lab.evaluations() == 0, "the paths were evaluated while nobody held them:\n" + path_lab.daemon.log_text()

    lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("192.0.2.1",))
    mark = root.mark()
    props = path_lab.watch()
    assert props == connected(path_lab), props
    added = [e for e in root.since(mark) if e.member == "InterfacesAdded"]
    assert len(added) == 1 and added[0].args[0] == PATH_PATH, root.describe(mark)
    assert added[0].args[1][PATH_IFACE] == {**props, "NetworkIdentity": path_lab.path.state[PATH_IFACE]["NetworkIdentity"]}, (
        "InterfacesAdded carries the evaluated properties")
    assert path_lab.evaluations() == 1

    introspection = lab.client.call(SERVICE, ROOT_PATH, harness.INTROSPECTABLE_IFACE, "Introspect")[0]
    assert "path" in [node.get("name") for node in ElementTree.fromstring(introspection).findall("node")]
    xml = lab.client.call(SERVICE, PATH_PATH, harness.INTROSPECTABLE_IFACE, "Introspect")[0]
    names = [i.get("name") for i in ElementTree.fromstring(xml).findall("interface")]
    assert PATH_IFACE in names and "org.freedesktop.DBus.Properties" in names, names
    busctl = harness.tool("busctl")
    if busctl:
        shown = harness.run([busctl, f"--address={lab.bus.address}", "introspect", SERVICE, PATH_PATH]).stdout
        assert ".Interfaces" in shown and "a(sisbbbas)" in shown, shown

    other = harness.BusClient(lab.bus.address)
    try:
        assert other.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
        assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,), "again: harmless"
        lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (PATH_PATH,))
        error = lab.client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (PATH_PATH,))
        assert error is not None and error.name == SERVICE + ".Error.UnknownTarget", error
        path_lab.sync()
        assert [e for e in root.since(mark) if e.member == "InterfacesRemoved"] == [], "another client holds it"
    finally:
        other.close()
    # Its last holder left the bus: the object goes, and InterfacesRemoved went to that holder
    # alone (the path object's signals are its holders'), so nothing announces it here.
    harness.wait_until(
        lambda: lab.client.call_error(SERVICE, PATH_PATH, harness.PROPERTIES_IFACE, "GetAll", "s", (PATH_IFACE,)),
        harness.CHANGE_TIMEOUT, "the object gone once its last holder left the bus", poll=0.05)
    assert [e for e in root.since(mark) if e.member == "InterfacesRemoved"] == [], "told to a client that let it go"
    # Held again by this client alone, and released: it is told.
    mark = root.mark()
    path_lab.watch()
    lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (PATH_PATH,))
    harness.wait_until(lambda: any(e.member == "InterfacesRemoved" for e in root.since(mark)), harness.CHANGE_TIMEOUT,
                       "InterfacesRemoved to the last holder as it lets go", lambda: root.describe(mark))
    removed = [e for e in root.since(mark) if e.member == "InterfacesRemoved"]
    assert len(removed) == 1 and removed[0].args == (PATH_PATH, [PATH_IFACE]), root.describe(mark)

    evaluated = path_lab.evaluations()
    lab.set_peer(UPLINK_PEER, False)
    root.wait_props({"Flags": 0}, "not reachable after carrier loss", mark=mark)
    path_lab.sync()
    assert path_lab.evaluations() == evaluated, "the paths were evaluated after the last holder left"


def test_carrier_loss(path_lab):
    """kveth0 loses carrier: it stays listed, usable over neither family, without gateways, Flags 0,
    LinkQuality unknown (no path); carrier back: the connected path, good. One PropertiesChanged
    for each."""
    lab = path_lab
    assert lab.watch() == connected(lab)
    mark = lab.path.mark()
    lab.lab.set_peer(UPLINK_PEER, False)
    offline = {"Interfaces": [interface(lab, UPLINK)], "Flags": 0, "LinkQuality": "unknown", "Reason": "no-carrier"}
    lab.wait(offline, "kveth0 unusable without carrier", mark)
    lab.lab.set_peer(UPLINK_PEER, True)
    lab.wait(connected(lab), "the connected path once carrier is back", mark)
    lab.sync()
    assert lab.changes(mark) == [offline, {"Interfaces": connected(lab)["Interfaces"], "Flags": REACHABLE,
                                           "LinkQuality": "good", "Reason": ""}], (
        lab.path.describe(mark))


def test_second_uplink_order_and_gateways(path_lab):
    """A second uplink kveth1 with no default route: listed after kveth0, unusable. A default route
    through it in a table no rule selects: still unusable (the kernel's lookup bound to it finds
    nothing). A default route in main with metric 200: usable, after kveth0 (the internet's
    interface). Its metric replaced by 50: kveth1 first (the kernel's choice), then kveth0."""
    lab = path_lab
    lab.watch()
    mark = lab.path.mark()
    second_uplink(lab.lab)
    kveth0 = interface(lab, UPLINK, ipv4=True, gateways=[GATEWAY_V4])
    lab.wait({"Interfaces": [kveth0, interface(lab, SECOND)]}, "kveth1 listed, unusable", mark)

    lab.lab.ip_a("route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "table", "100")
    lab.sync()
    assert lab.props["Interfaces"] == [kveth0, interface(lab, SECOND)]

    kveth1 = interface(lab, SECOND, ipv4=True, gateways=[SECOND_GATEWAY_V4])
    lab.lab.ip_a("route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "metric", "200")
    lab.wait({"Interfaces": [kveth0, kveth1]}, "kveth1 usable, after kveth0", mark)
    lab.lab.ip_a("route", "del", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "metric", "200")
    lab.lab.ip_a("route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "metric", "50")
    lab.wait({"Interfaces": [kveth1, kveth0]}, "kveth1 first with the lower metric", mark)
    lab.sync()
    interfaces = [c["Interfaces"] for c in lab.changes(mark)]
    # The route's removal and addition may come in one burst or two.
    assert interfaces in ([[kveth0, interface(lab, SECOND)], [kveth0, kveth1], [kveth1, kveth0]],
                          [[kveth0, interface(lab, SECOND)], [kveth0, kveth1], [kveth0, interface(lab, SECOND)],
                           [kveth1, kveth0]]), lab.path.describe(mark)
    assert all(set(c) == {"Interfaces"} for c in lab.changes(mark)), lab.path.describe(mark)


def test_ipv6_only(path_lab):
    """IPv4's default route removed, an IPv6 one added: kveth0 usable over IPv6 alone, its gateway
    the IPv6 router; Flags Reachable again."""
    lab = path_lab
    lab.lab.ip_b("addr", "add", f"{GATEWAY_V6}/64", "dev", "kup0", "nodad")
    lab.lab.ip_a("addr", "add", f"{UPLINK_V6}/64", "dev", UPLINK, "nodad")
    lab.watch()
    mark = lab.path.mark()
    lab.lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
    lab.wait({"Interfaces": [interface(lab, UPLINK)], "Flags": 0}, "no usable path", mark)
    lab.lab.ip_a("-6", "route", "add", "default", "via", GATEWAY_V6, "dev", UPLINK)
    lab.wait({"Interfaces": [interface(lab, UPLINK, ipv6=True, gateways=[GATEWAY_V6])], "Flags": REACHABLE},
             "usable over IPv6 alone", mark)
    lab.lab.ip_a("route", "add", "default", "via", GATEWAY_V4, "dev", UPLINK, "metric", UPLINK_METRIC)
    both = interface(lab, UPLINK, ipv4=True, ipv6=True, gateways=[GATEWAY_V4, GATEWAY_V6])
    lab.wait({"Interfaces": [both]}, "both families, IPv4's gateway first", mark)
    lab.sync()
    assert len(lab.changes(mark)) == 3, lab.path.describe(mark)


def test_tunnel_is_a_vpn_and_needs_an_underlay(path_lab):
    """A full tunnel through tun0 (a client attached, default route metric 20): tun0 first, vpn,
    type other, usable over IPv4 without gateway; kveth0 after it. kveth0 loses carrier: neither
    is usable (the tunnel has no underlay). Carrier back: both again."""
    if not os.path.exists("/dev/net/tun"):
        fail_or_skip("needs /dev/net/tun (the tun module)")
    lab = path_lab
    lab.watch()
    mark = lab.path.mark()
    lab.lab.add_vpn_tun()
    kveth0 = interface(lab, UPLINK, ipv4=True, gateways=[GATEWAY_V4])
    tun = interface(lab, TUN, kind="other", vpn=True, ipv4=True)
    lab.wait({"Interfaces": [tun, kveth0], "Flags": TRANSIENT_CONNECTION | REACHABLE}, "tun0 first, a VPN", mark)

    mark = lab.path.mark()
    lab.lab.set_peer(UPLINK_PEER, False)
    # Nothing usable: by kernel index (tun0 was created in A before kveth0 was moved there).
    lab.wait({"Interfaces": sorted([interface(lab, UPLINK), interface(lab, TUN, kind="other", vpn=True)],
                                   key=lambda entry: entry[1]), "Flags": 0},
             "nothing usable: the tunnel has no underlay", mark)
    lab.lab.set_peer(UPLINK_PEER, True)
    lab.wait({"Interfaces": [tun, kveth0], "Flags": TRANSIENT_CONNECTION | REACHABLE}, "the tunnel again", mark)
    lab.sync()
    assert len(lab.changes(mark)) == 2, lab.path.describe(mark)


def test_dns_configured_through_a_link_whose_file_comes_later(kernel_lab):
    """The resolver file a symbolic link to a file that is not there yet, in a directory that is not
    either (systemd-resolved's before it starts): no server, then the directory and the file are
    made — DnsConfigured follows, with the link kept; the file removed and made again too."""
    lab = PathLab(kernel_lab, daemon_args("--backend", "kernel"), resolver_text=None)
    assert lab.watch()["DnsConfigured"] is False
    mark = lab.path.mark()
    lab.resolver.parent.mkdir()
    lab.resolver.write_text(WITH_SERVER)
    lab.wait({"DnsConfigured": True}, "a server named once the link's file is made", mark)
    lab.resolver.unlink()
    lab.wait({"DnsConfigured": False}, "no server once the link's file is gone again", mark)
    lab.resolver.write_text(WITH_SERVER)
    lab.wait({"DnsConfigured": True}, "a server named when the file is back", mark)
    lab.root.close()
    lab.path.close()
    assert lab.daemon.running, f"the daemon exited during the test (status {lab.daemon.returncode})"


def test_dns_configured_from_the_resolver_file(path_lab):
    """Without NetworkManager, DnsConfigured says whether the resolver file names a server: read
    again when the file changes (it is watched), with no other event."""
    lab = path_lab
    assert lab.watch()["DnsConfigured"] is True
    mark = lab.path.mark()
    lab.resolver.write_text(WITHOUT_SERVER)
    lab.wait({"DnsConfigured": False}, "no server named once the file says so", mark)
    lab.resolver.write_text(WITH_SERVER)
    lab.wait({"DnsConfigured": True}, "a server named again", mark)
    lab.sync()
    assert lab.changes(mark) == [{"DnsConfigured": False}, {"DnsConfigured": True}], lab.path.describe(mark)
