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
* A restarted daemon: nothing is announced while it is away, the new
  instance's answer is read, and told only when it differs.
* No service (not on the bus, not activatable), a start that fails, a start
  that hangs: GLib's own monitor within the module's bound (2 s, plus the
  program's own start); an activatable service is started by the module.
"""

from __future__ import annotations

import contextlib
import os
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
from conftest import need

GIO_DIR = harness.REPO / "gio"
OURS = "ReachabilitydNetworkMonitor"
FULL, LOCAL = int(Gio.NetworkConnectivity.FULL), int(Gio.NetworkConnectivity.LOCAL)
PORTAL = int(Gio.NetworkConnectivity.PORTAL)
HOST_NOT_FOUND = int(Gio.IOErrorEnum.HOST_NOT_FOUND)
NETWORK_UNREACHABLE = int(Gio.IOErrorEnum.NETWORK_UNREACHABLE)
HOST_UNREACHABLE = int(Gio.IOErrorEnum.HOST_UNREACHABLE)
INIT_BOUND = 2.0  # REACH_INIT_TIMEOUT_MS in gio/monitor.h
# What a program's start-up may add to it (an AddressSanitizer build on a loaded machine).
START_SLACK = 3.0
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
                 env: Optional[dict] = None, follow: bool = True):
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
                           ASAN_OPTIONS="detect_leaks=1:exitcode=23", G_MESSAGES_DEBUG="GLib-GIO")
        environment.update(env or {})
        self.name = "monitor-test.py" if python else "monitor-test"
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

    def ask(self, target: str) -> str:
        """can_reach_async(target): "ok" or "error CODE MESSAGE", and a barrier (see the top)."""
        start = len(self.lines)
        self.process.stdin.write(target + "\n")
        self.process.stdin.flush()
        prefix = f"reach async {target} "
        _, _, line = self.wait(lambda line: line.startswith(prefix), f"the answer for {target}", start)
        return line[len(prefix):]

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


@pytest.fixture
def programs():
    """Programs started by a test, killed by PID at its end if still running."""
    started: list = []
    yield started
    for program in started:
        program.kill()


def start(programs: list, *args, **kwargs) -> Program:
    program = Program(*args, **kwargs)
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
    program = start(programs, gio_build, lab.bus.address, targets=(ROUTED, UNROUTED))
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
    program = start(programs, gio_build, lab.bus.address, python=True,
                    env={"GIO_USE_NETWORK_MONITOR": "reachabilityd"})
    assert program.ready() == [OURS, "1", "0", str(FULL)], program.describe()
    assert program.ask(ROUTED) == "ok", program.describe()
    assert program.ask(UNROUTED).startswith(f"error {HOST_UNREACHABLE} "), program.describe()
    assert program.ask("nowhere.invalid").startswith(f"error {HOST_NOT_FOUND} "), program.describe()
    follow_edges(program, set_kernel_carrier(lab), flaps=1)
    program.close()


def test_a_restarted_daemon_is_read_again_and_told_only_on_a_change(kernel_daemon, gio_build, programs):
    """The daemon stopped: nothing changes for GLib. The carrier lost while it is away: the next
    instance's answer arrives as one network-changed. Restarted with nothing changed: none."""
    lab = kernel_daemon
    program = start(programs, gio_build, lab.bus.address)
    assert program.ready() == [OURS, "1", "0", str(FULL)], program.describe()
    mark = program.mark()
    lab.daemons[-1].stop()
    lab.client.wait_for_name_gone(harness.SERVICE)
    lab.set_peer(kernel.UPLINK_PEER, False)
    lab.wait_operstate(kernel.UPLINK, "DOWN")
    lab.daemon(args=kernel.daemon_args("--backend", "kernel"))
    program.wait(lambda line: line.startswith("changed ") and line.split()[2:5] == ["0", "0", str(LOCAL)],
                 "the new instance's answer (no network)", mark)
    assert program.ask(ROUTED).startswith(f"error {NETWORK_UNREACHABLE} "), program.describe()
    assert program.changes(mark) == [(0, 0, LOCAL)], program.describe()

    mark = program.mark()
    lab.daemons[-1].stop()
    lab.client.wait_for_name_gone(harness.SERVICE)
    lab.daemon(args=kernel.daemon_args("--backend", "kernel"))
    # The module reads the new owner as soon as it is seen; the answer comes after that read.
    assert program.ask(ROUTED).startswith(f"error {NETWORK_UNREACHABLE} "), program.describe()
    assert program.changes(mark) == [], program.describe()
    program.close()


# --- the real NetworkManager -------------------------------------------------------------


def test_follows_networkmanager_carrier_flaps(nm_lab, gio_build, programs):
    """The daemon on NetworkManager: the C program's monitor is ours, with NetworkManager's full
    connectivity, and follows two carrier flaps (the network back with full connectivity again)
    with at most two network-changed per edge."""
    lab = nm_lab
    lab.daemon()
    program = start(programs, gio_build, lab.bus.address)
    ready = program.ready()
    assert ready[:3] == [OURS, "1", "0"], program.describe()
    if ready[3] != str(FULL):
        program.wait(lambda line: line.startswith("changed ") and line.split()[2:5] == ["1", "0", str(FULL)],
                     "NetworkManager's full connectivity")
    follow_edges(program, lab.set_carrier, flaps=2)
    program.close()


# --- no service: GLib's own monitor -------------------------------------------------------


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


def test_glib_monitor_when_the_service_is_absent(plain_lab, gio_build, programs):
    """Nothing on the bus, nothing activatable: GLib's next monitor, at once; chosen by name too."""
    for env in ({}, {"GIO_USE_NETWORK_MONITOR": "reachabilityd"}):
        program = start(programs, gio_build, plain_lab.bus.address, env=env, follow=False)
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
    program = start(programs, gio_build, lab.bus.address, follow=False)
    assert_glib_monitor(program)

    pid_file = lab.directory / "hanging.pid"
    activation_file(lab, f"/bin/sh -c 'echo $$ > {pid_file}; exec sleep 60'")
    try:
        program = start(programs, gio_build, lab.bus.address, follow=False)
        elapsed = assert_glib_monitor(program)
        assert elapsed >= INIT_BOUND * 0.9, f"gave up after {elapsed:.2f} s, before its bound\n" + program.describe()
    finally:
        with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


def test_an_activatable_service_is_started_by_the_module(activation_lab, gio_build, programs):
    """Activatable and not running: the module's first read starts it, and the program gets ours."""
    lab = activation_lab
    daemon = lab.activatable(args=["--system", "--backend", "kernel"])
    program = start(programs, gio_build, lab.bus.address, targets=("127.0.0.1",))
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
    program = start(programs, gio_build, lab.bus.address)
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
