"""The source decides too: a route counts for a family only when the kernel's answer carries a source
address a packet can leave with.

The kernel lab of test_kernel_backend.py (namespace A, the daemon with ``--backend kernel``,
``kveth0`` to namespace B), made IPv6-only or link-local-only with ``ip``. Duplicate address
detection runs for real on ``kveth0`` (slowed down with ``dad_transmits`` and the neighbour
``retrans_time_ms``), a duplicate is a real address of B's, and the router advertisement is
dnsmasq's (``--enable-ra``) in B. Every answer is checked on the internet target and, per family,
on the Path object (its ``Interfaces`` entry for kveth0), which must agree.
"""

from __future__ import annotations

import pytest

import harness
from harness import REACHABLE, ROOT_PATH, SERVICE, TARGET_IFACE, MANAGER_IFACE
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4, KERNEL_CONNECTED, KERNEL_OFFLINE, UPLINK, UPLINK_PEER, UPLINK_V4, kernel_lab_without_carrier,
    online)

PATH_PATH = ROOT_PATH + "/path"
PATH_IFACE = SERVICE + ".Path"
GATEWAY_V6 = "2001:db8:1::1"
GOOD_V6 = "2001:db8:1::10"
DUPLICATE_V6 = "2001:db8:1::99"
IPV6_ONLY = dict(KERNEL_CONNECTED, ReachableIPv4=False, ReachableIPv6=True)


def slow_dad(lab, transmits: int, retrans_ms: int = 1000) -> None:
    """Duplicate address detection on kveth0 from now on: ``transmits`` probes, ``retrans_ms`` apart."""
    ns = lab.ns_a
    lab.namespaces.sysctl(ns, f"net.ipv6.conf.{UPLINK}.accept_dad", "1")
    lab.namespaces.sysctl(ns, f"net.ipv6.conf.{UPLINK}.dad_transmits", str(transmits))
    lab.namespaces.sysctl(ns, f"net.ipv6.neigh.{UPLINK}.retrans_time_ms", str(retrans_ms))


def address_state(lab, address: str) -> str:
    """``ip -6 addr`` flags of ``address`` on kveth0 ("" when absent)."""
    for line in lab.ip_a("-6", "-o", "addr", "show", "dev", UPLINK).stdout.splitlines():
        if f" {address}/" in line:
            return line
    return ""


def path_entry(lab) -> tuple:
    """(usable IPv4, usable IPv6) of kveth0 on the Path object."""
    interfaces = lab.client.get(SERVICE, PATH_PATH, PATH_IFACE, "Interfaces")
    entry = next(e for e in interfaces if e[0] == UPLINK)
    return entry[4], entry[5]


def watch_path(lab) -> None:
    assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)


def ipv6_only(online) -> harness.Mark:
    """IPv4's default route removed (not reachable), B's kup0 with the IPv6 gateway, kveth0 with
    slow DAD. Returns a mark taken once the offline answer is announced."""
    lab, recorder = online.lab, online.recorder
    mark = recorder.mark()
    lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
    recorder.wait_answer(KERNEL_OFFLINE, "not reachable without an IPv4 default route", mark=mark)
    lab.ip_b("addr", "add", f"{GATEWAY_V6}/64", "dev", UPLINK_PEER, "nodad")
    watch_path(lab)
    return recorder.mark()


def refreshed(online) -> dict:
    online.sync()
    return online.lab.client.get_all(SERVICE, ROOT_PATH, TARGET_IFACE)


def test_dad_failed_then_tentative_then_usable(online):
    """An IPv6-only link: a DAD-failed address (B has it too) and the default route: not reachable.
    A second address, tentative for seconds: still not reachable. DAD completes: reachable over
    IPv6, with exactly one StatusChanged, and the Path object agrees at every step."""
    lab, recorder = online.lab, online.recorder
    mark = ipv6_only(online)

    lab.ip_b("addr", "add", f"{DUPLICATE_V6}/64", "dev", UPLINK_PEER, "nodad")
    slow_dad(lab, transmits=1, retrans_ms=300)
    lab.ip_a("addr", "add", f"{DUPLICATE_V6}/64", "dev", UPLINK)
    lab.ip_a("-6", "route", "add", "default", "via", GATEWAY_V6, "dev", UPLINK)
    harness.wait_until(lambda: "dadfailed" in address_state(lab, DUPLICATE_V6), harness.CHANGE_TIMEOUT,
                       "DAD to fail on the duplicate", lambda: address_state(lab, DUPLICATE_V6), poll=0.05)
    props = refreshed(online)
    assert not props["ReachableIPv6"] and props["Flags"] == 0, harness.fmt_props(props)
    assert path_entry(lab) == (False, False)

    slow_dad(lab, transmits=5, retrans_ms=1000)
    lab.ip_a("addr", "add", f"{GOOD_V6}/64", "dev", UPLINK)
    props = refreshed(online)
    usable = path_entry(lab)
    state = address_state(lab, GOOD_V6)
    assert "tentative" in state, f"the check must run while DAD runs: {state}"
    assert not props["ReachableIPv6"] and props["Flags"] == 0, harness.fmt_props(props)
    assert usable == (False, False)

    recorder.wait_answer(IPV6_ONLY, "reachable over IPv6 once DAD completes", mark=mark)
    assert "tentative" not in address_state(lab, GOOD_V6)
    assert path_entry(lab) == (False, True)
    online.sync()
    assert recorder.status_changes(mark) == [(2, REACHABLE)], recorder.describe(mark)


def test_slaac_reachable_with_the_address_not_the_advertisement(online):
    """dnsmasq in B advertises 2001:db8:1::/64 (SLAAC) on an IPv6-only link whose DAD takes seconds:
    the advertisement's default route comes first, with only a tentative address (not reachable);
    ReachableIPv6 turns true when the address does, with one StatusChanged."""
    lab, recorder = online.lab, online.recorder
    mark = ipv6_only(online)
    slow_dad(lab, transmits=4, retrans_ms=1000)
    lab.namespaces.sysctl(lab.ns_a, f"net.ipv6.conf.{UPLINK}.accept_ra", "1")
    lab.namespaces.sysctl(lab.ns_a, f"net.ipv6.conf.{UPLINK}.autoconf", "1")
    argv = harness.Namespaces.exec_argv(lab.ns_b) + [
        harness.need_tool("dnsmasq"), "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
        "--port=0", f"--interface={UPLINK_PEER}", "--bind-interfaces", "--enable-ra",
        "--dhcp-range=2001:db8:1::,ra-only,64,1h", f"--pid-file={lab.directory / 'dnsmasq-ra.pid'}",
        "--log-facility=-", "--user=nobody", "--group=nogroup"]
    dnsmasq = harness.Process("dnsmasq", argv, lab.directory / "dnsmasq-ra.log")
    try:
        def default_route():
            return lab.ip_a("-6", "route", "show", "default").stdout

        harness.wait_until(lambda: "via fe80::" in default_route(), harness.CHANGE_TIMEOUT,
                           "the router advertisement's default route", default_route, poll=0.02)
        props = refreshed(online)
        usable = path_entry(lab)
        addresses = lab.ip_a("-6", "-o", "addr", "show", "dev", UPLINK, "scope", "global").stdout
        assert "tentative" in addresses, f"the check must run while DAD runs: {addresses}"
        assert not props["ReachableIPv6"] and props["Flags"] == 0, harness.fmt_props(props)
        assert usable == (False, False)

        recorder.wait_answer(IPV6_ONLY, "reachable over IPv6 once the SLAAC address is usable", mark=mark)
        addresses = lab.ip_a("-6", "-o", "addr", "show", "dev", UPLINK, "scope", "global").stdout
        assert "2001:db8:1:" in addresses and "tentative" not in addresses, addresses
        assert path_entry(lab) == (False, True)
        online.sync()
        assert recorder.status_changes(mark) == [(2, REACHABLE)], recorder.describe(mark)
    finally:
        dnsmasq.stop()


@pytest.mark.parametrize("case", ["link-local-only", "no-ipv4-address"])
def test_no_source_address(online, case):
    """Only 169.254/16 and fe80:: addresses with defaults via link-local gateways; or no IPv4 address
    at all and a default route straight onto the link: the kernel's answer has no source a router
    forwards. Not reachable over either family, the Path object agrees."""
    lab, recorder = online.lab, online.recorder
    watch_path(lab)
    mark = recorder.mark()
    lab.ip_a("addr", "del", f"{UPLINK_V4}/24", "dev", UPLINK)
    if case == "link-local-only":
        lab.ip_a("addr", "add", "169.254.3.4/16", "dev", UPLINK)
        lab.ip_a("route", "add", "default", "via", "169.254.1.1", "dev", UPLINK)
        lab.ip_a("-6", "route", "add", "default", "via", "fe80::1", "dev", UPLINK)
    else:
        lab.ip_a("route", "add", "default", "dev", UPLINK)
    recorder.wait_answer(KERNEL_OFFLINE, f"{case}: not reachable", mark=mark)
    props = refreshed(online)
    assert not props["ReachableIPv4"] and not props["ReachableIPv6"], harness.fmt_props(props)
    assert path_entry(lab) == (False, False)
    assert "dev " + UPLINK in lab.ip_a("route", "get", "8.8.8.8").stdout, "the kernel does have a route"
