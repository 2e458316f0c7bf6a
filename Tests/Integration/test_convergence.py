"""Every client holds the current truth (docs/design.md, "Nothing lost"; docs/hardening.md, "Signals: nothing lost").

Honest clients -- GDBus, which answers read receipts from its worker thread, and
dbus-python on a GLib main loop, which answers them when it dispatches -- hold
together more than a user's unread share (1 MiB) can carry in one evaluation:
one GDBus connection with raised limits and a few thousand address targets,
and a user at its default maximum (8 connections x 256 targets). Every carrier
change of the uplink changes every target. After each -- a carrier loss, a
restore, ten quick flaps, and flaps while one client is stopped (SIGSTOP) for
3 s -- every target's last announced ``Flags`` must equal its current
``Flags``, for every client: the daemon keeps which targets changed for a
connection that falls behind and sends their current state once it reads
again. The lab is the hostile-tenant lab (tenants.py): kernel backend, the
shipped policy on a system-policy bus.
"""
import json
import os
import signal
import subprocess
import threading
import time

import harness
import tenants
from harness import OBJECT_MANAGER_IFACE, ROOT_PATH, SERVICE, TARGET_IFACE, WaitTimeout
from tenants import NOBODY, OTHER, VICTIM

LIBRARY_TARGETS = 250  # one library connection's targets: ~170 KB of signals per carrier change
MANY = 3000            # one connection's targets (raised limits): ~1.4 MB of signals per carrier change
CONNECTIONS, PER_CONNECTION = 8, 256   # a user at its default maximum
CONVERGE = 60.0        # bounds each wait for the clients to hold the truth (never paces the test)


def addresses(first: int, count: int) -> list:
    """On-link IPv6 addresses of the uplink's prefix: each one changes with its carrier."""
    return [f"2001:db8:1::{first + i:x}" for i in range(count)]


def truth(lab) -> dict:
    """Every target's current Flags, as root reads them."""
    objects = lab.client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects", timeout=60)[0]
    return {path: interfaces[TARGET_IFACE]["Flags"] for path, interfaces in objects.items()
            if TARGET_IFACE in interfaces}


def stale(follower, held: int, current: dict) -> list:
    """The follower's targets whose last announced Flags differ from the current ones (or that
    it does not know of): ``[(key, told, now)]``."""
    follower.send({"op": "view"})
    view = follower.read("its view of the targets", 30)["ok"]
    wrong = [(key, told, current.get(key.split(":", 1)[1])) for key, told in view.items()
             if told != current.get(key.split(":", 1)[1])]
    if len(view) != held:
        wrong.append(("(count)", len(view), held))
    return wrong


def converge(lab, followers: list, what: str) -> None:
    """Wait (bounded) until every follower holds every target's current Flags."""
    deadline = time.monotonic() + CONVERGE
    while True:
        current = truth(lab)
        problems = {f.name: stale(f, held, current) for f, held in followers}
        problems = {name: wrong for name, wrong in problems.items() if wrong}
        if not problems:
            return
        if time.monotonic() > deadline:
            raise WaitTimeout(f"after {what}, clients still show old states after {CONVERGE:.0f} s: "
                              + "; ".join(f"{name}: {len(wrong)} stale, e.g. {wrong[:3]}"
                                          for name, wrong in problems.items()))
        time.sleep(0.2)  # nothing announces "converged" to the test: re-read, bounded


def carrier(lab, state: str, status: int, internet) -> None:
    """The uplink's far end goes ``state``; waits for the internet target's answer."""
    mark = internet.mark()
    lab.namespaces.ip(lab.netns, "link", "set", tenants.UPLINK + "p", state)
    internet.wait_status(status, 0 if status == 0 else harness.REACHABLE, f"the internet target {state}", mark=mark)


def test_honest_clients_hold_the_current_state(tenant_lab):
    lab = tenant_lab
    lab.start_daemon("--max-targets-per-client", str(MANY), "--max-targets-per-user", str(MANY),
                     "--max-targets", str(MANY + CONNECTIONS * PER_CONNECTION + 64))
    many = lab.child(NOBODY, "follower", "gdbus-many", library="gdbus", addresses=[addresses(0x1000, MANY)])
    spread = [addresses(0x8000 + c * PER_CONNECTION, PER_CONNECTION) for c in range(CONNECTIONS)]
    full = lab.child(VICTIM, "follower", "dbus-python-8x256", library="dbus-python", addresses=spread)
    shared = lab.child(OTHER, "follower", "gdbus-shared", library="gdbus", addresses=[addresses(0x1000, 256)])
    followers = [(many, MANY), (full, CONNECTIONS * PER_CONNECTION), (shared, 256)]
    for follower, held in followers:
        ready = follower.read("all its targets watched", 120)
        assert not ready["errors"], f"{follower.name}: {ready}"
    converge(lab, followers, "watching")
    internet = lab.recorder(ROOT_PATH)
    internet.sync()
    try:
        carrier(lab, "down", 0, internet)
        converge(lab, followers, "a carrier loss")
        carrier(lab, "up", 2, internet)
        converge(lab, followers, "the carrier's return")
        for _ in range(10):
            lab.namespaces.ip(lab.netns, "link", "set", tenants.UPLINK + "p", "down")
            lab.namespaces.ip(lab.netns, "link", "set", tenants.UPLINK + "p", "up")
        carrier(lab, "down", 0, internet)
        carrier(lab, "up", 2, internet)
        converge(lab, followers, "ten quick flaps")
        # One client stopped for 3 s while the link flaps every 0.5 s: woken, it catches up.
        os.kill(full.pid, signal.SIGSTOP)
        try:
            for state, status in (("down", 0), ("up", 2)) * 3:
                carrier(lab, state, status, internet)
                time.sleep(0.5)  # the flap's period, not a synchronisation
        finally:
            os.kill(full.pid, signal.SIGCONT)
        carrier(lab, "down", 0, internet)
        converge(lab, followers, "flaps while a client was stopped for 3 s")
    finally:
        internet.close()


class LibraryWatcher:
    """``reachctl --daemon watch --json`` over address targets, as ``nobody``: the library's daemon
    client, one connection for every target. ``told`` keeps the last Flags it printed per target
    (it prints a line for each change of a target's flags or status)."""

    def __init__(self, lab, targets):
        self.log = lab.directory / "reachctl-watch.log"
        env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8", "DBUS_SYSTEM_BUS_ADDRESS": lab.bus.address}
        argv = [harness.need_tool("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
                str(harness.daemon_binary().parent / "reachctl"), "--daemon", "watch", "--json", *targets]
        with open(self.log, "ab") as log:
            self.popen = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, env=env, start_new_session=True)
        self.told = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.popen.stdout:
            record = json.loads(line)
            with self.lock:
                self.told[record["target"]] = record["flags"]

    def view(self):
        with self.lock:
            return dict(self.told)

    def stop(self):
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait()


def test_the_library_holds_the_current_state(tenant_lab):
    """The library's daemon client is driven by what the daemon sends it (no call after the first
    answer): woken after 3 s stopped (SIGSTOP) while the link flapped, it has been sent each
    target's current state once it read again, and shows it -- its last line per target is the
    target's current Flags."""
    lab = tenant_lab
    lab.start_daemon()
    held = addresses(0x2000, LIBRARY_TARGETS)
    paths = {address: f"{ROOT_PATH}/address/" + "".join(
        c if c.isascii() and c.isalpha() or (c.isdigit() and i > 0) else "_%02x" % ord(c)
        for i, c in enumerate(address)) for address in held}
    watcher = LibraryWatcher(lab, held)

    def converged(what):
        deadline = time.monotonic() + CONVERGE
        while True:
            current = truth(lab)
            view = watcher.view()
            # A target it has not shown yet, or that the daemon does not hold, counts as wrong.
            wrong = [(a, view.get(a), current.get(paths[a])) for a in held
                     if view.get(a) is None or view.get(a) != current.get(paths[a])]
            if not wrong:
                return
            if time.monotonic() > deadline or watcher.popen.poll() is not None:
                raise WaitTimeout(f"after {what}, reachctl shows {len(wrong)} old states, e.g. {wrong[:3]}\n"
                                  f"{harness.tail(watcher.log, 20)}")
            time.sleep(0.2)  # nothing announces "converged" to the test: re-read, bounded

    internet = lab.recorder(ROOT_PATH)
    internet.sync()
    try:
        converged("watching")
        carrier(lab, "down", 0, internet)
        converged("a carrier loss")
        carrier(lab, "up", 2, internet)
        converged("the carrier's return")
        os.kill(watcher.popen.pid, signal.SIGSTOP)
        try:
            for state, status in (("down", 0), ("up", 2)) * 3:
                carrier(lab, state, status, internet)
                time.sleep(0.5)  # the flap's period, not a synchronisation
        finally:
            os.kill(watcher.popen.pid, signal.SIGCONT)
        carrier(lab, "down", 0, internet)
        converged("flaps while the client was stopped for 3 s")
    finally:
        internet.close()
        watcher.stop()
