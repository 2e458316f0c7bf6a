"""The kernel's answer also when it changes without a route event.

The kernel lab of test_kernel_backend.py (namespace A with ``kveth0`` on
192.0.2.0/24, default route via 192.0.2.1 metric 100, the daemon running
there with ``--backend kernel``), and its second uplink ``kveth1`` on
198.51.100.0/24. Each test is one way the kernel changes its answer to
"which route would a packet take" with no route, rule or next-hop event: a
route's lifetime ends, a carrier change flushes next hops, a gateway's
neighbour fails, ``ignore_routes_with_linkdown`` is switched; and the layouts
the daemon got wrong outright: openconnect's tunnel over a host route, one
destination covered by a host route, per-link gateways of a multipath route,
the Path object and the internet target disagreeing.

Every expected answer is checked against ``ip route get`` (the kernel's own
lookup), and every test asserts the exact list of StatusChanged signals.
Where the test must see that the daemon did *not* follow a stale answer, it
waits for a watched address whose answer the same event changes (evaluated
in the same pass), never for ``Refresh()``, which asks the kernel afresh and
would hide the bug.
"""

from __future__ import annotations

import os
import re

import harness
from harness import MANAGER_IFACE, REACHABLE, ROOT_PATH, SERVICE, TARGET_IFACE, TRANSIENT_CONNECTION
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4, KERNEL_CONNECTED, KERNEL_OFFLINE, SECOND, SECOND_GATEWAY_V4, SECOND_PEER, TUN, UPLINK,
    UPLINK_METRIC, UPLINK_PEER, fail_or_skip, kernel_lab_without_carrier, online, route_get)
from test_kernel_paths import (INTERNET_V6, VPN, assert_nothing_announced, interfaces_announced, kernel_choice,
                               kernel_interfaces, second_uplink)

PATH_PATH = ROOT_PATH + "/path"
PATH_IFACE = SERVICE + ".Path"
UPLINK_V6, GATEWAY_V6 = "2001:db8:1::10", "2001:db8:1::1"
SECOND_V6, SECOND_GATEWAY_V6 = "2001:db8:2::10", "2001:db8:2::1"
VPN_SERVER = "198.51.100.200"  # reached through kveth0's gateway by a host route, as vpnc-script leaves it


def evaluations_in(online) -> int:
    """How many evaluations of every target the daemon's log (``--verbose``) tells of."""
    return len(re.findall(r"evaluated \d+ targets", online.daemon.log_text()))


def watch(lab, address: str):
    """WatchAddress ``address``; a recorder on its object, synced."""
    path = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", (address,))[0]
    recorder = lab.recorder(path)
    recorder.sync(interfaces=(TARGET_IFACE,))
    return recorder


def ipv6_uplinks(lab, second: bool = False) -> None:
    """IPv6 on kveth0 (and kveth1): addresses in A, gateways in B, no route yet."""
    lab.ip_b("addr", "add", f"{GATEWAY_V6}/64", "dev", UPLINK_PEER, "nodad")
    lab.ip_a("addr", "add", f"{UPLINK_V6}/64", "dev", UPLINK, "nodad")
    if second:
        lab.ip_b("addr", "add", f"{SECOND_GATEWAY_V6}/64", "dev", SECOND_PEER, "nodad")
        lab.ip_a("addr", "add", f"{SECOND_V6}/64", "dev", SECOND, "nodad")


def path_interfaces(lab):
    """WatchPath; a recorder on the path object, synced."""
    assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
    recorder = lab.recorder(PATH_PATH)
    recorder.sync(interfaces=(PATH_IFACE,))
    return recorder


def by_name(path) -> dict:
    """The path object's Interfaces by name: (usable IPv4, usable IPv6, gateways)."""
    return {entry[0]: (entry[4], entry[5], list(entry[6])) for entry in path.state[PATH_IFACE]["Interfaces"]}


# --- 1. routes that expire ---------------------------------------------------------


def test_ipv6_default_route_that_expires(online):
    """IPv6 alone, through a default route learnt with a lifetime (``expires 3``, as a router
    advertisement installs it): reachable through IPv6, then not reachable once the lifetime ends
    -- the kernel stops using the route then and deletes it only later, with no event at expiry.
    One StatusChanged each way; the answer comes within a second of the expiry."""
    lab, recorder = online.lab, online.recorder
    ipv6_uplinks(lab)
    mark = recorder.mark()
    lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable without an IPv4 default route", mark=mark)

    lab.ip_a("-6", "route", "add", "default", "via", GATEWAY_V6, "dev", UPLINK, "expires", "3")
    ipv6_only = dict(KERNEL_CONNECTED, ReachableIPv4=False, ReachableIPv6=True)
    recorder.wait_answer(ipv6_only, "reachable through IPv6 alone", mark=mark)
    assert kernel_choice(lab, INTERNET_V6) == UPLINK
    expired = recorder.mark()
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable once the route's lifetime ended", timeout=4.5, mark=expired)
    assert "unreachable" in route_get(lab, INTERNET_V6[0]), route_get(lab, INTERNET_V6[0])
    assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE), (0, 0)], recorder.describe(mark)
    recorder.assert_announced(mark)


# --- 2. carrier loss that silently removes next hops ------------------------------------


def test_next_hop_group_member_loses_carrier(online):
    """A default route (metric 10) through a next-hop group of kveth0's and kveth1's gateways,
    weighted 1:255, so that the destinations hash to one member (kveth1, but for 1 seed in 100 or
    so of ``net.ipv4.fib_multipath_hash_seed``, random per boot: the member is the one the kernel's
    own lookups choose). That member loses carrier: the kernel flushes its next hop from the group
    without a next-hop or route event and routes everything through the other -- reachable
    through the other, no StatusChanged. Carrier back: the flushed next hop does not come back,
    the answer stays the other."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    lab.ip_a("nexthop", "add", "id", "1", "via", GATEWAY_V4, "dev", UPLINK)
    lab.ip_a("nexthop", "add", "id", "2", "via", SECOND_GATEWAY_V4, "dev", SECOND)
    lab.ip_a("nexthop", "add", "id", "3", "group", "1,1/2,255")
    mark = recorder.mark()
    lab.ip_a("route", "add", "default", "nhid", "3", "metric", "10")
    used = kernel_choice(lab)
    other, peer = (UPLINK, SECOND_PEER) if used == SECOND else (SECOND, UPLINK_PEER)
    recorder.wait_props(dict(KERNEL_CONNECTED, Interface=used), f"{used}, where the group hashes", mark=mark)
    assert kernel_interfaces(lab).count(used) >= 2, kernel_interfaces(lab)

    lab.set_peer(peer, False)
    recorder.wait_props(dict(KERNEL_CONNECTED, Interface=other), f"{other} once {used}'s next hop is flushed",
                        mark=mark)
    assert kernel_interfaces(lab) == [other] * 3, kernel_interfaces(lab)

    lab.set_peer(peer, True)
    lab.wait_operstate(used, "UP")
    online.sync()
    assert kernel_interfaces(lab) == [other] * 3, kernel_interfaces(lab)
    assert recorder.props["Interface"] == other, recorder.describe(mark)
    assert recorder.status_changes(mark) == [], recorder.describe(mark)
    expected = [used, other] if used != UPLINK else [other]
    assert interfaces_announced(recorder, mark) == expected, recorder.describe(mark)
    recorder.assert_announced(mark)


def test_flushed_next_hop_object_after_carrier_returns(online):
    """The only default route goes through next-hop object 10 via kveth1. kveth1 loses carrier:
    the kernel flushes the object and the route that uses it, silently -- not reachable. Carrier
    back: the route is gone for good ("Network is unreachable"), so the answer stays not
    reachable (the old answer came back reachable through kveth1). Checked as soon as an address
    on kveth1's network is reachable again (the same evaluation), not after a Refresh."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    witness = watch(lab, SECOND_GATEWAY_V4)
    try:
        lab.ip_a("nexthop", "add", "id", "10", "via", SECOND_GATEWAY_V4, "dev", SECOND)
        mark = recorder.mark()
        lab.ip_a("route", "add", "default", "nhid", "10", "metric", "50")
        lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
        recorder.wait_props(dict(KERNEL_CONNECTED, Interface=SECOND), "kveth1 through next hop 10", mark=mark)

        lab.set_peer(SECOND_PEER, False)
        recorder.wait_answer(KERNEL_OFFLINE, "not reachable once kveth1 lost carrier", mark=mark)
        witness.wait_props({"Flags": 0}, "kveth1's gateway not reachable without carrier")
        assert "unreachable" in route_get(lab), route_get(lab)

        lab.set_peer(SECOND_PEER, True)
        witness.wait_props({"Flags": REACHABLE | 0x20000}, "kveth1's gateway reachable with carrier back")
        recorder.barrier()
        assert "unreachable" in route_get(lab), route_get(lab)
        assert recorder.props["Flags"] == 0 and recorder.props["Interface"] == "", recorder.describe(mark)
        assert recorder.status_changes(mark) == [(0, 0)], recorder.describe(mark)
        recorder.assert_announced(mark)
    finally:
        witness.close()


# --- 3. neighbour state ------------------------------------------------------------------


def test_gateway_neighbour_failed(online):
    """Two default routes of one metric, through kveth0's and kveth1's gateways: the kernel uses
    kveth0's. Its neighbour entry marked failed: the kernel prefers kveth1's gateway, and so does
    the daemon (Interface kveth1, Flags unchanged). The entry reachable again: the kernel's choice
    again. No StatusChanged; a thousand neighbour updates for other addresses change nothing."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    mark = recorder.mark()
    lab.ip_a("route", "append", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "metric", UPLINK_METRIC)
    # kveth0's gateway answering (the daemon has the kernel resolve a gateway it has no entry of,
    # and the kernel prefers a gateway whose entry is reachable): the kernel's first choice.
    lab.ip_a("neigh", "replace", GATEWAY_V4, "dev", UPLINK, "lladdr", "02:00:00:00:01:01", "nud", "reachable")
    online.sync()
    assert kernel_choice(lab) == UPLINK == recorder.props["Interface"], kernel_interfaces(lab)

    # The gateway's entry as traffic leaves it (a new entry made FAILED at once is announced to nobody).
    lab.ip_a("neigh", "replace", GATEWAY_V4, "dev", UPLINK, "lladdr", "02:00:00:00:01:01", "nud", "reachable")
    lab.ip_a("neigh", "replace", GATEWAY_V4, "dev", UPLINK, "nud", "failed")
    recorder.wait_props(dict(KERNEL_CONNECTED, Interface=SECOND), "kveth1 while kveth0's gateway failed", mark=mark)
    assert kernel_choice(lab) == SECOND, kernel_interfaces(lab)

    # A thousand neighbour updates of addresses that are no gateway, then one route event as a
    # sentinel (a prefix no destination uses): only the sentinel's evaluation (its events may come
    # in two reads), none for the neighbours.
    quiet = recorder.mark()
    evaluations = evaluations_in(online)
    batch = lab.directory / "neighbours.batch"
    batch.write_text("".join(f"neigh replace 192.0.2.{100 + i % 100} dev {UPLINK} lladdr "
                             f"02:00:00:00:{i // 100:02x}:{i % 100:02x} nud reachable\n" for i in range(1000)))
    lab.ip_a("-batch", str(batch))
    lab.ip_a("route", "add", "203.0.113.128/25", "via", GATEWAY_V4, "dev", UPLINK)
    harness.wait_until(lambda: evaluations_in(online) > evaluations, harness.CHANGE_TIMEOUT,
                       "the sentinel route's evaluation", online.daemon.log_text, poll=0.05)
    recorder.barrier()
    # Under load the socket can overflow (ENOBUFS, logged): then everything is asked again, rightly.
    lost = online.daemon.log_text().count("kernel events were lost")
    assert evaluations_in(online) <= evaluations + 2 + lost, (
        "neighbour updates of other addresses were evaluated:\n" + online.daemon.log_text()[-3000:])
    assert recorder.since(quiet) == [], recorder.describe(quiet)

    lab.ip_a("neigh", "replace", GATEWAY_V4, "dev", UPLINK, "lladdr", "02:00:00:00:01:01", "nud", "reachable")
    recorder.wait(lambda props: props["Interface"] == kernel_choice(lab), "the kernel's choice once it is back",
                  mark=mark)
    assert recorder.status_changes(mark) == [], recorder.describe(mark)
    recorder.assert_announced(mark)


# --- 4. ignore_routes_with_linkdown --------------------------------------------------------


def test_ignore_routes_with_linkdown_switched(online):
    """kveth1's default route (metric 50) is preferred; kveth1 loses carrier: the kernel still
    routes there (packets are lost): not reachable. ``ignore_routes_with_linkdown`` switched on for
    kveth1: the kernel skips that route at once and uses kveth0's -- reachable, with no route
    event, only RTM_NEWNETCONF. Switched off: not reachable again."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    key = f"net.ipv4.conf.{SECOND}.ignore_routes_with_linkdown"
    mark = recorder.mark()
    lab.ip_a("route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "metric", "50")
    recorder.wait_props(dict(KERNEL_CONNECTED, Interface=SECOND), "kveth1, the lower metric", mark=mark)

    lab.set_peer(SECOND_PEER, False)
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable: the kernel routes into a link without carrier", mark=mark)
    assert f"dev {SECOND}" in route_get(lab), route_get(lab)

    lab.namespaces.sysctl(lab.ns_a, key, "1")
    recorder.wait_answer(KERNEL_CONNECTED, "kveth0 once routes through links without carrier are ignored",
                         mark=mark)
    assert kernel_choice(lab) == UPLINK, route_get(lab)

    lab.namespaces.sysctl(lab.ns_a, key, "0")
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable once they are used again", mark=mark)
    assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE), (0, 0)], recorder.describe(mark)
    recorder.assert_announced(mark)


# --- 5. openconnect's and OpenVPN's layout ---------------------------------------------------


def test_vpn_over_a_host_route_to_its_server(online):
    """vpnc-script's layout: the default route replaced by the tunnel's, and only a host route to
    the VPN server through kveth0's gateway. The VPN works: reachable, TransientConnection, Vpn,
    tun0. kveth0 loses carrier: not reachable (the tunnel has no way out); back: the VPN."""
    if not os.path.exists("/dev/net/tun"):
        fail_or_skip("needs /dev/net/tun (the tun module)")
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()
    lab.add_vpn_tun(metric=None)
    lab.wait_operstate(TUN, "UP")
    lab.ip_a("route", "add", f"{VPN_SERVER}/32", "via", GATEWAY_V4, "dev", UPLINK)
    lab.ip_a("route", "replace", "default", "dev", TUN)
    lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
    recorder.wait_answer(VPN, "the VPN answer over a host route to its server", mark=mark)
    assert kernel_choice(lab) == TUN and f"dev {UPLINK}" in route_get(lab, VPN_SERVER)

    lab.set_peer(UPLINK_PEER, False)
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable: the tunnel's server cannot be reached", mark=mark)
    lab.set_peer(UPLINK_PEER, True)
    recorder.wait_answer(VPN, "the VPN again with kveth0's carrier back", mark=mark)

    vpn = (2, TRANSIENT_CONNECTION | REACHABLE)
    assert recorder.status_changes(mark) == [vpn, (0, 0), vpn], recorder.describe(mark)
    recorder.assert_announced(mark)


# --- 6. one probe covered by a host route ---------------------------------------------------


def test_host_route_to_one_destination_does_not_decide(online):
    """No default route, only a host route to one of the destinations the daemon asks about
    (8.8.8.8/32 via kveth0's gateway): not reachable, and the path is not satisfied. A second one
    (1.1.1.1/32): most destinations are routed -- reachable."""
    lab, recorder = online.lab, online.recorder
    path = path_interfaces(lab)
    try:
        mark = recorder.mark()
        lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
        recorder.wait_answer(KERNEL_OFFLINE, "not reachable without a default route", mark=mark)

        lab.ip_a("route", "add", "8.8.8.8/32", "via", GATEWAY_V4, "dev", UPLINK)
        assert_nothing_announced(online, mark=recorder.mark(), why="a host route covers one destination")
        assert recorder.props["Flags"] == 0, recorder.describe(mark)
        path.barrier()
        assert path.state[PATH_IFACE]["Flags"] == 0
        assert not any(v4 or v6 for v4, v6, _ in by_name(path).values()), by_name(path)

        lab.ip_a("route", "add", "1.1.1.1/32", "via", GATEWAY_V4, "dev", UPLINK)
        recorder.wait_answer(KERNEL_CONNECTED, "reachable once most destinations are routed", mark=mark)
        assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE)], recorder.describe(mark)
        recorder.assert_announced(mark)
    finally:
        path.close()


# --- 7. per-link gateways ------------------------------------------------------------------------


def test_multipath_gives_each_link_its_own_gateway(online):
    """A multipath default route over kveth0 and kveth1 (plain next hops, then a next-hop group):
    the Path object gives each link its own next hop's gateway, not the first next hop's."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    path = path_interfaces(lab)
    try:
        mark = recorder.mark()
        lab.ip_a("route", "replace", "default", "metric", UPLINK_METRIC, "nexthop", "via", GATEWAY_V4, "dev", UPLINK,
                 "nexthop", "via", SECOND_GATEWAY_V4, "dev", SECOND)
        expected = {UPLINK: [GATEWAY_V4], SECOND: [SECOND_GATEWAY_V4]}

        def gateways():
            return {name: entry[2] for name, entry in by_name(path).items() if name in expected}
        path.wait(lambda _: gateways() == expected, "each link with its own gateway (next hops)")

        lab.ip_a("nexthop", "add", "id", "1", "via", GATEWAY_V4, "dev", UPLINK)
        lab.ip_a("nexthop", "add", "id", "2", "via", SECOND_GATEWAY_V4, "dev", SECOND)
        lab.ip_a("nexthop", "add", "id", "3", "group", "1/2")
        lab.ip_a("route", "replace", "default", "nhid", "3", "metric", UPLINK_METRIC)
        assert "nhid 3" in lab.ip_a("route", "show", "default").stdout
        online.sync()
        path.barrier()
        assert gateways() == expected, by_name(path)
        assert all(v4 for v4, _, _ in by_name(path).values()), by_name(path)
        assert recorder.status_changes(mark) == [], recorder.describe(mark)
        recorder.assert_announced(mark)
    finally:
        path.close()


# --- 8. target and path agree ------------------------------------------------------------------


def test_target_and_path_agree_per_family(online):
    """Two equal uplinks (a multipath default route): the one the kernel sends fewer of the
    internet destinations through loses carrier. The internet target and the Path object give one
    answer per family: IPv4 reachable, through the other, on both. Then IPv6 with an
    ``unreachable`` default route in main and a rule after main that sends IPv6 to a table with a
    default route via kveth1: the kernel answers unreachable, and no link is usable over IPv6 on
    the path object either.

    Which member a destination takes is the kernel's hash of the addresses with a seed that is
    random per boot (``net.ipv4.fib_multipath_hash_seed``), and a member without carrier keeps its
    share: so the member that keeps carrier is the one the kernel's own lookups choose, whatever
    the seed (``REACH_TEST_MULTIPATH_SEED`` sets it, as another boot would)."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    ipv6_uplinks(lab, second=True)
    path = path_interfaces(lab)
    peers = {UPLINK: UPLINK_PEER, SECOND: SECOND_PEER}
    try:
        mark = recorder.mark()
        lab.ip_a("route", "replace", "default", "metric", UPLINK_METRIC, "nexthop", "via", GATEWAY_V4, "dev", UPLINK,
                 "nexthop", "via", SECOND_GATEWAY_V4, "dev", SECOND)
        live = kernel_choice(lab)
        dead = SECOND if live == UPLINK else UPLINK
        lab.set_peer(peers[dead], False)
        lab.wait_operstate(dead, "DOWN")
        assert kernel_interfaces(lab).count(live) >= 2, kernel_interfaces(lab)

        def agree():
            supports_v4 = any(v4 for v4, _, _ in by_name(path).values())
            return supports_v4 == recorder.props["ReachableIPv4"]
        path.wait(lambda _: agree() and recorder.props["ReachableIPv4"], "IPv4 reachable on both objects")
        assert not by_name(path)[dead][0], by_name(path)
        assert by_name(path)[live][0], by_name(path)
        assert recorder.props["Interface"] == live, (kernel_interfaces(lab), recorder.describe(mark))

        lab.ip_a("-6", "route", "add", "unreachable", "default")
        lab.ip_a("-6", "route", "add", "default", "via", SECOND_GATEWAY_V6, "dev", SECOND, "table", "200")
        lab.ip_a("-6", "rule", "add", "pref", "40000", "lookup", "200")
        lab.set_peer(peers[dead], True)
        lab.wait_operstate(dead, "UP")
        online.sync()
        path.barrier()
        assert "unreachable" in route_get(lab, INTERNET_V6[0]) or "RTNETLINK" in route_get(lab, INTERNET_V6[0])
        assert not recorder.props["ReachableIPv6"], recorder.describe(mark)
        assert not any(v6 for _, v6, _ in by_name(path).values()), by_name(path)
        assert recorder.status_changes(mark) == [], recorder.describe(mark)
        recorder.assert_announced(mark)
    finally:
        path.close()


# --- 3, IPv6: router advertisements and router reachability ---------------------------------------


def advertise(lab, peer: str) -> harness.Process:
    """dnsmasq in namespace B sending router advertisements on ``peer`` (its prefix, a default
    route of 600 s, every 4 s), as a home router does; no DNS, no DHCP."""
    argv = harness.Namespaces.exec_argv(lab.ns_b) + [
        harness.need_tool("dnsmasq"), "--keep-in-foreground", "--no-resolv", "--no-hosts", "--port=0",
        f"--interface={peer}", "--bind-interfaces", "--enable-ra", f"--dhcp-range=::,constructor:{peer},ra-only,64,60",
        f"--ra-param={peer},4,600", f"--pid-file={lab.directory / (peer + '.pid')}", "--log-facility=-"]
    return harness.Process(f"dnsmasq RA on {peer}", argv, lab.directory / f"ra-{peer}.log")


def test_ipv6_router_neighbour_failed(online):
    """IPv6 alone, from two routers' advertisements (kveth0's and kveth1's): two default routes
    learnt with a lifetime, and the kernel uses one router. Its neighbour entry marked failed: the
    kernel prefers the other router, and so does the daemon; back to reachable: the kernel's choice
    again. Flags never change: no StatusChanged."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    ipv6_uplinks(lab, second=True)
    for link in (UPLINK, SECOND):
        lab.namespaces.sysctl(lab.ns_a, f"net.ipv6.conf.{link}.accept_ra", "1")
    routers = [advertise(lab, UPLINK_PEER), advertise(lab, SECOND_PEER)]
    try:
        def learnt():
            return lab.ip_a("-6", "route", "show", "default").stdout.count("proto ra")
        # No signal says that the kernel learnt both routers (the first one changes nothing we export).
        harness.wait_until(lambda: learnt() == 2, harness.CHANGE_TIMEOUT, "default routes from both routers",
                           lambda: lab.ip_a("-6", "route").stdout, poll=0.1)
        mark = recorder.mark()
        lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
        used = kernel_choice(lab, INTERNET_V6)
        other = SECOND if used == UPLINK else UPLINK
        ipv6_only = dict(KERNEL_CONNECTED, ReachableIPv4=False, ReachableIPv6=True)
        recorder.wait_props(dict(ipv6_only, Interface=used), "IPv6 alone, through the router in use", mark=mark)
        gateway = route_get(lab, INTERNET_V6[0]).split(" via ")[1].split()[0]

        lab.ip_a("-6", "neigh", "replace", gateway, "dev", used, "nud", "failed")
        recorder.wait_props(dict(ipv6_only, Interface=other), "the other router once the first one failed",
                            mark=mark)
        assert kernel_choice(lab, INTERNET_V6) == other, kernel_interfaces(lab, INTERNET_V6)

        lab.ip_a("-6", "neigh", "replace", gateway, "dev", used, "lladdr", "02:00:00:00:01:02", "nud", "reachable")
        recorder.wait(lambda props: props["Interface"] == kernel_choice(lab, INTERNET_V6),
                      "the kernel's choice once the first router is reachable again", mark=mark)
        assert recorder.status_changes(mark) == [], recorder.describe(mark)
        recorder.assert_announced(mark)
    finally:
        for router in routers:
            router.stop()
