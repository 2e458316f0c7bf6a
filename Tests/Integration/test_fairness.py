"""Hostile tenants: no user of the machine can make the service useless for another.

docs/hardening.md, "Fair to every user" and "Hostile tenants".
Each test runs the daemon as root on a system bus with Debian's default
policy and the shipped policy file, in a network namespace with the kernel
backend and a DNS server of the lab's (``fast.test`` answered at once,
``never.test`` never). The attacker is ``nobody``; the victim is another
ordinary user whose probe calls ``Peer.Ping`` and ``Get(Status)`` of the root
object one at a time, 1 s timeout, all through the attack. Every attack is
held to the same goals (``tenants.Attack.check``): no victim call fails or
takes over 1 s, the victim's p99 is at most 100 ms, the daemon's RSS stays
within 32 MiB of idle and comes back within 4 MiB of it once the attacker
has gone. The sizes here are for a 2-core CI machine; ``Benchmarks/abuse.py``
runs the same attacks at full size.
"""

import os
import signal
import time
from xml.etree import ElementTree

import pytest

import harness
import tenants
from harness import (MANAGER_IFACE, PEER_IFACE, PROPERTIES_IFACE, ROOT_PATH, TARGET_IFACE, DBusCallError,
                     wait_until)
from tenants import (FAST_ZONE, LIMITS_EXCEEDED, NEVER_ZONE, NOBODY, TOO_MANY_TARGETS, UNKNOWN_OBJECT,
                     VICTIM, Attack, Tenant, describe_flood, flood, flood_result, nonreader)

# CI sizes (full sizes in Benchmarks/abuse.py).
NONREADER_CONNECTIONS = int(os.environ.get("REACH_FAIR_NONREADERS", "24"))  # abuse.py: 80
NONREADER_CALLS = 128            # dbus-daemon's max_replies_per_connection
ATTACK_SECONDS = float(os.environ.get("REACH_FAIR_SECONDS", "6"))
HOARD_CONNECTIONS = 64           # x 256 targets: the whole global limit of 16,384
PER_USER = 2048                  # the daemon's default --max-targets-per-user
BOOKKEEPING_TARGETS = 4096
MANAGED_TARGETS = 1024
# The floods below keep both cores busy (the attacker, dbus-daemon, the daemon and the victim are
# four busy processes on CI's two cores) and queue their calls in the bus ahead of the victim's
# (docs/hardening.md, "What is left on dbus-daemon"): on CI, with a debug build, the victim's p99 is held to
# what that allows; the 1 s timeout is never relaxed, and abuse.py measures the full size on a
# release build against the 100 ms goal.
BUS_FIFO_P99_MS = 250.0           # 256 calls queued in the bus ahead of the victim's, 0.3 ms each (debug)
SATURATED_P99_MS = 250.0
CHURN_CLIENTS = 500
SETTLE = 15.0                    # bounds waits for the daemon to catch up (never paces a test)


def all_answered(result: dict, who: str) -> None:
    """Every call of a flood got a reply or a named error (the README's threat model), even from a
    user over its limits: a client that reads its socket is never left waiting."""
    assert result["complete"], f"{who}: calls of a client that reads were left unanswered: {describe_flood(result)}"


def targets_held(lab) -> int:
    """How many targets the daemon has (root sees every user's)."""
    return len(lab.client.call(harness.SERVICE, ROOT_PATH, harness.OBJECT_MANAGER_IFACE, "GetManagedObjects")[0])


def addresses_listed(lab) -> int:
    """How many address targets root's Introspect of ``…/address`` lists: a cheaper count than
    GetManagedObjects (no properties), for waits whose CPU is measured."""
    try:
        xml = lab.client.call(harness.SERVICE, ROOT_PATH + "/address", harness.INTROSPECTABLE_IFACE, "Introspect")[0]
    except DBusCallError:
        return 0
    return len(ElementTree.fromstring(xml).findall("node"))


def wait_targets(lab, count: int, what: str, timeout: float = SETTLE, count_of=targets_held) -> None:
    """Wait until root's GetManagedObjects (or ``count_of``) lists ``count`` targets (nothing
    announces it to root: read every 0.1 s, bounded)."""
    wait_until(lambda: count_of(lab) == count, timeout, what, lambda: f"  targets now: {count_of(lab)}",
               poll=0.1)


def assert_answers_quickly(tenant, name: str, limit: float = 1.0) -> float:
    """The victim's Query of ``name`` is answered (not an error) within ``limit`` seconds; returns the time."""
    start = time.monotonic()
    try:
        answer = tenant.manager("Query", "s", (name,), timeout=10)
    except DBusCallError as error:
        raise AssertionError(f"the victim's Query({name}) failed after {time.monotonic() - start:.2f} s: "
                             f"{error.name}: {error.message}") from None
    took = time.monotonic() - start
    assert took <= limit, f"the victim's Query({name}) took {took:.2f} s (goal {limit} s): {answer}"
    assert answer[1] == harness.STATUS_WIFI_ETHERNET, f"Query({name}) answered {answer}"
    return took


def wait_answered(tenant, path: str, timeout: float = 5.0) -> int:
    """A host target's Status once it is known (>= 0): read, else its StatusChanged awaited (bounded)."""
    status = tenant.call(path, PROPERTIES_IFACE, "Get", "ss", (TARGET_IFACE, "Status"))[0]
    if status >= 0:
        return status
    return tenant.wait_signal(path, "StatusChanged", timeout)["args"][0]


# -- 1. a peer that never reads ------------------------------------------------------------------------------


@pytest.mark.parametrize("member", ["Introspect", "GetManagedObjects"])
def test_peers_that_never_read_cost_only_themselves(tenant_lab, member):
    """``nobody`` opens connections that each write 128 calls (the bus's limit of pending replies
    per connection) and never read their sockets; with GetManagedObjects, ``nobody`` holds 512
    targets first, so each answer is big."""
    lab = tenant_lab
    lab.start_daemon()
    holder = None
    if member == "GetManagedObjects":
        holder = flood(lab, NOBODY, "holder", "watch_address", connections=2, calls=256)
        held = flood_result(holder, 60)
        assert held["errors"] == {"ok": 512}, describe_flood(held)
    with Attack(lab, f"{NONREADER_CONNECTIONS} peers x {NONREADER_CALLS} {member}, never reading") as attack:
        attacker = nonreader(lab, NOBODY, "nonreader", NONREADER_CONNECTIONS, NONREADER_CALLS, member)
        sent = attacker.read("the calls written", 60)
        # What the attack does to others, over a fixed observation window.
        time.sleep(ATTACK_SECONDS)
        attacker.send({})
        unread = attacker.read("the bytes the attacker left unread", 10)
        attack.notes.append(f"attacker: {sent['sent']} calls written ({sent['bytes']} bytes, all: "
                            f"{sent['complete']}), {unread['unread']} bytes unread in its sockets")
        attacker.stop()
        if holder is not None:
            holder.stop()
        attack.attacker_gone()
    print(attack.summary())
    assert sent["complete"], f"the bus did not take the attacker's calls: {sent}"
    assert unread["unread"] > 0, f"the attacker's sockets hold nothing unread: it is not the peer meant here {unread}"
    attack.check()


HOLDER_TARGETS = 256              # the default per-connection limit
HOLDER_FLAPS = 150               # 300 edges x 256 targets' signals: several times the bus's 8 MiB
FLAP_SECONDS = float(os.environ.get("REACH_FAIR_FLAP_SECONDS", "60"))


def test_a_holder_that_stops_reading_costs_only_itself(tenant_lab_small_bus):
    """``nobody`` holds 256 targets on one connection, then stops reading (SIGSTOP) while the
    uplink flaps: every edge changes every target, so their signals to it pile up unread, charged
    to the service by the bus until it stops reading the service for everybody (here at 8 MiB,
    ``tenant_lab_small_bus``). The service stops sending to a peer whose read receipt is overdue:
    the victim's calls are all answered within 1 s, and the holder, woken, is still served."""
    lab = tenant_lab_small_bus
    lab.start_daemon()
    holder = Tenant(lab, NOBODY, "holder")
    for i in range(HOLDER_TARGETS):
        holder.manager("WatchAddress", "s", (f"203.0.113.{i % 250 + 1}" if i < 250 else f"198.51.100.{i}",))
    flaps = 0
    internet = lab.recorder(ROOT_PATH)
    internet.sync()
    with Attack(lab, f"a holder of {HOLDER_TARGETS} targets stops reading while the uplink flaps") as attack:
        os.kill(holder.pid, signal.SIGSTOP)
        try:
            deadline = time.monotonic() + FLAP_SECONDS
            while time.monotonic() < deadline and flaps < HOLDER_FLAPS:
                # Each edge announced before the next: every one changes every target.
                for state, status in (("down", 0), ("up", 2)):
                    mark = internet.mark()
                    # The veth's far end: the uplink loses and regains carrier, its routes stay.
                    lab.namespaces.ip(lab.netns, "link", "set", tenants.UPLINK + "p", state)
                    internet.wait_status(status, 0 if status == 0 else harness.REACHABLE,
                                         f"the internet target after flap {flaps + 1} {state}", mark=mark)
                flaps += 1
        finally:
            os.kill(holder.pid, signal.SIGCONT)
            internet.close()
        attack.notes.append(f"{flaps} flaps in {FLAP_SECONDS:.0f} s while the holder did not read")
        # Woken, it reads what is left and is answered again.
        assert holder.call(ROOT_PATH, PEER_IFACE, "Ping", timeout=30.0) == [], "the holder is not served again"
        holder.stop()
        attack.attacker_gone()
    print(attack.summary())
    assert flaps == HOLDER_FLAPS, f"only {flaps} flaps in {FLAP_SECONDS} s"
    attack.check()


# Opt-in (REACH_TEST_DBUS_BROKER=1, with Debian's dbus-broker installed): installing dbus-broker makes
# it the machine's system bus at the next boot, which the test command must not do to anyone.
# (Collected only then: under CI a skip counts as a failure.)
if os.environ.get("REACH_TEST_DBUS_BROKER"):
    def test_peers_that_never_read_cost_only_themselves_on_dbus_broker(tenant_broker_lab):
        """The same attack with Introspect, the bus being dbus-broker: it charges what waits for a reader
        to the reader's user and disconnects a reader over its quota."""
        test_peers_that_never_read_cost_only_themselves(tenant_broker_lab, "Introspect")


# -- 2. the global target limit from one user ------------------------------------------------------------------


def test_one_user_cannot_take_every_target(tenant_lab):
    """``nobody`` asks for the whole global limit (64 connections x 256 WatchAddress); it gets its
    user's share and TooManyTargets; another user can still watch a host and an address."""
    lab = tenant_lab
    lab.start_daemon()
    with Attack(lab, f"{HOARD_CONNECTIONS} connections x 256 WatchAddress from one user") as attack:
        hoarder = flood(lab, NOBODY, "hoarder", "watch_address", connections=HOARD_CONNECTIONS, calls=256, window=8)
        result = flood_result(hoarder, 120)
        attack.notes.append(f"attacker: {describe_flood(result)}")
        victim = Tenant(lab, VICTIM, "victim")
        host = victim.call_error(ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", ("victim." + FAST_ZONE,))
        address = victim.call_error(ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("198.51.100.77",))
        victim.stop()
        hoarder.stop()
        attack.attacker_gone()
    print(attack.summary())
    errors = result["errors"]
    assert host is None and address is None, \
        f"the victim could not watch: WatchHost {host}, WatchAddress {address}; the attacker got {errors}"
    all_answered(result, "the user asking for every target")
    assert errors.get("ok", 0) == PER_USER, f"one user holds {errors.get('ok', 0)} targets (its share: {PER_USER})"
    # Past its share every call is refused: TooManyTargets, or LimitsExceeded while the user's calls
    # wait for the receipts of the InterfacesAdded it was sent (more than its 1 MiB of unread output).
    refused = errors.get(TOO_MANY_TARGETS, 0) + errors.get(LIMITS_EXCEEDED, 0)
    assert refused == HOARD_CONNECTIONS * 256 - PER_USER and errors.get(TOO_MANY_TARGETS, 0) > 0, errors
    attack.check(p99_goal=SATURATED_P99_MS)


# -- 3. names that never resolve -------------------------------------------------------------------------------


def test_names_that_never_resolve_hold_only_their_users_lookups(tenant_lab):
    """``nobody``: 20 connections x 64 Query of distinct never-answered names, and 4 x 16 WatchHost
    of such names. The victim's Query of a fast name is answered within 1 s, its WatchHost gets a
    Status; once the attacker has gone no new lookup of its names starts, and the daemon is as fast
    as before."""
    lab = tenant_lab
    lab.start_daemon()
    dns = lab.dns
    with Attack(lab, "20 x 64 Query + 4 x 16 WatchHost of names that never resolve") as attack:
        queries = flood(lab, NOBODY, "never-queries", "query", connections=20, calls=64, window=64,
                        zone=NEVER_ZONE, timeout=600)
        watches = flood(lab, NOBODY, "never-watches", "watch_host", connections=4, calls=16, window=16,
                        zone=NEVER_ZONE, timeout=600)
        for child in (queries, watches):
            child.read("the attacker's connections", harness.START_TIMEOUT)
        wait_until(lambda: dns.count("never") >= 8, SETTLE, "the attacker's lookups at the DNS server",
                   lambda: f"  never.test queries: {dns.count('never')}", poll=0.05)
        victim = Tenant(lab, VICTIM, "victim")
        query_time = assert_answers_quickly(victim, "during." + FAST_ZONE)
        start = time.monotonic()
        path = victim.manager("WatchHost", "s", ("watched." + FAST_ZONE,))[0]
        status = wait_answered(victim, path)
        watch_time = time.monotonic() - start
        # The victim's probe keeps measuring while the attack lasts.
        time.sleep(max(0.0, attack.started + ATTACK_SECONDS - time.monotonic()))
        attack.notes.append(f"victim during the attack: Query {query_time * 1000:.0f} ms, WatchHost answered "
                            f"(Status {status}) in {watch_time * 1000:.0f} ms; never.test queries so far "
                            f"{dns.count('never')}")
        # The attacker leaves as a crashed program leaves.
        queries.kill()
        watches.kill()
        attack.attacker_gone()
        gone = time.monotonic()
        after_time = assert_answers_quickly(victim, "after." + FAST_ZONE)
        wait_targets(lab, 1, "the attacker's never-resolving targets released")
    # Lookups already running cannot be stopped (their threads wait for the resolver); none may start.
    started_late = sorted({name for t, zone, name in dns.queries if zone == "never" and t > gone + 0.5}
                          - {name for t, zone, name in dns.queries if zone == "never" and t <= gone + 0.5})
    attack.notes.append(f"victim after the attack: Query {after_time * 1000:.0f} ms; never.test names first "
                        f"asked after the attacker left: {len(started_late)}")
    victim.stop()
    print(attack.summary())
    assert status >= 0
    assert not started_late, f"lookups for a caller that left were started: {started_late[:10]}"
    attack.check()


# -- 4. bookkeeping --------------------------------------------------------------------------------------------


def test_thousands_of_targets_come_and_go_cheaply(tenant_lab):
    """One user adds 4,096 targets (WatchAddress, 16 connections, in three floods: a first 1,024, 2,048
    more, a last 1,024) and leaves (the first flood, then the others): the victim's calls stay fast
    in both phases, and the daemon's CPU grows linearly with the targets, each way."""
    lab = tenant_lab
    daemon = lab.start_daemon("--max-targets-per-user", str(BOOKKEEPING_TARGETS))
    idle = tenants.rss_kib(daemon.pid)
    quarter = BOOKKEEPING_TARGETS // 4
    floods = ((0, quarter // 256), (quarter // 256, 2 * quarter // 256), (3 * quarter // 256, quarter // 256))
    adders, adding_cpu = [], []
    with Attack(lab, f"adding {BOOKKEEPING_TARGETS} targets", settle=False) as adding:
        for base, connections in floods:
            before = tenants.cpu_seconds(daemon.pid)
            adder = flood(lab, NOBODY, f"adder{base}", "watch_address", connections=connections, calls=256,
                          window=16, base=base)
            adders.append(adder)
            result = flood_result(adder, 120)
            adding_cpu.append(tenants.cpu_seconds(daemon.pid) - before)
            adding.notes.append(f"attacker (2001:db8:{base:x}:: and on): {describe_flood(result)}; "
                                f"daemon CPU {adding_cpu[-1]:.2f} s")
            assert result["errors"] == {"ok": connections * 256}, describe_flood(result)
    assert targets_held(lab) == BOOKKEEPING_TARGETS
    # The release takes a fraction of a second: every probe call made meanwhile counts.
    dropping_cpu = []
    with Attack(lab, f"dropping {BOOKKEEPING_TARGETS} targets of a client that left", idle_rss=idle,
                min_calls=1) as dropping:
        for gone, left in ((adders[:1], 3 * quarter), (adders[1:], 0)):
            before = tenants.cpu_seconds(daemon.pid)
            for adder in gone:
                adder.kill()
            dropping.attacker_gone()
            wait_targets(lab, left, f"the targets of the clients that left released ({left} left)",
                         count_of=addresses_listed)
            dropping_cpu.append(tenants.cpu_seconds(daemon.pid) - before)
        assert targets_held(lab) == 0
        dropping.notes.append(f"daemon CPU releasing the first {quarter}: {dropping_cpu[0]:.2f} s, "
                              f"the other {3 * quarter}: {dropping_cpu[1]:.2f} s")
    print(adding.summary())
    print(dropping.summary())
    # While one user pipelines 256 WatchAddress calls, the victim's call arrives behind them: the
    # bus queues every call to the service in arrival order (docs/hardening.md, "What is left on
    # dbus-daemon"), and a debug build takes about 0.3 ms each. Round-robin cannot reach into the
    # bus's queue, so this phase is held to what that order allows.
    # Releasing runs 128 orphans a loop turn; with only a few dozen victim calls in this phase its
    # p99 is its slowest call, which may wait for such a turn behind the bus's queue (a debug build:
    # 133 ms seen with the previous round's daemon too). abuse.py holds the release build to 20 ms.
    problems = adding.problems(p99_goal=BUS_FIFO_P99_MS) + dropping.problems(p99_goal=BUS_FIFO_P99_MS)
    # Nothing quadratic: the time a target costs does not grow with the targets already held.
    # Absolute CPU budgets belong to the benchmarks (abuse.py prints the 200 ms for 16,384
    # targets each way on a release build); a debug build on a shared CI machine moves too much
    # for them. When each hold copied the client's set, adding 4,096 took 9 times what 1,024 took:
    # the last 1,024 would cost about 7 times the first; with linear bookkeeping they cost the same
    # (the first even a little more: first allocations). Releasing 3,072 costs 3 times releasing
    # 1,024 when linear, 15 times when quadratic. Each bound is held with room for noise (CPU is
    # counted in 10 ms ticks, and root's Introspect polls are inside the release figures).
    if adding_cpu[2] > 2.5 * max(adding_cpu[0], 0.05):
        problems.append(f"adding: the last {quarter} targets cost {adding_cpu[2]:.2f} s of CPU, the first "
                        f"{quarter} {adding_cpu[0]:.2f} s (linear: about the same; bound 2.5 times)")
    if dropping_cpu[1] > 7 * max(dropping_cpu[0], 0.05):
        problems.append(f"dropping: releasing {3 * quarter} targets cost {dropping_cpu[1]:.2f} s of CPU, "
                        f"{quarter} {dropping_cpu[0]:.2f} s (linear: 3 times; bound 7 times)")
    assert not problems, "\n".join(problems + [adding.summary(), dropping.summary()])


def test_short_lived_clients_leave_nothing_behind(tenant_lab):
    """500 clients, one after another in two processes, each WatchHost x 8 and WatchPath, then gone."""
    lab = tenant_lab
    lab.start_daemon()
    with Attack(lab, f"{CHURN_CLIENTS} short-lived clients") as attack:
        churners = [lab.child(NOBODY, "churn", f"churn-{n}", clients=CHURN_CLIENTS // 2, hosts=8, names=64)
                    for n in range(2)]
        results = [c.read("the churner's clients done", 180) for c in churners]
        for churner in churners:
            churner.stop()
        attack.attacker_gone()
        wait_targets(lab, 0, "no target left after the short-lived clients")
    for result in results:
        attack.notes.append(f"churner: {result['errors']} in {result['seconds']:.1f} s")
    print(attack.summary())
    for result in results:
        assert result["errors"] == {"ok": CHURN_CLIENTS // 2 * 9}, result
    attack.check()


# -- 5. amplifiers -----------------------------------------------------------------------------------------------


def test_managed_objects_pipelined_at_many_targets(tenant_lab):
    """``nobody`` holds 1,024 targets and reads GetManagedObjects, 20 in flight. (At its whole share,
    2,048, one reply takes the debug build about 130 ms to build: the victim waits one such call,
    as round-robin promises, but that is over the 100 ms goal on CI; abuse.py runs the full size.)"""
    lab = tenant_lab
    daemon = lab.start_daemon()
    idle = tenants.rss_kib(daemon.pid)
    holder = flood(lab, NOBODY, "holder", "watch_address", connections=MANAGED_TARGETS // 256, calls=256)
    held = flood_result(holder, 120)
    assert held["errors"] == {"ok": MANAGED_TARGETS}, describe_flood(held)
    with Attack(lab, f"GetManagedObjects at {MANAGED_TARGETS} targets, 20 in flight", idle_rss=idle) as attack:
        reader = flood(lab, NOBODY, "reader", "managed_objects", connections=1, calls=0, window=20,
                       seconds=ATTACK_SECONDS, hold=False, timeout=30)
        result = flood_result(reader, ATTACK_SECONDS + 60)
        attack.notes.append(f"attacker: {describe_flood(result)}")
        holder.stop()
        attack.attacker_gone()
        wait_targets(lab, 0, "the holder's targets released")
    print(attack.summary())
    assert result["errors"].get("ok", 0) > 0, describe_flood(result)
    all_answered(result, "a client reading GetManagedObjects")
    # Round-robin promises the victim waits for at most the reply being built when it comes and
    # the one the bus passes ahead of it: two of the attacker's replies, whose cost this run
    # measures (the attacker's calls are served one at a time). On a debug build one took 130 ms
    # when this test was written and 160 ms on the same kind of machine later, with the same
    # daemon: the bound follows the measured cost, not a figure of one machine.
    per_reply_ms = 1000 * result["seconds"] / result["errors"]["ok"]
    attack.notes.append(f"one GetManagedObjects reply: {per_reply_ms:.0f} ms")
    attack.check(p99_goal=max(SATURATED_P99_MS, 2 * per_reply_ms + 50))


@pytest.mark.parametrize("target", ["internet", "host"])
def test_refresh_storm_joins_the_running_refresh(tenant_lab, target):
    """16 connections x 120 Refresh in flight, on the internet target or on a host target."""
    lab = tenant_lab
    lab.start_daemon()
    dns = lab.dns
    path = ROOT_PATH
    owner = Tenant(lab, NOBODY, "storm-owner")
    if target == "host":
        path = owner.manager("WatchHost", "s", ("storm." + FAST_ZONE,))[0]
        wait_answered(owner, path)
    with Attack(lab, f"Refresh storm on the {target} target, 16 x 120 in flight") as attack:
        start = time.monotonic()
        storm = flood(lab, NOBODY, "storm", "refresh", connections=16, calls=0, window=120, seconds=ATTACK_SECONDS,
                      path=path, hold=False, timeout=30)
        result = flood_result(storm, ATTACK_SECONDS + 60)
        seconds = time.monotonic() - start
        lookups = dns.count("fast", since=start, name_contains="storm.")
        attack.notes.append(f"attacker: {describe_flood(result)}; DNS queries for the host meanwhile: {lookups}")
        attack.attacker_gone()
    owner.stop()
    print(attack.summary())
    assert result["errors"].get("ok", 0) > 0, describe_flood(result)
    if target == "host":
        # A burst of 64 lookups, then 16 a second, each an A and an AAAA query.
        allowed = 2 * (64 + 16 * (seconds + 1))
        assert lookups <= allowed, f"{lookups} DNS queries for the stormed host in {seconds:.1f} s (at most {allowed:.0f})"
    all_answered(result, "a client storming Refresh")
    attack.check(p99_goal=SATURATED_P99_MS)


def test_fresh_name_queries_are_rate_limited_per_user(tenant_lab):
    """``nobody`` floods Query with fresh names (4 connections x 16 in flight): LimitsExceeded past
    a burst of 64 and 16 a second; the DNS server sees no more; the victim's fresh name is answered."""
    lab = tenant_lab
    lab.start_daemon()
    dns = lab.dns
    with Attack(lab, "fresh-name Query flood, 4 x 16 in flight") as attack:
        start = time.monotonic()
        flooder = flood(lab, NOBODY, "fresh", "query", connections=4, calls=0, window=16, zone=FAST_ZONE,
                        seconds=ATTACK_SECONDS, hold=False, tag="f", timeout=30)
        flooder.read("the flood's connections", harness.START_TIMEOUT)
        victim = Tenant(lab, VICTIM, "victim")
        wait_until(lambda: dns.count("fast", since=start, name_contains="qf") >= 64, SETTLE,
                   "the flood's first lookups", lambda: f"  its queries so far: {dns.count('fast', since=start)}",
                   poll=0.05)
        victim_time = assert_answers_quickly(victim, "mine." + FAST_ZONE)
        result = flood_result(flooder, ATTACK_SECONDS + 60, connected=True)
        seconds = time.monotonic() - start
        victim.stop()
        attack.attacker_gone()
    lookups = dns.count("fast", since=start, name_contains="qf")
    peak = dns.busiest_second("fast", start, start + seconds, name_contains="qf")
    attack.notes.append(f"attacker: {describe_flood(result)}; DNS queries for its names: "
                        f"{lookups} ({lookups / seconds:.0f}/s, busiest second {peak}); victim's fresh Query "
                        f"{victim_time * 1000:.0f} ms")
    print(attack.summary())
    assert result["errors"].get(LIMITS_EXCEEDED, 0) > 0, f"the flood was not limited: {describe_flood(result)}"
    allowed = 2 * (64 + 16 * (seconds + 1))
    assert lookups <= allowed, f"{lookups} DNS queries from one user's flood in {seconds:.1f} s (at most {allowed:.0f})"
    all_answered(result, "a client flooding Query")
    attack.check()


# -- 6. visibility -----------------------------------------------------------------------------------------------


def child_nodes(xml: str) -> list:
    import xml.etree.ElementTree as ElementTree  # pylint: disable=import-outside-toplevel
    return sorted(node.get("name") for node in ElementTree.fromstring(xml).findall("node"))


def test_a_user_sees_only_the_targets_it_holds(tenant_lab):
    lab = tenant_lab
    lab.start_daemon()
    a = Tenant(lab, VICTIM, "user-a")
    b = Tenant(lab, NOBODY, "user-b")
    shared_root = [ROOT_PATH, ROOT_PATH + "/path"]
    host = a.manager("WatchHost", "s", ("private." + FAST_ZONE,))[0]
    address = a.manager("WatchAddress", "s", ("192.0.2.77",))[0]
    a_paths = a.manager("WatchPath")[0]
    for path in (host, address):
        a.wait_signal(ROOT_PATH, "InterfacesAdded", args0=path)
    wait_answered(a, host)
    mine = b.manager("WatchAddress", "s", ("192.0.2.78",))[0]

    # What B sees (every leak is listed before the test fails).
    leaks = []
    seen = set(b.managed_objects()) - {shared_root[1]}
    if seen != {mine}:
        leaks.append(f"B's GetManagedObjects lists {sorted(seen)}")
    for kind, path in (("host", host), ("address", address)):
        nodes = child_nodes(b.introspect(f"{ROOT_PATH}/{kind}"))
        if path.rsplit("/", 1)[1] in nodes:
            leaks.append(f"B's Introspect of .../{kind} lists A's {path}: {nodes}")
    for interface, member, signature, args in (
            (PROPERTIES_IFACE, "Get", "ss", (TARGET_IFACE, "Status")),
            (PROPERTIES_IFACE, "GetAll", "s", (TARGET_IFACE,)),
            (TARGET_IFACE, "Refresh", "", ())):
        for path in (host, address):
            try:
                answer = b.call(path, interface, member, signature, args)
                leaks.append(f"B's {interface}.{member} on A's {path} answered {str(answer)[:300]}")
            except DBusCallError as error:
                if error.name != UNKNOWN_OBJECT:
                    leaks.append(f"B's {interface}.{member} on A's {path}: {error.name} (not {UNKNOWN_OBJECT})")
    # Introspect and Peer answer on any path, as D-Bus services do (an empty node): on A's
    # paths B gets exactly what a path that never had an object gives.
    for kind, path in (("host", host), ("address", address)):
        never = f"{ROOT_PATH}/{kind}/never_2eexisted"
        for interface, member in (("org.freedesktop.DBus.Introspectable", "Introspect"), (PEER_IFACE, "Ping")):
            def answer(p):
                try:
                    return b.call(p, interface, member)
                except DBusCallError as error:
                    return error.name
            if answer(path) != answer(never):
                leaks.append(f"B's {member} of A's {path} differs from that of a path with no object: "
                             f"{str(answer(path))[:300]} / {str(answer(never))[:300]}")
    assert not leaks, "user B sees user A's targets:\n  " + "\n  ".join(leaks)
    # What everybody sees: the root (the internet target), the path object; root sees all.
    assert a_paths == shared_root[1]
    for path in shared_root:
        assert b.call_error(path, PEER_IFACE, "Ping") is None
    assert b.call_error(ROOT_PATH, PROPERTIES_IFACE, "Get", "ss", (TARGET_IFACE, "Status")) is None
    everything = set(lab.client.call(harness.SERVICE, ROOT_PATH, harness.OBJECT_MANAGER_IFACE,
                                     "GetManagedObjects")[0])
    assert {host, address, mine} <= everything, f"root sees {sorted(everything)}"
    assert set(a.managed_objects()) >= {host, address} and mine not in a.managed_objects()

    # A change of A's targets: A is told, B hears nothing of them.
    lab.namespaces.ip(lab.netns, "addr", "del", f"{tenants.UPLINK_V4}/24", "dev", tenants.UPLINK)
    try:
        a.wait_signal(address, "StatusChanged")
        a.wait_signal(host, "StatusChanged")
    finally:
        lab.namespaces.ip(lab.netns, "addr", "add", f"{tenants.UPLINK_V4}/24", "dev", tenants.UPLINK)
        lab.namespaces.ip(lab.netns, "route", "replace", "default", "via", tenants.GATEWAY_V4)
    b.wait_signal(mine, "StatusChanged")  # B's own target changed too: B is listening
    b.barrier()
    leaked = [s for s in b.signals() if s["path"] in (host, address)
              or any(isinstance(x, str) and x in (host, address) for x in s["args"])]
    assert not leaked, f"B received signals of A's targets: {leaked[:5]}"
    seen_by_a = {(s["path"], s["member"]) for s in a.signals()}
    assert (host, "PropertiesChanged") in seen_by_a and (address, "StatusChanged") in seen_by_a, seen_by_a

    # Release: InterfacesRemoved to the holder; the object is gone for everyone.
    a.manager("Release", "o", (address,))
    a.wait_signal(ROOT_PATH, "InterfacesRemoved", args0=address)
    assert not any(s["member"] == "InterfacesRemoved" and s["args"][0] == address for s in b.signals())
    assert address not in lab.client.call(harness.SERVICE, ROOT_PATH, harness.OBJECT_MANAGER_IFACE,
                                          "GetManagedObjects")[0]
    # A user that starts holding a target another user holds is told (InterfacesAdded to it).
    b.manager("WatchHost", "s", ("private." + FAST_ZONE,))
    b.wait_signal(ROOT_PATH, "InterfacesAdded", args0=host)
    assert host in b.managed_objects()
    for tenant in (a, b):
        tenant.stop()
