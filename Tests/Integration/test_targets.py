"""Host and address targets against the real NetworkManager and dnsmasq.

The daemon runs in NetworkManager's namespaces and resolves through the
resolv.conf NetworkManager wrote (dnsmasq in the upstream namespace). Route
facts are the kernel's. Waits are bounded and woken by the daemon's signals.
"""

import signal
import subprocess
import sys

import pytest

import harness
from harness import (IS_DIRECT, IS_LOCAL_ADDRESS, MANAGER_IFACE, OBJECT_MANAGER_IFACE, REACHABLE, ROOT_PATH,
                     SERVICE, SOMEHOST, TARGET_IFACE, UPSTREAM_V4, UPSTREAM_V6, CONNCHECK_HOST, Dnsmasq)

LOCAL = REACHABLE | IS_LOCAL_ADDRESS | IS_DIRECT
ROUTED = ("routed.test", "198.51.100.7")
ERROR_PREFIX = SERVICE + ".Error."


def records(routed_address=ROUTED[1]):
    return [f"{CONNCHECK_HOST},{UPSTREAM_V4},{UPSTREAM_V6}", ",".join(SOMEHOST), f"{ROUTED[0]},{routed_address}"]


def restart_dnsmasq(lab, host_records):
    if lab.dnsmasq is not None:
        lab.dnsmasq.stop()
        # Dnsmasq.start waits for "started" in its log: begin a fresh log.
        lab.dnsmasq.log.rename(lab.dnsmasq.log.with_suffix(f".{harness.secrets.token_hex(3)}.log"))
    lab.dnsmasq = Dnsmasq(lab.ns_up, lab.directory, host_records=host_records)
    lab.dnsmasq.start()


def path_of(kind, name):
    escaped = "".join(c if (c.isascii() and c.isalpha()) or (c.isdigit() and i > 0) else "_%02x" % ord(c)
                      for i, c in enumerate(name)) or "_"
    return f"{ROOT_PATH}/{kind}/{escaped}"


def start_daemon(nm_lab, args=None):
    """The daemon, once it reads NetworkManager (Backend announced)."""
    restart_dnsmasq(nm_lab, records())
    recorder = nm_lab.recorder()
    try:
        nm_lab.daemon(args=args)
        recorder.sync(interfaces=(MANAGER_IFACE,))
        recorder.wait_props({"Backend": "networkmanager"}, "Backend networkmanager", interface=MANAGER_IFACE)
    finally:
        recorder.close()
    return nm_lab


@pytest.fixture
def lab(nm_lab):
    return start_daemon(nm_lab)


def watch(client, method, name):
    return client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, method, "s", (name,))[0]


def settled(lab, path, what, check):
    """Waits (woken by the target's signals) until ``check(props)``; returns the props."""
    recorder = lab.recorder(path)
    try:
        recorder.sync(interfaces=(TARGET_IFACE,))
        recorder.wait(check, what)
        return recorder.props
    finally:
        recorder.close()


def test_routed_on_link_and_both_families(lab):
    client = lab.client
    routed = watch(client, "WatchHost", ROUTED[0])
    assert routed == path_of("host", ROUTED[0])
    props = settled(lab, routed, "routed host resolved", lambda p: p.get("Status") == 2)
    assert props["Flags"] == REACHABLE, harness.fmt_props(props)
    assert props["Addresses"] == [ROUTED[1]]
    assert props["Interface"] == harness.NM_IFNAME and props["InterfaceType"] == "ethernet"
    assert props["ReachableIPv4"] and not props["ReachableIPv6"]
    assert props["Kind"] == "host" and props["Name"] == ROUTED[0] and props["Error"] == ""

    onlink = watch(client, "WatchHost", "SomeHost.Test.")
    assert onlink == path_of("host", "somehost.test."), "absolute: its dot kept (another target than somehost.test)"
    props = settled(lab, onlink, "on-link host resolved", lambda p: p.get("Status") == 2)
    assert props["Flags"] == REACHABLE | IS_DIRECT, harness.fmt_props(props)
    assert sorted(props["Addresses"]) == sorted(SOMEHOST[1:])
    assert props["ReachableIPv4"] and props["ReachableIPv6"]
    assert props["Name"] == "somehost.test."


@pytest.mark.parametrize("method,literal,canonical", [
    ("WatchAddress", "127.0.0.1", "127.0.0.1"),
    ("WatchAddress", "::1", "::1"),
    ("WatchHost", harness.NM_V4.split("/")[0], harness.NM_V4.split("/")[0]),
    ("WatchAddress", "0:0::1", "::1"),
])
def test_local_addresses(lab, method, literal, canonical):
    path = watch(lab.client, method, literal)
    assert path == path_of("address", canonical)
    props = settled(lab, path, f"{literal} evaluated", lambda p: p.get("Status") == 2)
    assert props["Flags"] == LOCAL, harness.fmt_props(props)
    assert props["Kind"] == "address" and props["Name"] == canonical and props["Addresses"] == [canonical]


@pytest.mark.parametrize("literal,expected", [
    ("127.0.0.1", {"Flags": LOCAL, "Status": 2, "Interface": "lo", "Addresses": ["127.0.0.1"]}),
    (ROUTED[1], {"Flags": REACHABLE, "Status": 2, "Interface": harness.NM_IFNAME, "Addresses": [ROUTED[1]]}),
])
def test_new_address_target_appears_with_its_real_state(lab, literal, expected):
    """An object-manager client sees a new address target once, in InterfacesAdded, with its real
    Flags and Status (no Status -1 flash), and no PropertiesChanged or StatusChanged on it before
    WatchAddress returns -- nor after, since nothing changed. Signals and the reply are logged in the
    order the connection dispatches them (the order they arrived)."""
    client = lab.client
    path = path_of("address", literal)
    log = []

    def on_signal(_conn, _sender, signal_path, interface, member, parameters):
        if signal_path in (ROOT_PATH, path):
            log.append((signal_path, interface, member, parameters.unpack()))

    subscription = client.conn.signal_subscribe(None, None, None, None, None, harness.Gio.DBusSignalFlags.NONE,
                                                on_signal)
    try:
        def on_reply(conn, result):
            log.append(("reply", conn.call_finish(result).unpack()))

        client.conn.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", harness.GLib.Variant("(s)", (literal,)),
                         None, harness.Gio.DBusCallFlags.NONE, 10000, None, on_reply)
        harness.wait_until(lambda: any(entry[0] == "reply" for entry in log), harness.CALL_TIMEOUT,
                           f"WatchAddress({literal}) to answer", lambda: f"  so far: {log}")
        client.call(SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")  # anything sent after the reply is in
        harness.pump()

        replied = next(i for i, entry in enumerate(log) if entry[0] == "reply")
        assert log[replied][1] == (path,), log[replied]
        added = [(i, entry[3]) for i, entry in enumerate(log)
                 if entry[0] == ROOT_PATH and entry[2] == "InterfacesAdded" and entry[3][0] == path]
        assert len(added) == 1 and added[0][0] < replied, f"expected one InterfacesAdded before the reply: {log}"
        announced = added[0][1][1][TARGET_IFACE]
        wrong = {k: announced.get(k) for k, v in expected.items() if announced.get(k) != v}
        assert not wrong, f"InterfacesAdded announced {harness.fmt_props(wrong)}, expected {expected}"
        on_target = [entry for entry in log if entry[0] == path]
        assert on_target == [], f"the new target announced changes of its first state: {on_target}"
        assert client.get_all(SERVICE, path, TARGET_IFACE)["Flags"] == expected["Flags"]
    finally:
        client.conn.signal_unsubscribe(subscription)


def test_nxdomain_then_dns_change_and_refresh(lab):
    client = lab.client
    missing = watch(client, "WatchHost", "nosuch.test")
    props = settled(lab, missing, "NXDOMAIN answered", lambda p: p.get("Status") == 0)
    assert props["Flags"] == 0 and props["Error"] != "" and props["Addresses"] == [], harness.fmt_props(props)
    assert props["Reason"] == "lookup-failed", harness.fmt_props(props)

    routed = watch(client, "WatchHost", ROUTED[0])
    settled(lab, routed, "routed host resolved", lambda p: p.get("Addresses") == [ROUTED[1]])
    # dnsmasq stops: a refresh fails, with an error; then it returns with a changed record.
    lab.dnsmasq.stop()
    flags, status = client.call(SERVICE, routed, TARGET_IFACE, "Refresh", timeout=30)
    assert (flags, status) == (0, 0), (harness.fmt_props(client.get_all(SERVICE, routed, TARGET_IFACE)),
                                       lab.in_nm_namespace(["cat", "/etc/resolv.conf"]).stdout,
                                       harness.tail(lab.dnsmasq.log, 5))
    props = client.get_all(SERVICE, routed, TARGET_IFACE)
    assert props["Error"] != "" and props["Flags"] == 0, harness.fmt_props(props)
    restart_dnsmasq(lab, records(routed_address=SOMEHOST[1]))
    flags, status = client.call(SERVICE, routed, TARGET_IFACE, "Refresh", timeout=30)
    props = client.get_all(SERVICE, routed, TARGET_IFACE)
    assert props["Addresses"] == [SOMEHOST[1]], harness.fmt_props(props)
    assert (flags, status) == (REACHABLE | IS_DIRECT, 2) == (props["Flags"], props["Status"])
    assert props["Error"] == ""


def test_link_flap_reaches_every_target(lab):
    client = lab.client
    paths = [watch(client, "WatchHost", ROUTED[0]), watch(client, "WatchHost", SOMEHOST[0]),
             watch(client, "WatchAddress", UPSTREAM_V4)]
    recorders = [lab.recorder(p) for p in paths]
    try:
        for r in recorders:
            r.sync(interfaces=(TARGET_IFACE,))
            r.wait(lambda p: p.get("Status") == 2, "reachable before the flap")
        marks = [r.mark() for r in recorders]
        lab.set_carrier(False)
        for r in recorders:
            r.wait(lambda p: p.get("Flags") == 0, "flags 0 after carrier loss")
        lab.set_carrier(True)
        for r in recorders:
            r.wait(lambda p: p.get("Status") == 2, "reachable again after carrier returns", timeout=30)
        for r, m in zip(recorders, marks):
            r.barrier()  # every signal sent before this round trip has been recorded
            r.assert_announced(m)
            assert r.status_changes(m)[-1][0] == 2, r.describe(m)
    finally:
        for r in recorders:
            r.close()


HOLDER = r"""
import sys, time
from gi.repository import Gio, GLib
c = Gio.DBusConnection.new_for_address_sync(sys.argv[1], Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
                                            | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
r = c.call_sync(sys.argv[2], sys.argv[3], sys.argv[4], "WatchHost", GLib.Variant("(s)", (sys.argv[5],)),
                None, 0, -1, None)
print(r.unpack()[0], flush=True)
time.sleep(600)
"""


def test_shared_objects_released_by_holders(lab):
    first = lab.client
    second = lab.bus.client()
    try:
        path = watch(first, "WatchHost", SOMEHOST[0])
        assert watch(second, "WatchHost", "SOMEHOST.test") == path  # one object per normalised host
        assert watch(first, "WatchHost", SOMEHOST[0]) == path  # idempotent per caller
        first.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (path,))
        assert first.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (path,)).name \
            == ERROR_PREFIX + "UnknownTarget"
        assert "Kind" in first.get_all(SERVICE, path, TARGET_IFACE)  # second still holds it
        second.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (path,))
        harness.wait_until(lambda: first.call_error(SERVICE, path, TARGET_IFACE, "Refresh") is not None, 5,
                           "object gone after the last Release")
    finally:
        second.close()

    # A holder process that is killed releases its target. Its signals went to it alone:
    # this connection, root but not a holder, sees the object (GetManagedObjects) but
    # hears no InterfacesRemoved for it.
    removed = []
    sub = first.conn.signal_subscribe(SERVICE, OBJECT_MANAGER_IFACE, "InterfacesRemoved", ROOT_PATH, None, 0,
                                      lambda *a: removed.append(a[5].unpack()[0]))
    holder = subprocess.Popen(["/usr/bin/python3", "-c", HOLDER, lab.bus.address, SERVICE, ROOT_PATH, MANAGER_IFACE,
                               ROUTED[0]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        path = holder.stdout.readline().strip()
        assert path == path_of("host", ROUTED[0]), holder.stderr.read() if holder.poll() is not None else path
        managed = first.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0]
        assert path in managed and TARGET_IFACE in managed[path]
        holder.send_signal(signal.SIGKILL)
        holder.wait(5)
        harness.wait_until(
            lambda: path not in first.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0], 5,
            "the object gone after its holder was killed", poll=0.05)
        first.call(SERVICE, ROOT_PATH, "org.freedesktop.DBus.Peer", "Ping")  # anything sent before has arrived
        harness.pump()
        assert path not in removed, "InterfacesRemoved of another user's target reached a connection not holding it"
    finally:
        first.conn.signal_unsubscribe(sub)
        if holder.poll() is None:
            holder.kill()
            holder.wait(5)


BAD_HOSTS = [
    ("", "empty"),
    (".", "root domain"),
    ("..", "empty"),
    ("a" * 254, "at most"),
    ("a" * 64 + ".test", "at most 63"),
    ("a..b", "label 2 is empty"),
    (".a", "label 1 is empty"),
    ("exa mple.com", "U+0020"),
    ("tab\there.test", "U+0009"),
    ("ctl\x01.test", "U+0001"),
    ("del\x7f.test", "U+007F"),
    ("-lead.test", "hyphen"),
    ("trail-.test", "hyphen"),
    ("a/b.test", "U+002F"),
    ("a@b.test", "U+0040"),
    ("*.example.com", "U+002A"),
    ("a,b.test", "U+002C"),
    ("quote\".test", "U+0022"),
    ("semi;colon.test", "U+003B"),
    ("back\\slash.test", "U+005C"),
    ("percent%.test", "not an IPv4 or IPv6"),
    ("x" * 2000, "at most 1024"),
    ("a." * 127 + "ab", "at most 253"),
    ("1.2.3", "write it as 1.2.0.3"),  # ends in a number: an IPv4 address in a URL, never a host name
    ("::1::2", "not an IPv4 or IPv6"),
    ("fe80::1%nosuch", "no interface \"nosuch\""),
    ("256.1.1.1", "its last label is a number"),
    ("1:2:3:4:5:6:7:8:9", "not an IPv4 or IPv6"),
    ("gggg::1", "not an IPv4 or IPv6"),
    ("\u200b.test", "empty"),  # IDNA maps the zero-width space to nothing
    # What people paste: named as such, with the host to ask about.
    ("https://example.com/index.html", 'is a URL, not a host name or an address: its host is "example.com"'),
    ("example.com:443", 'is a host and a port, not a host name or an address (reachability does not depend '
                        'on the port): the host is "example.com"'),
]

BAD_ADDRESSES = [
    ("", "not an IPv4 or IPv6"),
    ("example.com", "not an IPv4 or IPv6"),
    ("1.2.3", "not an IPv4 or IPv6"),
    ("01.2.3.4", "not an IPv4 or IPv6"),
    ("192.0.2.1%lo", "not an IPv4 or IPv6"),
    ("fe80::1%nosuch", "no interface"),
    ("1" * 5000, "at most 1024"),
    ("192.0.2.1:80", 'is a host and a port, not a host name or an address'),
    ("http://[2001:db8::1]:8080/", 'is a URL, not a host name or an address: its host is "2001:db8::1"'),
]


def test_bad_input_gets_named_errors(lab):
    client = lab.client
    failures = []
    for text, needle in BAD_HOSTS:
        error = client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", (text,))
        if error is None:
            failures.append(f"WatchHost({text[:40]!r}) succeeded")
        elif error.name != ERROR_PREFIX + "InvalidTarget" or needle not in error.message:
            failures.append(f"WatchHost({text[:40]!r}) → {error.name}: {error.message}")
    for text, needle in BAD_ADDRESSES:
        for method in ("WatchAddress", "Query") if text else ("WatchAddress",):
            error = client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, method, "s", (text,))
            if method == "Query" and needle.startswith("not an IPv4") and error is None:
                continue  # Query takes host names too
            if method == "Query" and error is not None and "its last label is a number" in error.message:
                continue  # read as a host name, which ends in a number (test_numeric_host_names_…)
            if error is None or error.name != ERROR_PREFIX + "InvalidTarget" or needle not in error.message:
                failures.append(f"{method}({text[:40]!r}) → {error and (error.name, error.message)}")
    # Wrong D-Bus signatures.
    for method, signature, args in [("WatchHost", "i", (1,)), ("WatchHost", "ss", ("a", "b")),
                                    ("WatchHost", "", ()), ("Release", "s", ("/x",)), ("Query", "u", (1,)),
                                    ("WatchAddress", "as", (["::1"],))]:
        error = client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, method, signature, args)
        if error is None or error.name != "org.freedesktop.DBus.Error.InvalidArgs":
            failures.append(f"{method}{signature} → {error and error.name}")
    error = client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (ROOT_PATH + "/host/x",))
    if error is None or error.name != ERROR_PREFIX + "UnknownTarget":
        failures.append(f"Release of an unknown target → {error and error.name}")
    assert not failures, "\n".join(failures)
    assert len(BAD_HOSTS) + len(BAD_ADDRESSES) >= 30
    client.call(SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
    assert lab.daemons[-1].running


NUMERIC_NAMES = [
    # (input, what the message must say): the WHATWG URL host rule
    ("2130706433", "write it as 127.0.0.1"),
    ("0177.0.0.1", "write it as 127.0.0.1"),
    ("1.2.3", "write it as 1.2.0.3"),
    ("0x7f.1", "write it as 127.0.0.1"),
    ("www.example.42", "it is not a valid one"),
]


def test_numeric_host_names_are_addresses_or_errors(lab):
    """A name whose last label is numeric is never looked up as a host name (the resolver would
    read 2130706433 or 0177.0.0.1 as 127.0.0.1): WatchHost and Query refuse it with InvalidTarget
    and the canonical form to write; a canonical dotted quad, even with the root's dot, is the
    address target itself. No host object is ever created for them."""
    client = lab.client
    failures = []
    for text, needle in NUMERIC_NAMES:
        for method in ("WatchHost", "Query"):
            error = client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, method, "s", (text,))
            if (error is None or error.name != ERROR_PREFIX + "InvalidTarget"
                    or "its last label is a number" not in error.message or needle not in error.message):
                failures.append(f"{method}({text!r}) → {error and (error.name, error.message)}")
    assert not failures, "\n".join(failures)
    assert watch(client, "WatchHost", "127.0.0.1.") == path_of("address", "127.0.0.1")
    managed = client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0]
    assert not [p for p in managed if "/host/" in p], f"host objects were created: {sorted(managed)}"


def test_limits(nm_lab):
    start_daemon(nm_lab, args=["--system", "--max-targets-per-client", "256", "--max-targets", "300"])
    client = nm_lab.client
    paths = [watch(client, "WatchAddress", f"198.51.{i // 200}.{i % 200 + 1}") for i in range(256)]
    error = client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("198.51.100.250",))
    assert error is not None and error.name == ERROR_PREFIX + "TooManyTargets" and "256" in error.message, error
    # Watching again what it holds is still fine (idempotent), and a released slot is reusable.
    assert watch(client, "WatchAddress", "198.51.0.1") == paths[0]
    client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (paths[0],))
    assert watch(client, "WatchAddress", "198.51.100.250") == path_of("address", "198.51.100.250")
    # The global limit: another client gets 44 more, then TooManyTargets.
    other = nm_lab.bus.client()
    try:
        for i in range(44):
            watch(other, "WatchAddress", f"203.0.113.{i}")
        error = other.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("203.0.113.200",))
        assert error is not None and error.name == ERROR_PREFIX + "TooManyTargets" and "300" in error.message
    finally:
        other.close()


def test_query(lab):
    client = lab.client
    flags, status, details = client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", (SOMEHOST[0],),
                                         timeout=30)
    assert (flags, status) == (REACHABLE | IS_DIRECT, 2)
    for key in ("interface", "interface-type", "addresses", "connectivity", "metered", "error"):
        assert key in details, details
    assert sorted(details["addresses"]) == sorted(SOMEHOST[1:]) and details["interface"] == harness.NM_IFNAME
    flags, status, details = client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", ("",))
    assert (flags, status) == (REACHABLE, 2) and details["connectivity"] == "full"
    flags, status, details = client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", ("nosuch.test",),
                                         timeout=30)
    assert (flags, status) == (0, 0) and details["error"] != ""
    # Query creates no object.
    assert client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0] == {}
