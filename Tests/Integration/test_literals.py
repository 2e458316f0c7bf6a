"""What address literals and odd answers mean (docs/dbus-api.md, "Host names" and "Address literals"), with the kernel backend in the
lab of ``tenants.py``:

* ``0.0.0.0`` is Apple's zero address, the internet, in ``Query`` and ``WatchAddress`` alike (they
  agree, with a default route and without one);
* ``::ffff:a.b.c.d`` is ``a.b.c.d`` to a socket (a dual-stack socket connects over IPv4);
* a name answered ``0.0.0.0`` (a blocking resolver's answer) is where a connect goes: this host;
* the answers are for TCP to port 443: an ``ip rule … ipproto tcp dport 443`` rule is asked about.
"""

import harness
from harness import MANAGER_IFACE, REACHABLE, ROOT_PATH, SERVICE, TARGET_IFACE
from tenants import FAST_ZONE, GATEWAY_V4, UPLINK
from test_targets import path_of

IS_LOCAL = harness.IS_LOCAL_ADDRESS


def query(lab, text):
    flags, status, _details = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", (text,))
    return flags, status


def watched(lab, member, text):
    path = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, member, "s", (text,))[0]
    return path, lab.client.get(SERVICE, path, TARGET_IFACE, "Flags")


def test_zero_address_is_the_internet_in_query_and_watch(tenant_lab):
    lab = tenant_lab
    lab.start_daemon()
    internet = query(lab, "")
    assert internet[0] & REACHABLE, internet
    assert query(lab, "0.0.0.0") == internet
    path, flags = watched(lab, "WatchAddress", "0.0.0.0")
    assert flags == internet[0] and lab.client.get(SERVICE, path, TARGET_IFACE, "Kind") == "internet"
    recorder = lab.recorder(path)
    lab.namespaces.ip(lab.netns, "route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)
    recorder.wait_status(0, 0, "the watched zero address loses the internet")
    assert query(lab, "0.0.0.0") == query(lab, "") == (0, 0), "Query agrees: not reachable without a default route"


def test_ipv4_mapped_is_ipv4(tenant_lab):
    lab = tenant_lab
    lab.start_daemon()
    assert query(lab, "::ffff:192.0.2.10") == query(lab, "192.0.2.10")
    assert query(lab, "::ffff:192.0.2.10")[0] & REACHABLE
    path, _flags = watched(lab, "WatchAddress", "::ffff:192.0.2.10")
    assert path == path_of("address", "192.0.2.10"), path


def test_a_name_answered_zero_is_this_host(tenant_lab):
    lab = tenant_lab
    names = {"blocked." + FAST_ZONE: "0.0.0.0", "blocked6." + FAST_ZONE: "::"}
    lab.dns.records = {name: (address, 60) for name, address in names.items()}
    lab.start_daemon()
    for name, address in names.items():
        flags, status = query(lab, name)
        assert flags & REACHABLE and flags & IS_LOCAL, f"{name} ({address}): {flags:#x}, {status}"


def test_answers_are_for_tcp_to_443(tenant_lab):
    lab = tenant_lab
    lab.namespaces.ip(lab.netns, "route", "add", "unreachable", "default", "table", "100")
    lab.start_daemon()
    root = lab.recorder(ROOT_PATH)
    lab.namespaces.ip(lab.netns, "rule", "add", "ipproto", "tcp", "dport", "443", "lookup", "100", "priority", "100")
    root.wait_status(0, 0, "HTTPS has no route: the internet is not reachable for it")
    assert query(lab, "") == (0, 0) and query(lab, "198.51.100.1")[1] == 0
    lab.namespaces.ip(lab.netns, "rule", "add", "ipproto", "udp", "dport", "53", "lookup", "main", "priority", "50")
    assert query(lab, "") == (0, 0), "a rule for other packets changes nothing"
