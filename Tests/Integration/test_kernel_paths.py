"""The internet target is the path a packet would really take: the kernel backend with two uplinks.

The kernel lab of test_kernel_backend.py (namespace A with ``kveth0`` on
192.0.2.0/24, default route via 192.0.2.1 metric 100, the daemon running
there with ``--backend kernel``), plus a second uplink ``kveth1`` on
198.51.100.0/24, policy rules, side tables, multipath routes, next-hop
objects, reject routes, a tun device and IPv6. Every change is a real kernel
change made with ``ip``; every expected answer is cross-checked against
``ip route get`` for the internet destinations the daemon asks about (the
kernel's own lookup), and every test asserts Flags, Interface, Vpn and the
exact list of StatusChanged signals (one per change of Flags, none
otherwise). Waits are woken by the daemon's signals; "nothing was announced"
is checked after ``Refresh()`` and a ``Ping`` round trip.
"""

from __future__ import annotations

import os
from collections import Counter

from harness import (IS_DIRECT, MANAGER_IFACE, REACHABLE, ROOT_PATH, SERVICE, TARGET_IFACE, TRANSIENT_CONNECTION,
                     Mark)
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4, KERNEL_CONNECTED, KERNEL_OFFLINE, SECOND, SECOND_GATEWAY_V4, SECOND_METRIC, SECOND_PEER, SECOND_V4,
    TUN, UPLINK, UPLINK_METRIC, UPLINK_PEER, fail_or_skip, kernel_lab_without_carrier, online, route_get,
    target_changes)

# What the daemon asks the kernel about (ReachabilityPlatform's TargetEvaluator.internetDestinations).
INTERNET_V4 = ("8.8.8.8", "1.1.1.1", "9.9.9.9")
INTERNET_V6 = ("2001:4860:4860::8888", "2606:4700:4700::1111", "2620:fe::fe")

WG_TABLE = "51820"
SIDE_TABLE = "100"
SOURCE_TABLE = "102"

VPN = dict(KERNEL_CONNECTED, Flags=TRANSIENT_CONNECTION | REACHABLE, Status=2, Vpn=True, InterfaceType="other",
           Interface=TUN, ReachableViaEthernet=False)

UPLINK_V6, GATEWAY_V6 = "2001:db8:1::10", "2001:db8:1::1"


def kernel_interfaces(lab, destinations=INTERNET_V4) -> list:
    """The outgoing interface ``ip route get`` gives for each destination ("" when none)."""
    result = []
    for destination in destinations:
        words = route_get(lab, destination).split()
        result.append(words[words.index("dev") + 1] if "dev" in words and "RTNETLINK" not in words else "")
    return result


def kernel_choice(lab, destinations=INTERNET_V4) -> str:
    """The interface most destinations take (ties: the first asked), as the daemon chooses."""
    interfaces = [name for name in kernel_interfaces(lab, destinations) if name]
    if not interfaces:
        return ""
    counts = Counter(interfaces)
    return max(interfaces, key=lambda name: (counts[name], -interfaces.index(name)))


def second_uplink(lab) -> None:
    """kveth1 in A with 198.51.100.10/24 and carrier; no default route through it yet."""
    lab.add_uplink(SECOND, SECOND_PEER, SECOND_V4, SECOND_GATEWAY_V4)
    lab.wait_operstate(SECOND, "UP")


def AT_START_OF(recorder) -> Mark:  # pylint: disable=invalid-name
    """A mark at the start of the recorder's history (its state then: the connected answer)."""
    return Mark(0, dict(KERNEL_CONNECTED))


def interfaces_announced(recorder, mark) -> list:
    return [e.changed["Interface"] for e in recorder.since(mark, "properties")
            if e.interface == TARGET_IFACE and "Interface" in e.changed]


def assert_nothing_announced(online, mark, why: str) -> None:
    online.sync()
    assert online.recorder.since(mark) == [], f"{why}, yet the daemon announced something:\n" + (
        online.recorder.describe(mark))


def test_side_table_counts_only_with_a_rule(online):
    """A default route through kveth1 in table 100 that no rule selects carries no traffic: nothing
    changes. A rule that sends everything to table 100: Interface kveth1 (Flags unchanged, no
    StatusChanged). The rule removed: kveth0 again."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    mark = recorder.mark()

    lab.ip_a("route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "table", SIDE_TABLE)
    assert kernel_choice(lab) == UPLINK
    assert_nothing_announced(online, mark, "a default route in a table no rule selects carries no traffic")

    lab.ip_a("rule", "add", "pref", "100", "lookup", SIDE_TABLE)
    recorder.wait_props(dict(KERNEL_CONNECTED, Interface=SECOND), "kveth1 once a rule selects table 100", mark=mark)
    assert kernel_choice(lab) == SECOND

    lab.ip_a("rule", "del", "pref", "100")
    recorder.wait_props(KERNEL_CONNECTED, "kveth0 once the rule is gone", mark=mark)
    assert kernel_choice(lab) == UPLINK

    online.sync()
    assert recorder.status_changes(mark) == [], recorder.describe(mark)
    assert interfaces_announced(recorder, mark) == [SECOND, UPLINK], recorder.describe(mark)
    assert target_changes(recorder, mark) == [{"Interface"}] * 2, recorder.describe(mark)
    recorder.assert_announced(mark)


def test_full_tunnel_vpn_rules_added_and_removed(online):
    """A tun device with carrier (a VPN client attached) and wg-quick's full-tunnel layout: its
    default route in table 51820. Without the rules nothing changes (the issue's first report:
    the old answer was tun0, Vpn, 0x3). With ``not fwmark 51820 lookup 51820`` and ``lookup main
    suppress_prefixlength 0``: the VPN answer (TransientConnection|Reachable, Vpn, tun0). The
    rules removed: kveth0, no VPN. One StatusChanged each way."""
    if not os.path.exists("/dev/net/tun"):
        fail_or_skip("needs /dev/net/tun (the tun module)")
    lab, recorder = online.lab, online.recorder
    lab.add_vpn_tun(metric=None)
    lab.wait_operstate(TUN, "UP")
    mark = recorder.mark()

    lab.ip_a("route", "add", "default", "dev", TUN, "table", WG_TABLE)
    assert kernel_choice(lab) == UPLINK
    assert_nothing_announced(online, mark, "the tunnel's table is selected by no rule")

    lab.ip_a("rule", "add", "pref", "32764", "not", "fwmark", WG_TABLE, "lookup", WG_TABLE)
    lab.ip_a("rule", "add", "pref", "32763", "lookup", "main", "suppress_prefixlength", "0")
    recorder.wait_answer(VPN, "the VPN answer once wg-quick's rules are in", mark=mark)
    assert kernel_choice(lab) == TUN
    assert f"dev {UPLINK}" in lab.ip_a("route", "get", INTERNET_V4[0], "mark", WG_TABLE).stdout, (
        "the tunnel's own (marked) packets should leave through kveth0")

    lab.ip_a("rule", "del", "pref", "32764")
    lab.ip_a("rule", "del", "pref", "32763")
    recorder.wait_answer(KERNEL_CONNECTED, "kveth0, no VPN, once the rules are gone", mark=mark)
    assert kernel_choice(lab) == UPLINK

    online.sync()
    assert recorder.status_changes(mark) == [(2, TRANSIENT_CONNECTION | REACHABLE), (2, REACHABLE)], (
        recorder.describe(mark))
    assert interfaces_announced(recorder, mark) == [TUN, UPLINK], recorder.describe(mark)
    recorder.assert_announced(mark)


def test_source_rules_of_a_multihomed_host(online):
    """A multi-homed host: kveth1 has its own table (default via 198.51.100.1) chosen by a source
    rule for its address, as cloud images set up. A packet with no source bound takes the main
    table: kveth0, nothing announced. Main's default route removed: not reachable, though
    table 102 still has one (it serves only packets from 198.51.100.10). Back: kveth0."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    mark = recorder.mark()

    lab.ip_a("route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "table", SOURCE_TABLE)
    lab.ip_a("rule", "add", "pref", "102", "from", SECOND_V4, "lookup", SOURCE_TABLE)
    assert f"dev {SECOND}" in lab.ip_a("route", "get", INTERNET_V4[0], "from", SECOND_V4).stdout
    assert kernel_choice(lab) == UPLINK
    assert_nothing_announced(online, mark, "a source rule does not apply to packets without that source")

    lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable without main's default route", mark=mark)
    assert kernel_choice(lab) == "", route_get(lab)

    lab.ip_a("route", "add", "default", "via", GATEWAY_V4, "dev", UPLINK, "metric", UPLINK_METRIC)
    recorder.wait_answer(KERNEL_CONNECTED, "kveth0 with main's default route back", mark=mark)

    online.sync()
    assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE)], recorder.describe(mark)
    assert interfaces_announced(recorder, mark) == ["", UPLINK], recorder.describe(mark)
    recorder.assert_announced(mark)


def test_multipath_with_a_dead_next_hop(online):
    """A multipath default route over kveth0 and kveth1. kveth0 taken down: its next hop is dead
    and the kernel routes every destination through kveth1 -- reachable through kveth1, no
    StatusChanged (the old answer took the first next hop and said Flags 0). kveth0 back up: the
    next hop revives without a route event; the answer follows the kernel's choice again. (While
    kveth0 is up but its carrier not yet back, the kernel may already hash a destination onto it:
    an honest "no carrier" for that moment, so no StatusChanged is promised for the way back.)"""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    mark = recorder.mark()

    lab.ip_a("route", "replace", "default", "metric", UPLINK_METRIC, "nexthop", "via", GATEWAY_V4, "dev", UPLINK,
             "nexthop", "via", SECOND_GATEWAY_V4, "dev", SECOND)
    online.sync()
    assert recorder.props["Interface"] == kernel_choice(lab), (kernel_interfaces(lab), recorder.describe(mark))
    assert recorder.props["Flags"] == REACHABLE

    lab.ip_a("link", "set", UPLINK, "down")
    recorder.wait_props(dict(KERNEL_CONNECTED, Interface=SECOND), "kveth1 while kveth0's next hop is dead",
                        mark=mark)
    assert kernel_interfaces(lab) == [SECOND] * 3, kernel_interfaces(lab)
    assert recorder.status_changes(mark) == [], recorder.describe(mark)

    lab.ip_a("link", "set", UPLINK, "up")
    lab.wait_operstate(UPLINK, "UP")
    online.sync()
    assert recorder.props["Interface"] == kernel_choice(lab), (kernel_interfaces(lab), recorder.describe(mark))
    assert recorder.props["Flags"] == REACHABLE and not recorder.props["Vpn"]
    recorder.assert_announced(mark)


def test_default_route_through_a_next_hop_object(online):
    """A default route (metric 50) through next-hop object 10 via kveth1: kveth1. The object
    replaced by a blackhole -- a next-hop event only -- not reachable. Replaced by the gateway
    again: kveth1. Deleted (the kernel removes the routes that use it): kveth0."""
    lab, recorder = online.lab, online.recorder
    second_uplink(lab)
    mark = recorder.mark()

    lab.ip_a("nexthop", "add", "id", "10", "via", SECOND_GATEWAY_V4, "dev", SECOND)
    lab.ip_a("route", "add", "default", "nhid", "10", "metric", SECOND_METRIC)
    recorder.wait_props(dict(KERNEL_CONNECTED, Interface=SECOND), "kveth1 through next hop 10", mark=mark)

    lab.ip_a("nexthop", "replace", "id", "10", "blackhole")
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable once next hop 10 is a blackhole", mark=mark)
    assert kernel_choice(lab) == "", route_get(lab)

    lab.ip_a("nexthop", "replace", "id", "10", "via", SECOND_GATEWAY_V4, "dev", SECOND)
    recorder.wait_answer(dict(KERNEL_CONNECTED, Interface=SECOND), "kveth1 once next hop 10 is a gateway again",
                         mark=mark)

    lab.ip_a("nexthop", "del", "id", "10")
    recorder.wait_props(KERNEL_CONNECTED, "kveth0 once next hop 10 and its route are gone", mark=mark)
    assert kernel_choice(lab) == UPLINK

    online.sync()
    assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE)], recorder.describe(mark)
    assert interfaces_announced(recorder, mark) == [SECOND, "", SECOND, UPLINK], recorder.describe(mark)
    recorder.assert_announced(mark)


def test_reject_routes_for_watched_addresses(online):
    """A watched address behind a blackhole route: Flags 0 and one StatusChanged; the same prefix
    as unreachable, then prohibit: still Flags 0, nothing announced; the route deleted: reachable
    through kveth0 again. The internet target is untouched meanwhile. Then a lower-metric
    ``unreachable default``: the internet is not reachable, and reachable again without it."""
    lab, recorder = online.lab, online.recorder
    watched = "203.0.113.77"
    path = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s",
                           (watched,))[0]
    target = lab.recorder(path)
    try:
        target.sync(interfaces=(TARGET_IFACE,))
        assert (target.props["Flags"], target.props["Interface"], target.props["Vpn"]) == (REACHABLE, UPLINK, False)
        mark, target_mark = recorder.mark(), target.mark()
        offline = {"Flags": 0, "Status": 0, "Interface": "", "InterfaceType": "", "Vpn": False}

        lab.ip_a("route", "add", "blackhole", "203.0.113.0/24")
        target.wait_props(offline, f"{watched} not reachable behind a blackhole route")
        for kind in ("unreachable", "prohibit"):
            lab.ip_a("route", "replace", kind, "203.0.113.0/24")
            answer = lab.client.call(SERVICE, path, TARGET_IFACE, "Refresh")
            assert answer == (0, 0), f"{kind}: {answer}"
            assert "RTNETLINK" in route_get(lab, watched), route_get(lab, watched)
        lab.ip_a("route", "del", "203.0.113.0/24")
        target.wait_props({"Flags": REACHABLE, "Status": 2, "Interface": UPLINK, "Vpn": False},
                          f"{watched} reachable once the reject route is gone")
        lab.client.call(SERVICE, path, TARGET_IFACE, "Refresh")
        target.barrier()
        assert target.status_changes(target_mark) == [(0, 0), (2, REACHABLE)], target.describe(target_mark)
        assert_nothing_announced(online, mark, "no reject route covered the internet's destinations")

        lab.ip_a("route", "add", "unreachable", "default", "metric", "10")
        recorder.wait_answer(KERNEL_OFFLINE, "the internet not reachable behind an unreachable default", mark=mark)
        lab.ip_a("route", "del", "unreachable", "default", "metric", "10")
        recorder.wait_answer(KERNEL_CONNECTED, "the internet reachable once the reject route is gone", mark=mark)
        online.sync()
        assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE)], recorder.describe(mark)
        recorder.assert_announced(mark)
    finally:
        target.close()


def test_ipv6_only(online):
    """IPv4's default route removed: not reachable. An IPv6 default route: reachable through IPv6
    alone (ReachableIPv4 false, ReachableIPv6 true), Interface kveth0, no VPN."""
    lab, recorder = online.lab, online.recorder
    lab.ip_b("addr", "add", f"{GATEWAY_V6}/64", "dev", "kup0", "nodad")
    lab.ip_a("addr", "add", f"{UPLINK_V6}/64", "dev", UPLINK, "nodad")
    mark = recorder.mark()

    lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable without an IPv4 default route", mark=mark)

    lab.ip_a("-6", "route", "add", "default", "via", GATEWAY_V6, "dev", UPLINK)
    ipv6_only = dict(KERNEL_CONNECTED, ReachableIPv4=False, ReachableIPv6=True)
    recorder.wait_answer(ipv6_only, "reachable through IPv6 alone", mark=mark)
    assert kernel_choice(lab, INTERNET_V6) == UPLINK and kernel_choice(lab) == ""

    online.sync()
    assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE)], recorder.describe(mark)
    recorder.assert_announced(mark)


def test_tunnel_needs_an_underlay(online):
    """A full tunnel through tun0 (a VPN client attached, default route metric 20) beside kveth0:
    the VPN answer for the internet and for an address on the tunnel's network. kveth0 loses
    carrier: the tunnel's route still stands, but its packets have no way out -- both not
    reachable. Carrier back: the VPN answer. kveth0 keeps carrier but loses its default route
    (the kernel would invent an on-link answer for a lookup bound to kveth0; it is no route):
    not reachable again. The route back, then the tunnel removed: kveth0 alone."""
    if not os.path.exists("/dev/net/tun"):
        fail_or_skip("needs /dev/net/tun (the tun module)")
    lab, recorder = online.lab, online.recorder
    tun = lab.add_vpn_tun()
    recorder.wait_answer(VPN, "the VPN answer with kveth0 under the tunnel", mark=AT_START_OF(recorder))
    mark = recorder.mark()
    watched = "203.0.113.77"
    path = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s",
                           (watched,))[0]
    target = lab.recorder(path)
    try:
        target.sync(interfaces=(TARGET_IFACE,))
        on_tunnel = {"Flags": TRANSIENT_CONNECTION | REACHABLE | IS_DIRECT, "Status": 2, "Interface": TUN, "Vpn": True}
        assert {k: target.props[k] for k in on_tunnel} == on_tunnel, target.describe()
        target_mark = target.mark()

        lab.set_peer(UPLINK_PEER, False)
        recorder.wait_answer(KERNEL_OFFLINE, "not reachable: the tunnel has no underlay", mark=mark)
        target.wait_props({"Flags": 0, "Status": 0, "Interface": "", "Vpn": False},
                          f"{watched} not reachable without an underlay")
        assert kernel_choice(lab) == TUN, "the tunnel's route should still stand"

        lab.set_peer(UPLINK_PEER, True)
        recorder.wait_answer(VPN, "the VPN answer once kveth0 has carrier again", mark=mark)
        target.wait_props(on_tunnel, f"{watched} through the tunnel again")

        lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
        recorder.wait_answer(KERNEL_OFFLINE, "not reachable: kveth0 has no route to the internet", mark=mark)
        assert f"dev {UPLINK}" in lab.ip_a("route", "get", INTERNET_V4[0], "oif", UPLINK).stdout, (
            "the kernel's invented on-link answer for a lookup bound to kveth0 (harness check)")
        lab.ip_a("route", "add", "default", "via", GATEWAY_V4, "dev", UPLINK, "metric", UPLINK_METRIC)
        recorder.wait_answer(VPN, "the VPN answer with kveth0's route back", mark=mark)

        lab.ip_a("link", "del", TUN)
        lab.detach_tun(tun)
        recorder.wait_answer(KERNEL_CONNECTED, "kveth0 once the tunnel is gone", mark=mark)
        online.sync()
        target.barrier()
        vpn_flags = TRANSIENT_CONNECTION | REACHABLE
        assert recorder.status_changes(mark) == [(0, 0), (2, vpn_flags), (0, 0), (2, vpn_flags), (2, REACHABLE)], (
            recorder.describe(mark))
        assert target.status_changes(target_mark)[:2] == [(0, 0), (2, vpn_flags | IS_DIRECT)], (
            target.describe(target_mark))
        recorder.assert_announced(mark)
    finally:
        target.close()


def test_tunnel_alone_in_its_namespace(online):
    """A tunnel whose packets leave from another namespace (a WireGuard device moved into a
    container): once tun0 is the only link besides loopback, nothing here can be its underlay,
    so the rule is not applied and the VPN answer stands -- nothing announced when kveth0 goes."""
    if not os.path.exists("/dev/net/tun"):
        fail_or_skip("needs /dev/net/tun (the tun module)")
    lab, recorder = online.lab, online.recorder
    lab.add_vpn_tun()
    recorder.wait_answer(VPN, "the VPN answer", mark=AT_START_OF(recorder))
    mark = recorder.mark()

    lab.ip_a("link", "del", UPLINK)
    assert "kveth" not in lab.ip_a("-o", "link", "show").stdout
    assert_nothing_announced(online, mark, "tun0 alone in its namespace keeps the VPN answer")
    assert recorder.props["Flags"] == TRANSIENT_CONNECTION | REACHABLE and recorder.props["Interface"] == TUN


def test_link_group_under_suppress_ifgroup(online):
    """``lookup main suppress_ifgroup 5`` in place of the main table's rule: kveth0 moved into group 5
    (one RTM_NEWLINK that changes neither IFF_UP nor carrier) makes the kernel refuse the main
    table's answer through it -- not reachable; back to group 0 -- reachable. Both ways follow the
    kernel, one StatusChanged each."""
    lab, recorder = online.lab, online.recorder
    lab.ip_a("rule", "add", "pref", "100", "lookup", "main", "suppress_ifgroup", "5")
    lab.ip_a("rule", "del", "pref", "32766")
    online.sync()
    mark = recorder.mark()
    lab.ip_a("link", "set", UPLINK, "group", "5")
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable: the main table's answer through group 5 is suppressed",
                         mark=mark)
    assert kernel_choice(lab) == ""
    lab.ip_a("link", "set", UPLINK, "group", "0")
    recorder.wait_answer(KERNEL_CONNECTED, "reachable again in group 0", mark=mark)
    assert kernel_choice(lab) == UPLINK
    online.sync()
    assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE)], recorder.describe(mark)
