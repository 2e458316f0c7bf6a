"""Hardening: clients that come and go by the thousand, and clients that abuse the service.

Each "client" is its own connection to the bus (its own unique name, which is
what the daemon tracks), opened, used and closed without Release.
"""

import os
import sys
import time
from pathlib import Path

import harness
from harness import MANAGER_IFACE, OBJECT_MANAGER_IFACE, ROOT_PATH, SERVICE, TARGET_IFACE, BusClient, DBusCallError

sys.path.insert(0, str(harness.REPO / "Benchmarks"))
from measure import rss_kb  # noqa: E402

SHARED = [("WatchHost", "localhost"), ("WatchAddress", "127.0.0.1")]


def children(client):
    return client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0]


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def churn(address, clients, first=0):
    """``clients`` connections, each watching two shared targets and one of its own, then leaving."""
    for i in range(first, first + clients):
        client = BusClient(address)
        for method, target in SHARED + [("WatchAddress", f"192.0.2.{i % 250 + 1}")]:
            client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, method, "s", (target,))
        client.close()


def afnetworking_status(flags: int) -> int:
    """Status as the contract derives it from Flags: AFNetworking's AFNetworkReachabilityStatusForFlags."""
    if not flags & harness.REACHABLE:
        return harness.STATUS_NOT_REACHABLE
    automatic = flags & (harness.CONNECTION_ON_DEMAND | harness.CONNECTION_ON_TRAFFIC)
    if flags & harness.CONNECTION_REQUIRED and not (automatic and not flags & harness.INTERVENTION_REQUIRED):
        return harness.STATUS_NOT_REACHABLE
    return harness.STATUS_WWAN if flags & harness.IS_WWAN else harness.STATUS_WIFI_ETHERNET


def internet_answer(client):
    """The internet target's (Status, Flags), read in one GetAll, as the contract has them from a
    daemon on the kernel backend that owns its name: evaluated (never -1: it takes its name only
    once it has its facts), and Status the one Flags give."""
    props = client.get_all(SERVICE, ROOT_PATH, TARGET_IFACE)
    status, flags = props["Status"], props["Flags"]
    assert status != harness.STATUS_UNKNOWN, f"Status -1 from a daemon that owns its name: {harness.fmt_props(props)}"
    assert status == afnetworking_status(flags), f"Status {status} for Flags {harness.fmt_flags(flags)}"
    return status, flags


def wait_no_children(client, what):
    harness.wait_until(lambda: not children(client), harness.CHANGE_TIMEOUT, what,
                       lambda: f"  still there: {sorted(children(client))}", poll=0.1)


def test_a_thousand_clients_leave_without_release_and_nothing_stays(plain_lab):
    lab = plain_lab
    daemon = lab.daemon(args=["--system", "--backend", "kernel"])
    # A warm-up round first: allocator pools and GLib's resolver thread exist afterwards, as on any
    # machine where the daemon has served clients.
    churn(lab.bus.address, 100)
    wait_no_children(lab.client, "no target after the warm-up clients left")
    rss_before, fds_before = rss_kb(daemon.pid), fds(daemon.pid)
    answer_before = internet_answer(lab.client)

    churn(lab.bus.address, 1000, first=100)
    wait_no_children(lab.client, "no target after 1,000 clients left without Release")
    rss_after, fds_after = rss_kb(daemon.pid), fds(daemon.pid)
    print(f"1,000 clients: RSS {rss_before} → {rss_after} KiB, fds {fds_before} → {fds_after}")
    assert fds_after == fds_before, f"open files {fds_before} → {fds_after}"
    if not os.environ.get("REACH_TEST_SANITIZER"):  # a sanitizer's quarantine keeps freed memory resident
        assert rss_after - rss_before <= 1024, f"RSS grew {rss_after - rss_before} KiB"
    # And the daemon still answers as before (the machine's network has not changed meanwhile).
    assert internet_answer(lab.client) == answer_before


def test_abusers_get_named_errors_and_the_daemon_keeps_answering(plain_lab):
    """A client watching fresh names in a tight loop hits its limit; one sending Query floods
    hits LimitsExceeded or gets answers; oversized and malformed calls get named errors; a second
    client's Get is answered throughout, and the number of objects stays bounded by the limits."""
    lab = plain_lab
    lab.daemon(args=["--system", "--backend", "kernel", "--max-targets-per-client", "64"])
    answer_before = internet_answer(lab.client)
    greedy = BusClient(lab.bus.address)
    errors = set()
    for i in range(200):
        error = greedy.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", (f"198.51.100.{i}",))
        if error:
            errors.add(error.name)
    assert errors == {SERVICE + ".Error.TooManyTargets"}, errors
    assert len(children(lab.client)) == 64

    bad = [
        ("WatchHost", "s", ("x" * 60_000,), SERVICE + ".Error.InvalidTarget"),
        # Past 64 KiB of arguments a call is refused before it is decoded (hardening.md).
        ("WatchHost", "s", ("x" * (1 << 20),), "org.freedesktop.DBus.Error.InvalidArgs"),
        ("WatchHost", "s", ("a." * 200,), SERVICE + ".Error.InvalidTarget"),
        ("WatchAddress", "s", ("1" * 60_000,), SERVICE + ".Error.InvalidTarget"),
        ("WatchAddress", "s", ("1" * 100_000,), "org.freedesktop.DBus.Error.InvalidArgs"),
        ("WatchHost", "as", (["a"] * 100_000,), "org.freedesktop.DBus.Error.InvalidArgs"),
        ("Query", "v", (harness.GLib.Variant("s", "x"),), "org.freedesktop.DBus.Error.InvalidArgs"),
        ("Release", "o", (ROOT_PATH + "/host/nothing",), SERVICE + ".Error.UnknownTarget"),
    ]
    abuser = BusClient(lab.bus.address)
    for method, signature, args, expected in bad:
        error = abuser.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, method, signature, args)
        assert error is not None and error.name == expected, (method, signature, error)
        # The second client is answered after every one of them, as before.
        assert internet_answer(lab.client) == answer_before, (method, signature)
    nested = harness.GLib.Variant("v", harness.GLib.Variant("s", "x"))
    for _ in range(60):
        nested = harness.GLib.Variant("v", nested)
    error = abuser.call_error(SERVICE, ROOT_PATH, "org.freedesktop.DBus.Properties", "Set", "ssv",
                              (TARGET_IFACE, "Flags", nested))
    assert error is not None and error.name in ("org.freedesktop.DBus.Error.PropertyReadOnly",
                                                "org.freedesktop.DBus.Error.InvalidArgs"), error

    # Queries of watched and unwatched addresses, many in a row, are all answered, each with
    # the kernel's answer at once (an address needs no lookup: never -1) and the Status its Flags give.
    for i in range(2000):
        reply = abuser.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", (f"203.0.113.{i % 250}",))
        assert reply[1] != harness.STATUS_UNKNOWN and reply[1] == afnetworking_status(reply[0]), reply
    greedy.close()
    abuser.close()
    wait_no_children(lab.client, "the abusers' targets released when they left")


def _owns_the_name(lab) -> bool:
    return bool(lab.client.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                "NameHasOwner", "s", (SERVICE,))[0])


def test_the_daemon_serves_with_its_standard_descriptors_closed_or_its_log_pipe_broken(plain_lab):
    """Started with stdin, stdout and stderr closed, and again with its output a pipe whose reader
    has left, the daemon serves and goes on serving (it died of SIGPIPE, status 141, at its first
    log line). Each run ends by SIGTERM, with status 0."""
    import signal
    import subprocess
    lab = plain_lab
    template = lab.daemon(start=False, args=["--system", "--backend", "kernel", "--verbose"])

    def closed_stdio():
        for fd in (0, 1, 2):
            os.close(fd)

    reader, writer = os.pipe()
    os.close(reader)
    for what, options in (("all standard descriptors closed", {"preexec_fn": closed_stdio}),
                          ("its output a pipe whose reader left",
                           {"stdin": subprocess.DEVNULL, "stdout": writer, "stderr": writer})):
        process = subprocess.Popen(template.argv(), env=template.environment(), **options)
        try:
            harness.wait_until(lambda: _owns_the_name(lab) or process.poll() is not None, harness.START_TIMEOUT,
                               f"the daemon, {what}, owning its name")
            assert process.poll() is None, f"the daemon, {what}, exited with status {process.returncode}"
            # It logs on every new target (--verbose): write after write to a broken pipe.
            for i in range(3):
                lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", (f"192.0.2.{i + 1}",))
            internet_answer(lab.client)
            assert process.poll() is None, f"the daemon, {what}, exited with status {process.returncode}"
        finally:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
            status = process.wait(harness.START_TIMEOUT)
        assert status == 0, f"the daemon, {what}, ended with status {status}"
        harness.wait_until(lambda: not _owns_the_name(lab), harness.START_TIMEOUT, "the name released")
    os.close(writer)
