"""GLib's GNetworkMonitor answered by reachabilityd's GIO module (``gio/``).

The tests build the module themselves, once per run (``make -C gio`` into a
temporary directory): the module and the C test program under
AddressSanitizer (leak checking on), and the module without it for the
Python program. GLib loads it from there with ``GIO_EXTRA_MODULES`` (the
installed case, with no variable at all, is test_systemd.py's). The two
programs, ``gio/tests/monitor-test.c`` and ``gio/tests/monitor-test.py``,
know nothing of reachabilityd: ``g_network_monitor_get_default()`` and the
GIO API only. They print the default monitor's type and values, every
``network-changed``, and ``can_reach`` answers for the targets on their
standard input; such an answer goes through the daemon (``Manager.Query``),
so it comes after every signal the daemon sent before it: the barrier a
count of notifications waits for, with no sleep.

* The kernel lab (test_kernel_backend.py's namespaces, ``--backend kernel``)
  and the real NetworkManager lab: the module is chosen, follows carrier
  losses and returns with at most two ``network-changed`` per edge, and
  ``can_reach`` is right for a routed address and for one behind an
  ``unreachable`` route (``G_IO_ERROR_HOST_UNREACHABLE``; while the network
  is down, ``G_IO_ERROR_NETWORK_UNREACHABLE``).
* NetworkManager's captive portal: still available (a route), connectivity
  PORTAL, one ``network-changed`` each way.
* A restarted daemon: while it is away the program hears GLib's next monitor
  (told only where that differs from what it held), the new instance's
  answer is read, and told only when it differs.
* Nobody keeps the service's last word (issue 47; design.md, "GLib's network
  monitor"): stopped, the module hands over to GLib's next monitor (here
  GLib's netlink one, beside a GLib program that runs it for reference, in
  the daemon's namespace) and follows it within the call bound (2 s) of a
  change, can_reach included; started again, the daemon is followed again.
  Hung (SIGSTOP), the same within the bound of the next change, and
  can_reach, sync and async, answers within the bound; the daemon's answer
  is back once it runs again, with nothing changed meanwhile.
* GLib's rules: a route NetworkManager does not manage (its connectivity
  "none") is available with FULL connectivity, never LOCAL.
* No service (not on the bus, not activatable), a start that fails, a start
  that hangs: GLib's own monitor within the module's bound (2 s, plus the
  program's own start); an activatable service is started by the module.
* A program in another network namespace than the daemon's (a container
  given the host's bus socket): GLib's own monitor, for the program's own
  namespace. Every other program here runs in the daemon's namespace.

The module's own debug lines (``G_MESSAGES_DEBUG=reachabilityd``: "... answers
until it is back", "... answers again") come on the program's standard
output; a test that must know the module took over again before its next
step waits for them, as it waits for a signal.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable, Optional

import pytest
from gi.repository import Gio

import conftest
import harness
import test_kernel_backend as kernel
import test_uid_rules as uid_rules
from conftest import need

GIO_DIR = harness.REPO / "gio"
OURS = "ReachabilitydNetworkMonitor"
GLIB_NETLINK = "GNetworkMonitorNetlink"
FULL, LOCAL = int(Gio.NetworkConnectivity.FULL), int(Gio.NetworkConnectivity.LOCAL)
PORTAL = int(Gio.NetworkConnectivity.PORTAL)
HOST_NOT_FOUND = int(Gio.IOErrorEnum.HOST_NOT_FOUND)
NETWORK_UNREACHABLE = int(Gio.IOErrorEnum.NETWORK_UNREACHABLE)
HOST_UNREACHABLE = int(Gio.IOErrorEnum.HOST_UNREACHABLE)
INIT_BOUND = 2.0  # REACH_INIT_TIMEOUT_MS in gio/monitor.h
# What a program's start-up may add to it (an AddressSanitizer build on a loaded machine).
START_SLACK = 3.0
CALL_BOUND = 2.0  # REACH_CALL_TIMEOUT_MS in gio/monitor.h
# What a running program's own turn may add to it (GLib's monitor, a loaded machine).
TURN_SLACK = 1.0
IDLE_WINDOW = 3.0  # seconds a program is watched for wake-ups
ROUTED, UNROUTED = "203.0.113.9", "198.51.100.7"
MAX_PER_EDGE = 2


# --- the build ------------------------------------------------------------------


@pytest.fixture(scope="session")
def gio_build(tmp_path_factory) -> Path:
    """``make -C gio`` twice: ``asan/`` (module and C program, -fsanitize=address) and ``plain/``."""
    need([name for name in ("make", "cc", "pkg-config") if harness.tool(name) is None])
    if subprocess.run(["pkg-config", "--exists", "gio-2.0"], check=False).returncode != 0:
        need(["gio-2.0's headers (libglib2.0-dev)"])
    root = tmp_path_factory.mktemp("gio")
    for name, extra in (("asan", ["SANITIZE=address"]), ("plain", [])):
        harness.run(["make", "-C", GIO_DIR, f"BUILDDIR={root / name}", *extra], timeout=300)
    return root


# --- a GLib program ---------------------------------------------------------------


class Program:
    """monitor-test (C, AddressSanitizer) or monitor-test.py, with ``--follow``; its lines read by a thread."""

    def __init__(self, build: Path, bus_address: str, *, python: bool = False, targets: tuple = (),
                 env: Optional[dict] = None, follow: bool = True, inside: Optional[list] = None):
        if python:
            argv = ["/usr/bin/python3", str(GIO_DIR / "tests" / "monitor-test.py")]
            modules = build / "plain"
        else:
            argv = [str(build / "asan" / "monitor-test")]
            modules = build / "asan"
        environment = dict(os.environ)
        environment.pop("DBUS_SESSION_BUS_ADDRESS", None)
        environment.pop("GIO_USE_NETWORK_MONITOR", None)
        environment.update(DBUS_SYSTEM_BUS_ADDRESS=bus_address, GIO_EXTRA_MODULES=str(modules),
                           ASAN_OPTIONS="detect_leaks=1:exitcode=23", G_MESSAGES_DEBUG="GLib-GIO reachabilityd")
        environment.update(env or {})
        if inside:
            # ip netns exec and nsenter -n exec the program: the PID stays the program's.
            argv = inside + argv
        self.name = "monitor-test.py" if python else "monitor-test"
        if environment.get("GIO_USE_NETWORK_MONITOR") not in (None, "reachabilityd"):
            self.name += f" ({environment['GIO_USE_NETWORK_MONITOR']})"
        self.lines: list = []
        self.stderr = ""
        self.changed = threading.Condition()
        self.started = time.monotonic()
        self.process = subprocess.Popen(argv + (["--follow"] if follow else []) + list(targets),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, env=environment, start_new_session=True)
        self.threads = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=self._read_stderr, daemon=True)]
        for thread in self.threads:
            thread.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            with self.changed:
                self.lines.append((time.monotonic(), line.rstrip("\n")))
                self.changed.notify_all()
        with self.changed:
            self.lines.append((time.monotonic(), None))
            self.changed.notify_all()

    def _read_stderr(self) -> None:
        for line in self.process.stderr:
            self.stderr += line

    def output(self) -> str:
        """Everything it printed (GLib writes its debug messages on standard output)."""
        with self.changed:
            return "\n".join(line for _, line in self.lines if line is not None) + "\n" + self.stderr

    def describe(self) -> str:
        shown = "\n".join(f"  {line}" for _, line in self.lines)
        return f"{self.name} printed:\n{shown}\n{self.name}'s standard error (tail):\n{self.stderr[-4000:]}"

    def wait(self, match: Callable[[str], bool], what: str, start: int = 0,
             timeout: float = harness.CHANGE_TIMEOUT) -> tuple:
        """The first line from index ``start`` on that ``match``es, as (index, time, line)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while True:
                for index in range(start, len(self.lines)):
                    stamp, line = self.lines[index]
                    if line is None:
                        raise AssertionError(f"{self.name} ended (status {self.process.poll()}) before {what}\n"
                                             + self.describe())
                    if match(line):
                        return index, stamp, line
                left = deadline - time.monotonic()
                if left <= 0:
                    raise harness.WaitTimeout(f"{what}: not seen within {timeout:.0f} s\n" + self.describe())
                self.changed.wait(left)

    def ready(self) -> list:
        """The ``ready`` line's words: type, available, metered, connectivity."""
        _, _, line = self.wait(lambda line: line.startswith("ready "), "the ready line")
        return line.split()[1:]

    def send(self, *lines: str) -> float:
        """Lines to its standard input, in one write; returns when they were written."""
        self.process.stdin.write("".join(line + "\n" for line in lines))
        self.process.stdin.flush()
        return time.monotonic()

    def ask(self, target: str, how: str = "async") -> str:
        """can_reach_async(target) (or can_reach, ``how="sync"``): "ok" or "error CODE MESSAGE",
        and a barrier while the daemon answers (see the top)."""
        start = self.mark()
        self.send(target if how == "async" else f"sync {target}")
        prefix = f"reach {how} {target} "
        _, _, line = self.wait(lambda line: line.startswith(prefix), f"the {how} answer for {target}", start)
        return line[len(prefix):]

    def current(self) -> tuple:
        """What its monitor says now: (available, metered, connectivity) of the last ``changed``
        line, or of the ``ready`` line before any."""
        with self.changed:
            lines = [line for _, line in self.lines if line is not None]
        for line in reversed(lines):
            if line.startswith("changed "):
                return tuple(int(word) for word in line.split()[2:5])
            if line.startswith("ready "):
                return tuple(int(word) for word in line.split()[2:5])
        raise AssertionError(f"{self.name} has said nothing yet\n" + self.describe())

    def module_said(self, words: str, what: str, start: int = 0,
                    timeout: float = harness.CHANGE_TIMEOUT) -> tuple:
        """The module's debug line containing ``words`` (see the top)."""
        return self.wait(lambda line: "reachabilityd-DEBUG" in line and words in line, what, start, timeout)

    def mark(self) -> int:
        with self.changed:
            return len(self.lines)

    def changes(self, start: int = 0, end: Optional[int] = None) -> list:
        """``network-changed`` lines as (available, metered, connectivity); the signal's argument
        must be what the handler reads from the monitor (GLib's own backend does not hold to it)."""
        with self.changed:
            lines = self.lines[start:end]
        changes = []
        for _, line in lines:
            if line is not None and line.startswith("changed "):
                available, metered, connectivity, read = (int(word) for word in line.split()[2:6])
                assert available == read, (f"{self.name}: network-changed said available={available} while "
                                           f"the monitor's property said {read}: {line}\n" + self.describe())
                changes.append((available, metered, connectivity))
        return changes

    def close(self) -> None:
        """End of standard input; the program must end cleanly (no AddressSanitizer report)."""
        with contextlib.suppress(BrokenPipeError):
            self.process.stdin.close()
        try:
            status = self.process.wait(harness.STOP_TIMEOUT * 2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.name} did not end when its input did\n" + self.describe())
        for thread in self.threads:
            thread.join(harness.STOP_TIMEOUT)
        assert status == 0, f"{self.name} exited with {status}\n" + self.describe()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def thread_names(pid: int, counts: dict) -> dict:
    """``{"NAME (TID)": count}`` for ``{tid: count}`` of a process's threads."""
    names = {}
    for tid, count in counts.items():
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
        except OSError:
            name = "?"
        names[f"{name} ({tid})"] = count
    return names


def is_state(state: tuple) -> Callable[[str], bool]:
    """Matches a ``changed`` line that says ``state`` (available, metered, connectivity)."""
    words = [str(value) for value in state]
    return lambda line: line.startswith("changed ") and line.split()[2:5] == words


def assert_glib_rules(program: Program) -> None:
    """GLib's rules held in everything the program heard: connectivity LOCAL exactly when the
    network is not available, metered only while it is."""
    with program.changed:
        lines = [line for _, line in program.lines if line is not None]
    for line in lines:
        if line.startswith(("ready ", "changed ")):
            available, metered, connectivity = (int(word) for word in line.split()[2:5])
            assert (connectivity == LOCAL) == (not available) and (available or not metered), (
                f"{program.name} heard a state GLib's rules exclude: {line}\n" + program.describe())


@pytest.fixture
def programs():
    """Programs started by a test, killed by PID at its end if still running."""
    started: list = []
    yield started
    for program in started:
        program.kill()


def daemon_side(lab) -> list:
    """The argv prefix that runs a program in the network namespace the lab's daemon answers for
    (the module answers only there: elsewhere GLib's own monitor does)."""
    if getattr(lab, "ns_a", None) is not None:  # the kernel lab
        return harness.Namespaces.exec_argv(lab.ns_a)
    if getattr(lab, "anchor", None) is not None:  # NetworkManager's lab
        return [harness.need_tool("nsenter"), "-t", str(lab.anchor.pid), "-n", "--"]
    return []


def start(programs: list, build: Path, lab, inside: Optional[list] = None, **kwargs) -> Program:
    """A program on the lab's bus, in the daemon's network namespace unless ``inside`` says where."""
    program = Program(build, lab.bus.address, inside=daemon_side(lab) if inside is None else inside, **kwargs)
    programs.append(program)
    return program


def follow_edges(program: Program, set_carrier: Callable[[bool], None], flaps: int,
                 up_connectivity: int = FULL) -> None:
    """Carrier losses and returns: each edge shows within the wait, with at most MAX_PER_EDGE
    network-changed (counted from the edge to the barrier after its last), and can_reach follows."""
    for flap in range(flaps):
        for up in (False, True):
            mark = program.mark()
            set_carrier(up)
            if up:
                back = ["1", "0", str(up_connectivity)]
                program.wait(lambda line, back=back: line.startswith("changed ") and line.split()[2:5] == back,
                             f"flap {flap}: network-changed with the network back", mark)
                assert program.ask(ROUTED) == "ok", program.describe()
            else:
                program.wait(lambda line: line.startswith("changed ") and line.split()[2] == "0",
                             f"flap {flap}: network-changed with no network", mark)
                assert program.ask(ROUTED).startswith(f"error {NETWORK_UNREACHABLE} "), program.describe()
            changes = program.changes(mark)
            assert 1 <= len(changes) <= MAX_PER_EDGE, (
                f"flap {flap}, carrier {'back' if up else 'lost'}: {len(changes)} network-changed {changes}\n"
                + program.describe())


# --- the kernel lab -------------------------------------------------------------------


@pytest.fixture
def kernel_lab(request):
    """test_kernel_backend.py's two namespaces and private bus, kveth0 with carrier; no daemon yet."""
    kernel.require_kernel_lab()
    return conftest._lab(request, kernel.KernelLab())  # pylint: disable=protected-access


@pytest.fixture
def kernel_daemon(kernel_lab):  # pylint: disable=redefined-outer-name
    """The kernel lab with an ``unreachable`` route for UNROUTED's prefix and the daemon (kernel backend)."""
    kernel_lab.ip_a("route", "add", "unreachable", "198.51.100.0/24")
    kernel_lab.daemon(args=kernel.daemon_args("--backend", "kernel"))
    return kernel_lab


def set_kernel_carrier(lab) -> Callable[[bool], None]:
    return lambda up: lab.set_peer(kernel.UPLINK_PEER, up)


def test_c_program_gets_the_module_and_follows_the_kernel(kernel_daemon, gio_build, programs):
    """The C program (AddressSanitizer): our monitor, the network available with full
    connectivity (the kernel backend checks nothing: GLib's meaning of a route), can_reach right
    both ways, sync and async, and three carrier flaps followed."""
    lab = kernel_daemon
    program = start(programs, gio_build, lab, targets=(ROUTED, UNROUTED))
    assert program.ready() == [OURS, "1", "0", str(FULL)], program.describe()
    for how in ("sync", "async"):
        program.wait(lambda line, how=how: line == f"reach {how} {ROUTED} ok", f"{how} can_reach({ROUTED}) ok")
        program.wait(lambda line, how=how: line.startswith(f"reach {how} {UNROUTED} error {HOST_UNREACHABLE} "),
                     f"{how} can_reach({UNROUTED}) G_IO_ERROR_HOST_UNREACHABLE")
    assert program.changes() == [], program.describe()
    follow_edges(program, set_kernel_carrier(lab), flaps=3)
    program.close()


def test_python_program_and_the_explicit_choice(kernel_daemon, gio_build, programs):
    """Python with gi, GIO_USE_NETWORK_MONITOR=reachabilityd: the same, one flap; a name that
    does not resolve is G_IO_ERROR_HOST_NOT_FOUND."""
    lab = kernel_daemon
    program = start(programs, gio_build, lab, python=True,
                    env={"GIO_USE_NETWORK_MONITOR": "reachabilityd"})
    assert program.ready() == [OURS, "1", "0", str(FULL)], program.describe()
    assert program.ask(ROUTED) == "ok", program.describe()
    assert program.ask(UNROUTED).startswith(f"error {HOST_UNREACHABLE} "), program.describe()
    assert program.ask("nowhere.invalid").startswith(f"error {HOST_NOT_FOUND} "), program.describe()
    follow_edges(program, set_kernel_carrier(lab), flaps=1)
    program.close()


def test_a_restarted_daemon_is_read_again_and_told_only_on_a_change(kernel_daemon, gio_build, programs):
    """The program in the daemon's namespace, so that GLib's next monitor (netlink) sees the lab's
    route. The daemon stopped and started again with nothing changed: GLib's monitor says what the
    daemon said, so nothing is told, before or after. Stopped, and the carrier lost while it is away
    (GLib's netlink monitor does not see a carrier): nothing is told until the next instance's answer
    arrives, as one network-changed."""
    lab = kernel_daemon
    program = start(programs, gio_build, lab)
    assert program.ready() == [OURS, "1", "0", str(FULL)], program.describe()

    mark = program.mark()
    lab.daemons[-1].stop()
    lab.client.wait_for_name_gone(harness.SERVICE)
    program.module_said("answers until it is back", "the module handing over", mark)
    lab.daemon(args=kernel.daemon_args("--backend", "kernel"))
    program.module_said("answers again", "the module taking over again", mark)
    assert program.ask(UNROUTED).startswith(f"error {HOST_UNREACHABLE} {UNROUTED} is not reachable"), (
        program.describe())
    assert program.changes(mark) == [], program.describe()

    mark = program.mark()
    lab.daemons[-1].stop()
    lab.client.wait_for_name_gone(harness.SERVICE)
    program.module_said("answers until it is back", "the module handing over", mark)
    lab.set_peer(kernel.UPLINK_PEER, False)
    lab.wait_operstate(kernel.UPLINK, "DOWN")
    lab.daemon(args=kernel.daemon_args("--backend", "kernel"))
    program.wait(is_state((0, 0, LOCAL)), "the new instance's answer (no network)", mark)
    assert program.ask(ROUTED).startswith(f"error {NETWORK_UNREACHABLE} "), program.describe()
    assert program.changes(mark) == [(0, 0, LOCAL)], program.describe()
    program.close()


# --- the service away: GLib's next monitor ------------------------------------------------


def beside_glib(lab, gio_build, programs, python: bool = True) -> tuple:
    """A program with the module chosen (Python, or the C one under AddressSanitizer), and the
    Python one on GLib's netlink monitor (the module's next one in the kernel lab: no
    NetworkManager), both in the daemon's namespace and following; both say the network is there
    with full connectivity."""
    ours = start(programs, gio_build, lab, python=python,
                 env={"GIO_USE_NETWORK_MONITOR": "reachabilityd"})
    glib = start(programs, gio_build, lab, python=True,
                 env={"GIO_USE_NETWORK_MONITOR": "netlink"})
    assert ours.ready() == [OURS, "1", "0", str(FULL)], ours.describe()
    assert glib.ready() == [GLIB_NETLINK, "1", "0", str(FULL)], glib.describe()
    return ours, glib


def uplink_down(lab) -> float:
    """kveth0 taken down: the kernel drops its routes, which GLib's netlink monitor sees (it does
    not see a carrier). Returns when the command had returned: the kernel had told every listener."""
    lab.ip_a("link", "set", kernel.UPLINK, "down")
    return time.monotonic()


def uplink_up(lab) -> None:
    lab.ip_a("link", "set", kernel.UPLINK, "up")
    lab.wait_operstate(kernel.UPLINK, "UP")
    lab.ip_a("route", "replace", "default", "via", kernel.GATEWAY_V4, "dev", kernel.UPLINK,
             "metric", kernel.UPLINK_METRIC)


def heard_within(program: Program, state: tuple, what: str, since: float, mark: int, bound: float) -> float:
    """``state`` told (after line ``mark``) within ``bound`` of ``since``; returns how long after
    ``since`` it was (negative: before)."""
    try:
        _, stamp, _ = program.wait(is_state(state), what, mark, timeout=max(since + bound - time.monotonic(), 0.01))
    except harness.WaitTimeout as error:
        raise AssertionError(f"{what}: not told within {bound:.1f} s\n" + program.describe()) from error
    return stamp - since


def assert_followed_again(lab, ours: Program, glib: Program) -> None:
    """The daemon followed again: the route back (both say so), then a carrier loss that only the
    daemon sees (GLib's netlink monitor keeps its route) is heard, and can_reach is the daemon's."""
    mark = ours.mark()
    uplink_up(lab)
    ours.wait(is_state((1, 0, FULL)), "the network back", mark)
    mark, glib_mark = ours.mark(), glib.mark()
    lab.set_peer(kernel.UPLINK_PEER, False)
    lab.wait_operstate(kernel.UPLINK, "DOWN")
    ours.wait(is_state((0, 0, LOCAL)), "the daemon's carrier loss", mark)
    assert ours.ask(ROUTED).startswith(f"error {NETWORK_UNREACHABLE} {ROUTED} is not reachable"), ours.describe()
    assert glib.ask(ROUTED) == "ok" and glib.current()[0] == 1, (
        "GLib's netlink monitor saw the carrier loss: the test cannot tell whose answer the program had\n"
        + glib.describe())
    assert not any(change[0] == 0 for change in glib.changes(glib_mark)), glib.describe()


def test_a_stopped_daemon_hands_over_to_glibs_monitor_and_takes_over_again(kernel_daemon, gio_build, programs):
    """The daemon stopped (SIGTERM: its name leaves), then kveth0 down: the program tells GLib's own
    monitor's answer (no network, LOCAL) within the call bound (plus the program's turn) of GLib's
    monitor telling it in a program of its own, and can_reach, sync and async, answers as GLib's
    monitor does. The daemon started again: followed again."""
    lab = kernel_daemon
    ours, glib = beside_glib(lab, gio_build, programs)

    lab.daemons[-1].stop()
    lab.client.wait_for_name_gone(harness.SERVICE)
    told_within_the_bound(lab, ours, glib, "GLib's monitor's answer while the daemon is away")
    for target in (ROUTED, UNROUTED):
        for how in ("sync", "async"):
            assert ours.ask(target, how) == glib.ask(target, how), ours.describe() + "\n" + glib.describe()

    mark = ours.mark()
    lab.daemon(args=kernel.daemon_args("--backend", "kernel"))
    ours.module_said("answers again", "the module taking over again", mark)
    assert_followed_again(lab, ours, glib)
    assert_glib_rules(ours)
    ours.close()
    glib.close()


def told_within_the_bound(lab, ours, glib, what):
    """kveth0 down: GLib's monitor tells it in a program of its own, and ours tells the same
    answer within the call bound (plus the program's turn) of that."""
    mark, glib_mark = ours.mark(), glib.mark()
    changed = uplink_down(lab)
    _, glib_told, _ = glib.wait(is_state((0, 0, LOCAL)), "GLib's monitor: no network", glib_mark)
    took = heard_within(ours, (0, 0, LOCAL), what, glib_told, mark, CALL_BOUND + TURN_SLACK)
    print(f"GLib's monitor told the change after {glib_told - changed:.3f} s, the program {took:+.3f} s later")


@contextlib.contextmanager
def stopped(daemon):
    """The daemon hung (SIGSTOP: its name stays) for the block; SIGCONT after it, whatever happens."""
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(daemon.pid, signal.SIGCONT)


def test_a_hung_daemon_is_handed_over_at_the_next_change(kernel_daemon, gio_build, programs):
    """The daemon hung (SIGSTOP), then kveth0 down: GLib's monitor tells the change, the module asks
    the daemon, which does not answer; within the call bound (plus the program's turn) of GLib's
    monitor telling it in a program of its own, the program tells GLib's monitor's answer, and
    can_reach answers as GLib's monitor does. SIGCONT: the daemon speaks again (the change it had
    not told) and is followed again."""
    lab = kernel_daemon
    ours, glib = beside_glib(lab, gio_build, programs)

    with stopped(lab.daemons[-1]):
        told_within_the_bound(lab, ours, glib, "GLib's monitor's answer while the daemon hangs")
        for how in ("sync", "async"):
            assert ours.ask(UNROUTED, how) == glib.ask(UNROUTED, how), ours.describe() + "\n" + glib.describe()
        mark = ours.mark()
    ours.module_said("answers again", "the module taking over once the daemon runs again", mark)
    assert_followed_again(lab, ours, glib)
    assert_glib_rules(ours)
    ours.close()
    glib.close()


def test_can_reach_answers_within_the_bound_while_the_daemon_hangs(kernel_daemon, gio_build, programs):
    """The carrier lost: the daemon says no network, GLib's netlink monitor (which does not see a
    carrier) still has its route. The daemon hung (SIGSTOP), nothing else changing: can_reach_async
    and can_reach, asked together, both answer within the call bound (plus the program's turn),
    with GLib's monitor's answer; the module, having found the hang, tells GLib's monitor's answer
    within the same bound, and then sleeps (no wake-up for IDLE_WINDOW s). SIGCONT, with nothing
    changed: the daemon's answer is back (the late answer to the module's read). The C program:
    the questions the module gave up on leave nothing behind (AddressSanitizer's leak check at its
    end)."""
    lab = kernel_daemon
    ours, glib = beside_glib(lab, gio_build, programs, python=False)
    mark = ours.mark()
    lab.set_peer(kernel.UPLINK_PEER, False)
    lab.wait_operstate(kernel.UPLINK, "DOWN")
    ours.wait(is_state((0, 0, LOCAL)), "the daemon's carrier loss", mark)
    expected = glib.ask(ROUTED)
    assert expected == "ok" and glib.current()[0] == 1, glib.describe()

    with stopped(lab.daemons[-1]):
        mark = ours.mark()
        sent = ours.send(ROUTED, f"sync {ROUTED}")
        for how in ("async", "sync"):
            prefix = f"reach {how} {ROUTED} "
            try:
                _, stamp, line = ours.wait(lambda line, prefix=prefix: line.startswith(prefix), f"can_reach {how}",
                                           mark, timeout=CALL_BOUND + TURN_SLACK)
            except harness.WaitTimeout as error:
                raise AssertionError(f"can_reach {how} did not return within {CALL_BOUND + TURN_SLACK:.1f} s "
                                     f"of the question\n" + ours.describe()) from error
            print(f"can_reach {how} answered after {stamp - sent:.3f} s")
            assert line[len(prefix):] == expected, ours.describe()
        # A call without a sign of life within the bound is a hang: the module hands over.
        took = heard_within(ours, (1, 0, FULL), "GLib's monitor's answer once the hang is found", sent, mark,
                            CALL_BOUND + TURN_SLACK)
        print(f"the hang found and GLib's monitor's answer told {took:.3f} s after the question")
        # Handed over, with its read left in flight for the daemon's late answer: no timer, no
        # wake-up (after a question answered by GLib's monitor, so that nothing is pending). The
        # module's sources run on the program's main thread; GDBus's own thread ("gdbus") is left
        # out: it may still be writing that read, which the main thread handed it just before.
        assert ours.ask(ROUTED) == expected, ours.describe()
        woken = thread_names(ours.process.pid, harness.idle_wakeups(ours.process.pid, IDLE_WINDOW))
        woken = {thread: count for thread, count in woken.items() if not thread.startswith("gdbus ")}
        assert woken == {}, f"woken while handed over and idle: {woken} (thread: wake-ups)\n" + ours.describe()
        mark = ours.mark()
    ours.wait(is_state((0, 0, LOCAL)), "the daemon's answer back once it runs again", mark)
    assert ours.ask(ROUTED).startswith(f"error {NETWORK_UNREACHABLE} {ROUTED} is not reachable"), ours.describe()
    assert ours.changes(mark) == [(0, 0, LOCAL)], ours.describe()
    assert_glib_rules(ours)
    ours.close()
    glib.close()


# --- the real NetworkManager -------------------------------------------------------------


def test_follows_networkmanager_carrier_flaps(nm_lab, gio_build, programs):
    """The daemon on NetworkManager: the C program's monitor is ours, with NetworkManager's full
    connectivity, and follows two carrier flaps (the network back with full connectivity again)
    with at most two network-changed per edge."""
    lab = nm_lab
    lab.daemon()
    program = start(programs, gio_build, lab)
    ready = program.ready()
    assert ready[:3] == [OURS, "1", "0"], program.describe()
    if ready[3] != str(FULL):
        program.wait(lambda line: line.startswith("changed ") and line.split()[2:5] == ["1", "0", str(FULL)],
                     "NetworkManager's full connectivity")
    follow_edges(program, lab.set_carrier, flaps=2)
    program.close()


# --- no service: GLib's own monitor -------------------------------------------------------


def readable_build(build: Path) -> Path:
    """The AddressSanitizer program and module copied where another user can run them (pytest's
    directories are root's own)."""
    copy = harness.short_tmpdir("reach-gio-")
    (copy / "asan").mkdir(mode=0o755)
    for name in ("monitor-test", "libgioreachabilityd.so"):
        shutil.copy2(build / "asan" / name, copy / "asan" / name)
    return copy


def test_a_program_whose_uid_the_rules_route_otherwise_hears_its_own_internet(kernel_daemon, gio_build, programs):
    """A program run as uid 1000, whose routing policy rule (``uidrange``) leads to a table that
    refuses its packets while the service's own internet is reachable: the module says no network
    (LOCAL), as every connect of that program fails; root's program beside it says FULL. The uid's
    table gets a way out: the program is told (network-changed, FULL), root's hears nothing; refused
    again: told again. Before, the module read the root object, the service's own answer: the
    program said FULL throughout."""
    lab = kernel_daemon
    uid_rules.uid_rule(lab)
    build = readable_build(gio_build)
    try:
        as_user = [harness.need_tool("setpriv"), "--reuid", uid_rules.USER, "--regid", uid_rules.USER,
                   "--clear-groups"]
        theirs = start(programs, build, lab, inside=daemon_side(lab) + as_user)
        ours = start(programs, gio_build, lab)
        assert theirs.ready() == [OURS, "0", "0", str(LOCAL)], theirs.describe()
        assert ours.ready() == [OURS, "1", "0", str(FULL)], ours.describe()
        mark, ours_mark = theirs.mark(), ours.mark()

        lab.ip_a("route", "replace", "default", "via", kernel.GATEWAY_V4, "dev", kernel.UPLINK, "table", "100")
        theirs.wait(is_state((1, 0, FULL)), "uid 1000 told its internet is back", mark)
        lab.ip_a("route", "replace", "unreachable", "default", "table", "100")
        theirs.wait(is_state((0, 0, LOCAL)), "uid 1000 told its internet is refused again", mark)
        assert theirs.changes(mark) == [(1, 0, FULL), (0, 0, LOCAL)], theirs.describe()
        # A question answered by the daemon after both changes: anything it sent root's program
        # before is read by then.
        assert ours.ask(ROUTED) == "ok", ours.describe()
        assert ours.changes(ours_mark) == [], "root's internet never moved\n" + ours.describe()
        theirs.close()
        ours.close()
    finally:
        shutil.rmtree(build, ignore_errors=True)


def assert_glib_monitor(program: Program) -> float:
    """The program got one of GLib's own monitors, within the bound; returns the time it took."""
    _, stamp, line = program.wait(lambda line: line.startswith("ready "), "the ready line",
                                  timeout=INIT_BOUND + START_SLACK + harness.CHANGE_TIMEOUT)
    ready = line.split()[1:]
    elapsed = stamp - program.started
    assert ready[0] != OURS and ready[0].startswith("GNetworkMonitor"), program.describe()
    assert elapsed < INIT_BOUND + START_SLACK, f"GLib's monitor after {elapsed:.2f} s\n" + program.describe()
    program.close()
    assert "Failed to initialize reachabilityd (ReachabilitydNetworkMonitor)" in program.output(), program.describe()
    return elapsed


def test_a_program_in_another_network_namespace_gets_glibs_monitor_for_its_own(kernel_daemon, gio_build,
                                                                              programs):
    """A program in a network namespace of its own with no route, on the daemon's bus (a container
    given the host's bus socket), the module chosen by priority or by name: the daemon answers for
    another namespace (where ROUTED is reachable), so the module does not start, saying why, and
    GLib's own monitor answers for the program's: no network, can_reach HOST_UNREACHABLE. Before,
    the program was told the daemon's namespace's answer: available, FULL, ROUTED reachable."""
    lab = kernel_daemon
    own = lab.namespaces.create("gio")
    for python, env in ((False, {}), (True, {"GIO_USE_NETWORK_MONITOR": "reachabilityd"})):
        program = start(programs, gio_build, lab, inside=harness.Namespaces.exec_argv(own), python=python,
                        env=env, follow=False, targets=(ROUTED,))
        assert_glib_monitor(program)
        output = program.output()
        assert "answers for network namespace" in output and "GLib's own monitor answers here" in output, output
        assert program.ready() == [GLIB_NETLINK, "0", "0", str(LOCAL)], program.describe()
        for how in ("sync", "async"):  # GLib's netlink monitor's word for an address with no route
            assert f"reach {how} {ROUTED} error {HOST_UNREACHABLE} " in output, program.describe()
    daemon_side_program = start(programs, gio_build, lab, follow=False, targets=(ROUTED,))
    assert daemon_side_program.ready() == [OURS, "1", "0", str(FULL)], daemon_side_program.describe()
    daemon_side_program.close()
    assert f"reach sync {ROUTED} ok" in daemon_side_program.output(), daemon_side_program.describe()


def test_glib_monitor_when_the_service_is_absent(plain_lab, gio_build, programs):
    """Nothing on the bus, nothing activatable: GLib's next monitor, at once; chosen by name too."""
    for env in ({}, {"GIO_USE_NETWORK_MONITOR": "reachabilityd"}):
        program = start(programs, gio_build, plain_lab, env=env, follow=False)
        elapsed = assert_glib_monitor(program)
        assert "neither on the system bus nor activatable" in program.output(), program.describe()
        print(f"GLib's own monitor after {elapsed:.2f} s ({env or 'default'})")


@pytest.fixture
def activation_lab(request):
    """A private bus that can activate (its activation file is the test's), nothing else."""
    lab = harness.PlainLab()
    lab.enable_activation()
    return conftest._lab(request, lab)  # pylint: disable=protected-access


def activation_file(lab, exec_line: str) -> None:
    (lab.servicedir / f"{harness.SERVICE}.service").write_text(
        f"[D-BUS Service]\nName={harness.SERVICE}\nExec={exec_line}\n")
    lab.client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME, "ReloadConfig")


def test_glib_monitor_when_the_start_fails_or_hangs(activation_lab, gio_build, programs):
    """Activatable, but its start fails (as a masked unit's does): GLib's monitor at once. A start
    that never takes the name: GLib's monitor once the module's 2 s are over."""
    lab = activation_lab
    activation_file(lab, "/bin/false")
    program = start(programs, gio_build, lab, follow=False)
    assert_glib_monitor(program)

    pid_file = lab.directory / "hanging.pid"
    activation_file(lab, f"/bin/sh -c 'echo $$ > {pid_file}; exec sleep 60'")
    try:
        program = start(programs, gio_build, lab, follow=False)
        elapsed = assert_glib_monitor(program)
        assert elapsed >= INIT_BOUND * 0.9, f"gave up after {elapsed:.2f} s, before its bound\n" + program.describe()
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_an_activatable_service_is_started_by_the_module(activation_lab, gio_build, programs):
    """Activatable and not running: the module's first read starts it, and the program gets ours."""
    lab = activation_lab
    daemon = lab.activatable(args=["--system", "--backend", "kernel"])
    program = start(programs, gio_build, lab, targets=("127.0.0.1",))
    try:
        ready = program.ready()
        assert ready[0] == OURS, program.describe()
        program.wait(lambda line: line == "reach async 127.0.0.1 ok", "can_reach(127.0.0.1)")
        program.close()
    finally:
        if lab.client.name_owner(harness.SERVICE):
            daemon.owner_pid(lab.client)


def test_captive_portal_is_glibs_portal(nm_lab, gio_build, programs):
    """NetworkManager's check finds a portal: the network stays available (a route, GLib's
    meaning) with connectivity PORTAL, in one network-changed; the portal gone: FULL again."""
    lab = nm_lab
    lab.daemon()
    program = start(programs, gio_build, lab)
    ready = program.ready()
    assert ready[:3] == [OURS, "1", "0"], program.describe()
    if ready[3] != str(FULL):
        program.wait(lambda line: line.startswith("changed ") and line.split()[2:5] == ["1", "0", str(FULL)],
                     "NetworkManager's full connectivity")
    for portal, expected in ((True, PORTAL), (False, FULL)):
        mark = program.mark()
        lab.set_portal(portal)
        lab.check_connectivity()
        program.wait(lambda line, expected=expected: line.startswith("changed ")
                     and line.split()[2:5] == ["1", "0", str(expected)], f"connectivity {expected}", mark)
        program.ask(ROUTED)
        assert program.changes(mark) == [(1, 0, expected)], program.describe()
    program.close()


UNMANAGED, UNMANAGED_PEER = "xveth0", "xveth1"


def test_a_route_networkmanager_does_not_manage_is_full_never_local(nm_lab_without_nm, gio_build, programs):
    """NetworkManager's device without carrier (NetworkManager: connectivity "none"), and a default
    route through a device NetworkManager leaves unmanaged: the daemon says Reachable with
    Connectivity "none". The program hears the network available with FULL connectivity (GLib's
    netlink monitor's word for a default route nobody checked), never available with LOCAL."""
    lab = nm_lab_without_nm
    (lab.directory / "conf.d" / "unmanaged.conf").write_text(
        f"[keyfile]\nunmanaged-devices=interface-name:{UNMANAGED};interface-name:{UNMANAGED_PEER}\n")
    lab.start_nm()
    lab.daemon()
    program = start(programs, gio_build, lab)
    ready = program.ready()
    assert ready[:3] == [OURS, "1", "0"], program.describe()
    mark = program.mark()
    lab.set_carrier(False)
    lab.wait_nm_state(harness.NM_STATE_DISCONNECTED)
    program.wait(is_state((0, 0, LOCAL)), "no network once NetworkManager deactivated", mark)

    mark = program.mark()
    recorder = lab.recorder()
    recorder.sync()
    lab.ip_nm("link", "add", UNMANAGED, "type", "veth", "peer", "name", UNMANAGED_PEER)
    lab.ip_nm("link", "set", UNMANAGED_PEER, "up")
    lab.ip_nm("addr", "add", "10.77.0.2/24", "dev", UNMANAGED)
    lab.ip_nm("link", "set", UNMANAGED, "up")
    lab.ip_nm("route", "add", "default", "via", "10.77.0.1", "dev", UNMANAGED)
    # Nothing answers for that gateway: its entry is the test's (the service would find it dead).
    lab.ip_nm("neigh", "replace", "10.77.0.1", "lladdr", "02:00:5e:00:53:02", "dev", UNMANAGED, "nud", "permanent")
    recorder.wait_props({"Flags": harness.REACHABLE, "Status": 2, "Connectivity": "none", "Interface": UNMANAGED},
                        "the daemon: Reachable through the unmanaged device, NetworkManager's connectivity none")
    _, _, line = program.wait(lambda line: line.startswith("changed ") and line.split()[2] == "1",
                              "the network available through the unmanaged device", mark)
    assert line.split()[2:5] == ["1", "0", str(FULL)], program.describe()
    program.ask(ROUTED)
    assert program.changes(mark) == [(1, 0, FULL)], program.describe()
    assert_glib_rules(program)
    recorder.close()
    program.close()
