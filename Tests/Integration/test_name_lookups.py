"""Host names looked up again without anybody asking, with the kernel backend (nothing
NetworkManager says), in the lab of ``tenants.py``: its DNS server is the test's own, so
the test decides when a name fails and when it answers.

* A lookup that fails for now (the server answers SERVFAIL; GLib says
  ``G_RESOLVER_ERROR_TEMPORARY_FAILURE``, "Temporary failure in name resolution") is
  looked up again on its own, after a short wait that grows; the held host becomes
  reachable once the server answers, with no call from its holder.
* A name that does not exist (NXDOMAIN) is an answer: it is not asked again. A released
  host is not asked again either, and once nothing is owed the daemon does not wake.
* The resolver's file changes (the daemon's ``/etc/resolv.conf`` is bind-mounted from the
  lab's): a fact that changed, so the held names are looked up again.
"""

from pathlib import Path

import harness
from harness import IS_DIRECT, MANAGER_IFACE, REACHABLE, ROOT_PATH, SERVICE
from tenants import FAST_ZONE
from test_targets import path_of

FLAKY = "flaky." + FAST_ZONE  # SERVFAIL until the test lets it answer
GONE = "gone." + FAST_ZONE  # SERVFAIL, released while its retries are owed
MISSING = "missing.test"  # NXDOMAIN
# A retry owed after a first failure comes 0.5 s later, the next 1 s after that
# (`LookupRetries.delays`): both would show within this window.
OBSERVED_S = 3.0


def watch(lab, name):
    """WatchHost(name) by the lab's client (which then hears the target's signals); its recorder."""
    path = path_of("host", name)
    recorder = lab.recorder(path)
    assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", (name,))[0] == path
    return recorder


def loop_state(pid):
    """The state of a process's main thread (its loop's): "S" while it sleeps in poll()."""
    return Path(f"/proc/{pid}/task/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def queries(lab, name):
    return lab.dns.count(name_contains=name)


def test_a_lookup_that_fails_for_now_is_retried_until_the_host_is_reachable(tenant_lab):
    lab = tenant_lab
    lab.dns.failing = frozenset({FLAKY, GONE})
    daemon = lab.start_daemon()

    flaky = watch(lab, FLAKY)
    flaky.wait_props({"Status": 0}, f"{FLAKY}: its first lookup fails for now")
    assert "Temporary failure" in flaky.props["Error"], flaky.describe()

    # The server answers: reachable, told to the holder, with no call from it.
    lab.dns.failing = frozenset({GONE})
    flaky.wait_status(2, REACHABLE | IS_DIRECT, f"{FLAKY} reachable once its name resolves")
    flaky.barrier()
    assert flaky.status_changes() == [(0, 0), (2, REACHABLE | IS_DIRECT)], flaky.describe()
    assert flaky.props["Error"] == "" and flaky.props["Addresses"]

    # A name that does not exist is an answer; a released host is owed nothing.
    missing = watch(lab, MISSING)
    missing.wait_props({"Status": 0}, f"{MISSING}: not found")
    assert "Temporary failure" not in missing.props["Error"], missing.describe()
    gone = watch(lab, GONE)
    gone.wait_props({"Status": 0}, f"{GONE}: its first lookup fails for now")
    lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (path_of("host", GONE),))
    before = {name: queries(lab, name) for name in (FLAKY, MISSING, GONE)}
    # The window opens once the loop sleeps: what it still did after its reply is no wake-up.
    harness.wait_until(lambda: loop_state(daemon.pid) == "S", harness.CHANGE_TIMEOUT, "the daemon's loop asleep",
                       poll=0.01)
    # Watching the loop's wake-ups takes the time the window needs. (Only the loop's thread, the
    # main one: GLib's resolver threads each wake once, half a second after their last lookup, to
    # go to its pool of unused threads.)
    woken = harness.idle_wakeups(daemon.pid, OBSERVED_S).get(str(daemon.pid), 0)
    after = {name: queries(lab, name) for name in (FLAKY, MISSING, GONE)}
    assert after == before, f"names asked again though nothing was owed: {before} -> {after}"
    assert woken == 0, f"the daemon's loop woke {woken} times with no retry owed"


def test_a_changed_resolver_file_has_held_names_looked_up_again(tenant_lab):
    """A single-label name is not found while the resolver's file has no search domain (an
    answer: never asked again on its own); the file gains ``search fast.test``, and nothing
    else happens: the name is looked up again, found as ``svc.fast.test``, and reachable."""
    lab = tenant_lab
    lab.start_daemon()
    short = watch(lab, "svc")
    short.wait_props({"Status": 0}, "svc: not found without a search domain")
    assert "Temporary failure" not in short.props["Error"], short.describe()
    # Written in place: the daemon's file is a bind mount of this one.
    lab.resolver.write_text("# written by the test: the lab's DNS server\nnameserver 127.0.0.1\nsearch fast.test\n")
    short.wait_status(2, REACHABLE | IS_DIRECT, "svc found in the search domain the file now names")
    assert lab.dns.count(name_contains="svc.fast.test") > 0
