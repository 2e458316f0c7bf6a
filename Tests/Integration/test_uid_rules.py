"""The caller's uid in the lookup: ``ip rule … uidrange`` answers as the caller's own packets are routed.

The kernel lab of test_kernel_backend.py (namespace A, ``--backend kernel``, reachable through
``kveth0``), plus ``ip rule add uidrange 1000-1000 lookup 100`` and ``ip route add unreachable
default table 100``: uid 1000's packets have no way out, uid 0's do. Clients run as uid 1000 with
``setpriv`` (gdbus on the lab's bus, reachctl in namespace A with the daemon and without it), root's
through the test's own connection, both through the same daemon at once. The number of route
lookups made for callers the rules route otherwise is read from the daemon's debug log: none
without uid rules.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import harness
from harness import MANAGER_IFACE, REACHABLE, ROOT_PATH, SERVICE, TARGET_IFACE
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    AT_START, GATEWAY_V4, UPLINK_V4, KERNEL_CONNECTED, UPLINK, UPLINK_PEER, daemon_args, kernel_lab_without_carrier, online,
    start_daemon)

BIN = harness.daemon_binary().parent
USER = "1000"
PATH_IFACE = SERVICE + ".Path"
OUTSIDE = "192.0.2.77"  # on kveth0's own network: the main table routes it, table 100 refuses it
OUTSIDE_NAME = "outside.test"  # OUTSIDE, from namespace A's hosts file


@pytest.fixture
def online_with_hosts(kernel_lab_without_carrier):
    """``online``, with a hosts file of namespace A's (``ip netns exec`` mounts /etc/netns/A/hosts
    over /etc/hosts) naming OUTSIDE ``outside.test``, for the daemon's resolver."""
    lab = kernel_lab_without_carrier
    directory = Path("/etc/netns") / lab.ns_a
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "hosts").write_text(f"127.0.0.1 localhost\n{OUTSIDE} {OUTSIDE_NAME}\n")
    try:
        state = start_daemon(lab, daemon_args("--backend", "kernel"))
        lab.set_peer(UPLINK_PEER, True)
        state.recorder.wait_answer(KERNEL_CONNECTED, "the connected answer", mark=AT_START)
        yield state
        state.recorder.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def as_user(lab, argv: list, netns: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    prefix = harness.Namespaces.exec_argv(lab.ns_a) if netns else []
    full = prefix + [harness.need_tool("setpriv"), "--reuid", USER, "--regid", USER, "--clear-groups", *map(str, argv)]
    return subprocess.run(full, capture_output=True, text=True, timeout=harness.START_TIMEOUT, env=env, check=False)


def gdbus_query(lab, target: str) -> tuple:
    """Manager.Query as uid 1000: (flags, status, reason)."""
    result = as_user(lab, [harness.need_tool("gdbus"), "call", "--system", "--dest", SERVICE, "--object-path",
                           ROOT_PATH, "--method", f"{MANAGER_IFACE}.Query", target])
    assert result.returncode == 0, result.stderr
    match = re.match(r"\(uint32 (\d+), (-?\d+), ", result.stdout)
    reason = re.search(r"'reason': <'([^']*)'>", result.stdout)
    assert match and reason, result.stdout
    return int(match.group(1)), int(match.group(2)), reason.group(1)


def uid_rule(lab) -> None:
    lab.ip_a("route", "add", "unreachable", "default", "table", "100")
    lab.ip_a("route", "add", "unreachable", "192.0.2.0/24", "table", "100")
    lab.ip_a("rule", "add", "pref", "50", "uidrange", f"{USER}-{USER}", "lookup", "100")


def root_query(lab, target: str) -> tuple:
    flags, status, details = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", (target,))
    return flags, status, details["reason"]


def class_lookups(online) -> int:
    return sum(int(n) for n in re.findall(r"(\d+) lookups for other uids", online.daemon.log_text()))


def test_query_answers_each_caller_for_its_own_uid(online):
    """Without uid rules, uid 1000 and root get the same answer and no lookup is made for another
    uid. With the rule: uid 1000's Query of the internet and of an address is not reachable
    (rejected), root's is reachable, asked of the same daemon one after the other and again."""
    lab = online.lab
    assert gdbus_query(lab, "") == (REACHABLE, 2, "")
    online.sync()
    assert class_lookups(online) == 0
    uid_rule(lab)
    assert "uidrange" in lab.ip_a("rule").stdout
    online.sync()
    for _ in range(2):
        assert gdbus_query(lab, "") == (0, 0, "rejected")
        assert root_query(lab, "") == (REACHABLE, 2, "")
        assert gdbus_query(lab, OUTSIDE) == (0, 0, "rejected")
        assert root_query(lab, OUTSIDE)[:2] == (REACHABLE | harness.IS_DIRECT, 2)
    # Per distinct answer, not per call: the internet's three destinations and the address, once
    # per evaluation for uid 1000's class (none for root's: the daemon's own class).
    online.sync()
    assert 0 < class_lookups(online) <= 2 * 4, online.daemon.log_text()
    # The root object's internet target is the system's answer (the daemon's own uid).
    assert lab.client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Flags") == REACHABLE


# A client of uid 1000 that holds targets for as long as it runs: one command per stdin line
# ("watch METHOD ARG", "get PATH"), one JSON answer per line; it counts StatusChanged per path.
HOLDER = r"""
import json, select, sys
from gi.repository import Gio, GLib
SERVICE, ROOT = "io.github.reachabilityd.Reachability1", "/io/github/reachabilityd/Reachability1"
flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
conn = Gio.DBusConnection.new_for_address_sync(sys.argv[1], flags, None, None)
signals = {}
def on_status(_c, _s, path, _i, _m, params, *_):
    signals.setdefault(path, []).append(list(params.unpack()))
conn.signal_subscribe(SERVICE, SERVICE + ".Target", "StatusChanged", None, None, 0, on_status)
added = {}
def on_added(_c, _s, _p, _i, _m, params, *_):
    path, interfaces = params.unpack()
    added[path] = interfaces.get(SERVICE + ".Target", {})
conn.signal_subscribe(SERVICE, "org.freedesktop.DBus.ObjectManager", "InterfacesAdded", None, None, 0, on_added)
flags_told = {}
def on_changed(_c, _s, path, _i, _m, params, *_):
    interface, changed, _ = params.unpack()
    if interface == SERVICE + ".Path" and "Flags" in changed:
        flags_told.setdefault(path, []).append(changed["Flags"])
conn.signal_subscribe(SERVICE, "org.freedesktop.DBus.Properties", "PropertiesChanged", None, None, 0, on_changed)
def call(path, iface, method, sig, args):
    return conn.call_sync(SERVICE, path, iface, method, GLib.Variant(sig, args) if sig else None,
                          None, 0, 10000, None).unpack()
context = GLib.MainContext.default()
while True:
    while context.iteration(False):
        pass
    ready, _, _ = select.select([sys.stdin], [], [], 0.02)
    if not ready:
        continue
    line = sys.stdin.readline()
    if not line:
        break
    words = line.split()
    if words[0] == "watch":
        signature = "(" + "s" * len(words[2:]) + ")"
        answer = call(ROOT, SERVICE + ".Manager", words[1], signature, tuple(words[2:]))[0]
    elif words[0] == "ping":
        call(ROOT, "org.freedesktop.DBus.Peer", "Ping", None, None)
        while context.iteration(False):
            pass
        answer = "pong"
    elif words[0] == "added":
        answer = added.get(words[1])
    elif words[0] == "path":
        answer = {"props": call(words[1], "org.freedesktop.DBus.Properties", "GetAll", "(s)",
                               (SERVICE + ".Path",))[0], "flags": flags_told.get(words[1], [])}
    else:
        answer = {"props": call(words[1], "org.freedesktop.DBus.Properties", "GetAll", "(s)",
                               (SERVICE + ".Target",))[0], "signals": signals.get(words[1], [])}
    print(json.dumps(answer), flush=True)
"""


class Holder:
    """HOLDER run as uid 1000 (it talks to the lab's bus; it needs no namespace)."""

    def __init__(self, lab):
        argv = [harness.need_tool("setpriv"), "--reuid", USER, "--regid", USER, "--clear-groups",
                "/usr/bin/python3", "-c", HOLDER, lab.bus.address]
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        start_new_session=True)

    def ask(self, line: str):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()
        ready = harness.read_line(self.process.stdout, harness.CHANGE_TIMEOUT)
        assert ready, f"the uid {USER} client did not answer {line!r}"
        return json.loads(ready)

    def stop(self):
        self.process.stdin.close()
        self.process.wait(harness.STOP_TIMEOUT)


def test_watched_host_each_holder_its_own_answer(online_with_hosts):
    """uid 1000 and root hold outside.test (resolved by the daemon to 192.0.2.77) at once: uid 1000's
    answer is not reachable (rejected), root's reachable."""
    online = online_with_hosts
    lab = online.lab
    holder = Holder(lab)
    try:
        uid_rule(lab)
        online.sync()
        path = holder.ask(f"watch WatchHost {OUTSIDE_NAME}")
        assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", (OUTSIDE_NAME,))[0] == path
        harness.wait_until(lambda: holder.ask(f"get {path}")["props"]["Addresses"] == [OUTSIDE],
                           harness.CHANGE_TIMEOUT, "the host resolved", lambda: holder.ask(f"get {path}"))
        harness.wait_until(lambda: holder.ask(f"get {path}")["props"]["Reason"] == "rejected",
                           harness.CHANGE_TIMEOUT, "uid 1000's own answer", lambda: holder.ask(f"get {path}"))
        props = lab.client.get_all(SERVICE, path, TARGET_IFACE)
        assert props["Reachable"] and props["Addresses"] == [OUTSIDE], harness.fmt_props(props)
        assert gdbus_query(lab, OUTSIDE_NAME) == (0, 0, "rejected")
        assert root_query(lab, OUTSIDE_NAME)[:2] == (REACHABLE | harness.IS_DIRECT, 2)
    finally:
        holder.stop()


def test_watched_address_each_holder_its_own_answer(online):
    """uid 1000 and root hold the same address target at once: uid 1000's properties say not
    reachable (rejected), root's reachable. The rule removed: uid 1000 gets the shared answer back
    with one StatusChanged, root hears nothing. Added again: uid 1000 gets its own answer and one
    StatusChanged; root still hears nothing. Without uid rules no lookup is made for another uid."""
    lab = online.lab
    holder = Holder(lab)
    try:
        path = holder.ask(f"watch WatchAddress {OUTSIDE}")
        root_path = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", (OUTSIDE,))[0]
        assert path == root_path
        assert holder.ask(f"get {path}")["props"]["Reachable"]
        online.sync()
        assert class_lookups(online) == 0, "no uid rule: nothing is asked for another uid"
        root = lab.recorder(path)
        mark = root.mark()

        uid_rule(lab)
        online.sync()
        harness.wait_until(lambda: holder.ask(f"get {path}")["props"]["Reason"] == "rejected",
                           harness.CHANGE_TIMEOUT, "uid 1000's own answer", lambda: holder.ask(f"get {path}"))
        mine = holder.ask(f"get {path}")
        assert (mine["props"]["Flags"], mine["props"]["Status"]) == (0, 0), mine
        assert mine["signals"] == [[0, 0]], mine
        props = lab.client.get_all(SERVICE, path, TARGET_IFACE)
        assert props["Reachable"] and props["Reason"] == "", harness.fmt_props(props)
        # A second connection of uid 1000 watching it now: InterfacesAdded carries its user's answer.
        second = Holder(lab)
        try:
            assert second.ask(f"watch WatchAddress {OUTSIDE}") == path
            second.ask("ping")
            added = second.ask(f"added {path}")
            assert added and added["Reason"] == "rejected" and added["Flags"] == 0, added
        finally:
            second.stop()

        lab.ip_a("rule", "del", "pref", "50")
        online.sync()
        harness.wait_until(lambda: holder.ask(f"get {path}")["props"]["Reachable"], harness.CHANGE_TIMEOUT,
                           "the shared answer back for uid 1000", lambda: holder.ask(f"get {path}"))
        holder.ask("ping")
        assert holder.ask(f"get {path}")["signals"] == [[0, 0], [2, REACHABLE | harness.IS_DIRECT]]
        root.barrier()
        assert root.status_changes(mark) == [], root.describe(mark)
        root.close()
    finally:
        holder.stop()


def test_library_as_the_user_with_the_daemon_and_in_process(online):
    """reachctl run as uid 1000 in namespace A, with the daemon (it follows the internet as Apple's
    internet address, 0.0.0.0, a held target carrying its own answer) and without it (the kernel
    applies the process's own uid): not reachable, rejected, both; root's reachctl with the daemon
    at the same time: reachable. The same user gets the same answer either way."""
    lab = online.lab
    uid_rule(lab)
    online.sync()
    answers = {}
    for mode in ("--daemon", "--no-daemon"):
        shown = as_user(lab, [BIN / "reachctl", mode, "--json"])
        answers[mode] = json.loads(shown.stdout.splitlines()[0])
        assert (answers[mode]["reachable"], answers[mode]["reason"]) == (False, "rejected"), (answers, shown.stderr)
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    mine = subprocess.run(harness.Namespaces.exec_argv(lab.ns_a) + [str(BIN / "reachctl"), "--daemon", "--json"],
                          capture_output=True, text=True, timeout=harness.START_TIMEOUT, env=env, check=False)
    assert json.loads(mine.stdout.splitlines()[0])["reachable"], mine.stdout
    assert gdbus_query(lab, "")[2] == answers["--no-daemon"]["reason"]


def evaluations(online) -> int:
    return len(re.findall(r"evaluated \d+ targets", online.daemon.log_text()))


def test_evaluations_with_and_without_uid_rules(online):
    """The same five route changes, with root and uid 1000 holding one address target: without uid
    rules, one evaluation per change and no lookup for another uid; with a uid rule, still one
    evaluation per change (per target, not per user), plus uid 1000's class's lookups: the
    internet's three destinations are not asked for a held address, the address once each."""
    lab = online.lab
    holder = Holder(lab)
    try:
        path = holder.ask(f"watch WatchAddress {OUTSIDE}")
        lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", (OUTSIDE,))
        figures = {}
        for rules in (False, True):
            if rules:
                uid_rule(lab)
            online.sync()
            before = (evaluations(online), class_lookups(online))
            for i in range(5):
                lab.ip_a("route", "add", f"203.0.113.{10 * rules + i}", "via", GATEWAY_V4, "dev", UPLINK)
                online.sync()
            assert holder.ask(f"get {path}")["props"]["Reachable"] is not rules
            figures[rules] = (evaluations(online) - before[0], class_lookups(online) - before[1])
        print(f"evaluations, lookups for other uids over 5 changes: without uid rules {figures[False]}, "
              f"with {figures[True]}")
        assert figures[False][1] == 0
        assert figures[True][0] == figures[False][0], figures
        assert 0 < figures[True][1] <= figures[True][0], figures
    finally:
        holder.stop()


def test_watched_pair_each_holder_its_own_answer(online):
    """An address pair (from kveth0's address to 192.0.2.77) held by uid 1000 and root: the lookup
    from the local address carries the holder's uid too -- uid 1000 rejected, root reachable."""
    lab = online.lab
    holder = Holder(lab)
    try:
        uid_rule(lab)
        online.sync()
        path = holder.ask(f"watch WatchAddressPair {UPLINK_V4} {OUTSIDE}")
        assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddressPair", "ss",
                               (UPLINK_V4, OUTSIDE))[0] == path
        mine = holder.ask(f"get {path}")["props"]
        assert (mine["Flags"], mine["Reason"]) == (0, "rejected"), mine
        props = lab.client.get_all(SERVICE, path, TARGET_IFACE)
        assert props["Reachable"] and props["Reason"] == "", harness.fmt_props(props)
    finally:
        holder.stop()


def held_under_the_rule(online, holder, method, *args, ask="get"):
    """Under the uid rule, uid 1000 and root hold the same object (``Manager.method(*args)``);
    uid 1000's own answer (``holder``'s ``ask`` command) is refused. Its path and that answer."""
    lab = online.lab
    uid_rule(lab)
    online.sync()
    path = holder.ask(" ".join(["watch", method, *args]))
    assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, method, "s" * len(args), tuple(args))[0] == path
    mine = holder.ask(f"{ask} {path}")
    assert (mine["props"]["Flags"], mine["props"]["Reason"]) == (0, "rejected"), mine
    return path, mine


def test_watched_internet_tells_the_holder_each_change_of_its_own_answer(online):
    """uid 1000 holds the internet (``0.0.0.0``, Apple's internet target) under a rule whose table
    refuses its packets, root holds it too: uid 1000 reads not reachable. Its table gets a way out
    (``default via`` the gateway, table 100) while the system's answer stays: uid 1000 is told
    (Flags, StatusChanged) that its internet is back, root hears nothing. The way out refused again:
    uid 1000 is told again. Before, a change towards the system's answer was never told."""
    lab = online.lab
    holder = Holder(lab)
    try:
        path, mine = held_under_the_rule(online, holder, "WatchAddress", "0.0.0.0")
        root = lab.recorder(path)
        mark = root.mark()

        lab.ip_a("route", "replace", "default", "via", GATEWAY_V4, "dev", UPLINK, "table", "100")
        harness.wait_until(lambda: holder.ask(f"get {path}")["props"]["Reachable"], harness.CHANGE_TIMEOUT,
                           "uid 1000's internet back", lambda: holder.ask(f"get {path}"))
        holder.ask("ping")
        told = holder.ask(f"get {path}")
        assert told["signals"] == [[2, REACHABLE]], told

        lab.ip_a("route", "replace", "unreachable", "default", "table", "100")
        harness.wait_until(lambda: not holder.ask(f"get {path}")["props"]["Reachable"], harness.CHANGE_TIMEOUT,
                           "uid 1000's internet refused again", lambda: holder.ask(f"get {path}"))
        holder.ask("ping")
        told = holder.ask(f"get {path}")
        assert told["signals"] == [[2, REACHABLE], [0, 0]], told
        root.barrier()
        assert root.status_changes(mark) == [], root.describe(mark)
        root.close()
    finally:
        holder.stop()


def test_the_path_object_is_each_holders_own(online):
    """uid 1000 and root hold the path object (WatchPath) under a rule whose table refuses uid 1000's
    packets: uid 1000 reads Flags 0, Reason "rejected", no usable link; root reads reachable. uid
    1000's table gets a way out: uid 1000 is told (PropertiesChanged, Flags reachable), root hears
    nothing; refused again: told again. Before, the path object was the system's: uid 1000 read
    reachable while every packet of it was refused (the project's NWPathMonitor example said
    "satisfied" through the service and "unsatisfied" in-process, as that uid)."""
    lab = online.lab
    holder = Holder(lab)
    try:
        path, mine = held_under_the_rule(online, holder, "WatchPath", ask="path")
        assert not any(link[4] for link in mine["props"]["Interfaces"]), mine
        theirs = lab.client.get_all(SERVICE, path, PATH_IFACE)
        assert theirs["Flags"] & REACHABLE and theirs["Reason"] == "", harness.fmt_props(theirs)
        assert mine["props"]["NetworkIdentity"] == theirs["NetworkIdentity"], "the network is everybody's"
        root = lab.recorder(path)
        mark = root.mark()

        lab.ip_a("route", "replace", "default", "via", GATEWAY_V4, "dev", UPLINK, "table", "100")
        harness.wait_until(lambda: holder.ask(f"path {path}")["flags"], harness.CHANGE_TIMEOUT,
                           "uid 1000 told its paths lead out", lambda: holder.ask(f"path {path}"))
        told = holder.ask(f"path {path}")
        assert [flags & REACHABLE for flags in told["flags"]] == [REACHABLE], told
        assert told["props"]["Reason"] == "" and told["props"]["Interfaces"][0][4], told

        lab.ip_a("route", "replace", "unreachable", "default", "table", "100")
        harness.wait_until(lambda: len(holder.ask(f"path {path}")["flags"]) == 2, harness.CHANGE_TIMEOUT,
                           "uid 1000 told its paths are refused again", lambda: holder.ask(f"path {path}"))
        told = holder.ask(f"path {path}")
        assert told["flags"][1] == 0 and told["props"]["Reason"] == "rejected", told
        root.barrier()
        changes = [e for e in root.since(mark) if e.member == "PropertiesChanged"]
        assert changes == [], root.describe(mark)
        assert lab.client.get_all(SERVICE, path, PATH_IFACE) == theirs, "root's paths never moved"
        root.close()
    finally:
        holder.stop()


def test_an_evaluation_that_moves_no_path_changes_no_metrics(online):
    """Under uid rules the paths are announced after every evaluation (a holder's own may have
    moved while the system's did not); the metrics, and their followers' Metrics.Changed, only
    when the paths themselves changed: a route event that moves nothing sends no Changed
    (reachctl's textfile is rewritten on Changed)."""
    lab = online.lab
    uid_rule(lab)
    online.sync()
    lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath")
    online.sync()
    with harness.metrics_changes(lab.client) as changes:
        online.sync()
        harness.pump()
        changes.clear()
        # A route no path uses: the kernel's event makes an evaluation, which moves nothing.
        lab.ip_a("route", "add", "198.51.100.0/24", "via", GATEWAY_V4, "dev", UPLINK)
        online.sync()
        # Changed leaves from an idle turn of the service's loop, which a call may overtake:
        # what it would send is given a second (nothing else could announce an absence).
        with pytest.raises(harness.WaitTimeout):
            harness.wait_until(lambda: changes, 1.0, "no Metrics.Changed")
        assert changes == [], f"{len(changes)} Metrics.Changed for a route event that moved no path"
