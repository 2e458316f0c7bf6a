"""The SystemConfiguration product: Apple's SCNetworkReachability functions, run as programs.

``system-configuration-example`` is Apple's Reachability sample in Swift (the
internet, a host and an address, each with a callback, on a dispatch queue or on
a run loop). It runs in the kernel lab's namespace A beside the daemon
(``--backend kernel``), once with the lab's bus as its system bus
(``REACHABILITY_MODE=daemon``: the daemon's answers or a failure) and once with
no bus at all (in-process), on a queue and on a run loop, and every run must
print the same lines: the flags when scheduled, then exactly one callback per
change of a reference's flags as kveth0 loses and regains carrier, none for a
reference whose flags did not change, and none after unscheduling returned.

``--churn`` makes 1,000 references (then 1,000 more) with counted contexts,
scheduled and unscheduled one after another while kveth0 flaps: no crash, no
callback after unscheduling returned, every retain released, resident memory
within 1 MB over the second 1,000.

The last test builds ``Tests/Fixtures/OwnReachabilityModule``, a package with a
module of its own named ``Reachability`` on this package's SystemConfiguration
product, with no module alias, and runs it.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import threading
import time

import pytest

import harness
from harness import CHANGE_TIMEOUT, OBJECT_MANAGER_IFACE, ROOT_PATH, SERVICE, STOP_TIMEOUT
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4, UPLINK_PEER, daemon_args, kernel_lab_without_carrier, online)

EXAMPLE = harness.daemon_binary().parent / "system-configuration-example"
NO_BUS = "unix:path=/nonexistent/system-configuration-test-bus"
REACHABLE, IS_LOCAL, IS_DIRECT = 1 << 1, 1 << 16, 1 << 17

CONNECTED = {"internet": REACHABLE, "host": REACHABLE | IS_LOCAL | IS_DIRECT, "address": REACHABLE | IS_DIRECT}
OFFLINE = dict(CONNECTED, internet=0, address=0)
RUNS = [(mode, scheduling) for mode in ("daemon", "in-process") for scheduling in ("queue", "runloop")]


class Sample:
    """system-configuration-example in namespace A; its lines read by a thread and queued."""

    def __init__(self, lab, mode: str, scheduling: str, *args: str):
        self.mode, self.scheduling = mode, scheduling
        env = dict(os.environ)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        env["DBUS_SYSTEM_BUS_ADDRESS"] = lab.bus.address if mode == "daemon" else NO_BUS
        if mode == "daemon":
            env["REACHABILITY_MODE"] = "daemon"
        self.log = lab.directory / f"sc-{mode}-{scheduling}-{len(args)}.log"
        argv = [*harness.Namespaces.exec_argv(lab.ns_a), str(EXAMPLE), *args]
        if scheduling == "runloop":
            argv.append("--runloop")
        with open(self.log, "ab") as log:
            self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                          env=env, start_new_session=True)
        self.queue: queue.Queue = queue.Queue()
        self.lines: list = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.popen.stdout:
            self.queue.put(raw.decode(errors="replace").rstrip("\n"))
        self.queue.put(None)

    def __repr__(self):
        return f"system-configuration-example ({self.mode}, {self.scheduling})"

    def describe(self) -> str:
        shown = "\n".join(f"    {line}" for line in self.lines[-30:])
        return f"{self!r}; lines so far:\n{shown}\n  its log:\n{harness.tail(self.log, 30)}"

    def take(self, timeout: float):
        try:
            line = self.queue.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None
        if line is not None:
            self.lines.append(line)
        return line

    def drain(self, settle: float = 0.5) -> None:
        while self.take(settle) is not None:
            pass

    def send(self, command: str) -> None:
        self.popen.stdin.write((command + "\n").encode())
        self.popen.stdin.flush()

    def events(self, event: str) -> list:
        """``(label, flags)`` of every ``event`` line so far."""
        found = []
        for line in self.lines:
            words = line.split(" ")
            if words[0] == event:
                found.append((words[1], int(words[2].split("=", 1)[1], 16)))
        return found

    def wait_for(self, event: str, expected: dict, what: str, timeout: float = CHANGE_TIMEOUT) -> None:
        """Until the latest ``event`` line of each label carries the expected flags."""
        deadline = time.monotonic() + timeout
        while True:
            latest = dict(self.events(event))
            if all(latest.get(label) == flags for label, flags in expected.items()):
                return
            if self.take(deadline - time.monotonic()) is None and time.monotonic() >= deadline:
                raise harness.WaitTimeout(f"{what}: expected {expected}, have {latest}; {self.describe()}")

    def current(self, what: str) -> dict:
        """What GetFlags says now, for each reference (the "flags" command)."""
        before = len(self.events("flags"))
        self.send("flags")
        deadline = time.monotonic() + CHANGE_TIMEOUT
        while len(self.events("flags")) < before + 3:
            if self.take(deadline - time.monotonic()) is None and time.monotonic() >= deadline:
                raise harness.WaitTimeout(f"{what}: no flags lines; {self.describe()}")
        return dict(self.events("flags")[before:before + 3])

    def stop(self) -> None:
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=STOP_TIMEOUT)


@pytest.fixture
def samples():
    started = []

    def start(lab, mode, scheduling, *args):
        started.append(Sample(lab, mode, scheduling, *args))
        return started[-1]

    yield start
    for sample in started:
        sample.stop()


def callbacks(sample: Sample, label: str) -> list:
    return [flags for name, flags in sample.events("callback") if name == label]


def test_apple_sample_from_the_daemon_and_in_process(online, samples):
    """The internet, localhost and the gateway 192.0.2.1, on a queue and on a run loop, from the
    daemon and in-process: the same flags when scheduled; kveth0 loses carrier twice and regains it:
    exactly one callback per change for the internet and the address, none for localhost after the
    one its name owed; after "stop" returns, flaps call nothing back."""
    lab = online.lab
    running = [samples(lab, mode, scheduling, "--host", "localhost", "--address", GATEWAY_V4)
               for mode, scheduling in RUNS]
    for sample in running:
        # A name read before its lookup answers gets the internet's flags, as Apple's (no lookup
        # for GetFlags); its lookup then calls back if the answer differs.
        sample.wait_for("start", {"internet": REACHABLE, "address": REACHABLE | IS_DIRECT}, "the flags once scheduled")
        assert dict(sample.events("start"))["host"] in (REACHABLE, CONNECTED["host"]), sample.describe()
        harness.wait_until(lambda: sample.current("GetFlags while scheduled") == CONNECTED, CHANGE_TIMEOUT,
                           "localhost looked up", sample.describe, poll=0.1)
    for flap in range(2):
        lab.set_peer(UPLINK_PEER, False)
        for sample in running:
            sample.wait_for("callback", {"internet": 0, "address": 0}, f"carrier loss #{flap + 1}")
        lab.set_peer(UPLINK_PEER, True)
        for sample in running:
            sample.wait_for("callback", {"internet": REACHABLE, "address": REACHABLE | IS_DIRECT},
                            f"carrier back #{flap + 1}")
    for sample in running:
        assert sample.current("GetFlags after the flaps") == CONNECTED, sample.describe()
        sample.drain()
        assert callbacks(sample, "internet") == [0, REACHABLE] * 2, "one callback per change: " + sample.describe()
        assert callbacks(sample, "address") == [0, REACHABLE | IS_DIRECT] * 2, sample.describe()
        # localhost: at most the one callback its scheduling owed (none if GetFlags came first).
        assert callbacks(sample, "host") in ([], [CONNECTED["host"]]), sample.describe()
    answers = [([e for e in s.events("start") if e[0] != "host"], callbacks(s, "internet"), callbacks(s, "address"))
               for s in running]
    assert all(answer == answers[0] for answer in answers), "\n".join(s.describe() for s in running)

    for sample in running:
        sample.send("stop")
    for sample in running:
        deadline = time.monotonic() + CHANGE_TIMEOUT
        while "stopped" not in sample.lines:
            assert sample.take(deadline - time.monotonic()) is not None or time.monotonic() < deadline, (
                "no 'stopped': " + sample.describe())
    counts = [len(sample.events("callback")) for sample in running]
    lab.set_peer(UPLINK_PEER, False)
    online.recorder.wait_status(0, 0, "the daemon saw the carrier loss")
    lab.set_peer(UPLINK_PEER, True)
    online.recorder.wait_status(2, REACHABLE, "the daemon saw the carrier back")
    for sample, count in zip(running, counts):
        sample.drain()
        assert len(sample.events("callback")) == count, "a callback after unscheduling: " + sample.describe()


def test_a_url_as_a_host_is_not_reachable_and_never_reaches_the_daemon(online, samples):
    """Apple takes any non-empty name: a URL where a host belongs is a reference that is not
    reachable once scheduled (the callback its name owed says 0), from both sources; the daemon
    is never asked to watch it (no target object appears)."""
    lab = online.lab
    running = [samples(lab, mode, "queue", "--host", "https://stepik.org") for mode in ("daemon", "in-process")]
    for sample in running:
        sample.wait_for("start", {"internet": REACHABLE}, "scheduled")
        sample.wait_for("callback", {"host": 0}, "the URL is not reachable")
    objects = lab.client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0]
    assert [path for path in objects if "/host/" in path] == [], objects


CHURN = 1000
RSS_BUDGET_KB = 1024


@pytest.mark.parametrize("mode", ["daemon", "in-process"])
def test_a_thousand_references_while_the_link_flaps(online, mode):
    """1,000 references (then 1,000 more), localhost and the gateway in turn, each with a counted
    context: callback set, scheduled on a concurrent queue, unscheduled, dropped, while kveth0 flaps
    every 50 ms. No crash; no callback once unscheduling returned; every retain released; resident
    memory grows by at most 1 MB over the second 1,000."""
    lab = online.lab
    stop = threading.Event()

    def flap():
        up = True
        while not stop.is_set():
            up = not up
            lab.set_peer(UPLINK_PEER, up)
            stop.wait(0.05)
        lab.set_peer(UPLINK_PEER, True)

    env = dict(os.environ)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    env["DBUS_SYSTEM_BUS_ADDRESS"] = lab.bus.address if mode == "daemon" else NO_BUS
    if mode == "daemon":
        env["REACHABILITY_MODE"] = "daemon"
    flapper = threading.Thread(target=flap, daemon=True)
    flapper.start()
    try:
        result = subprocess.run([*harness.Namespaces.exec_argv(lab.ns_a), str(EXAMPLE), "--churn", str(CHURN),
                                 "--address", GATEWAY_V4], capture_output=True, text=True, env=env, timeout=300)
    finally:
        stop.set()
        flapper.join()
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    words = dict(word.split("=", 1) for word in result.stdout.split() if "=" in word)
    assert words.get("late-callbacks") == "0", result.stdout
    assert words.get("retains") == words.get("releases"), result.stdout
    assert int(words["retains"]) >= 2 * CHURN, result.stdout
    assert int(words["rss-growth-kb"]) <= RSS_BUDGET_KB, result.stdout
    print(f"churn ({mode}): {result.stdout.strip()}")


FIXTURE = harness.REPO / "Tests" / "Fixtures" / "OwnReachabilityModule"


WELL_KNOWN_MODULES = ("Reachability", "Alamofire", "Network")


def test_a_package_with_its_own_reachability_module_builds_on_system_configuration(tmp_path):
    """A package whose own module is named Reachability, on this package's SystemConfiguration
    product, builds with no module alias (SwiftPM refuses a graph in which two packages declare
    one module name, so it fails if any module of ours is named Reachability) and runs; and no
    module of this package bears a well-known package's module name."""
    swift = shutil.which("swift")
    if swift is None:
        pytest.fail("needs swift on PATH") if os.environ.get("CI") else pytest.skip("needs swift on PATH")
    manifest = json.loads(subprocess.run([swift, "package", "dump-package"], cwd=harness.REPO, check=True,
                                         capture_output=True, text=True, timeout=300).stdout)
    ours = {target["name"] for target in manifest["targets"]} | {product["name"] for product in manifest["products"]}
    assert ours.isdisjoint(WELL_KNOWN_MODULES), sorted(ours & set(WELL_KNOWN_MODULES))

    assert "moduleAliases" not in (FIXTURE / "Package.swift").read_text()
    # The dependency's identity is its folder's name: reachabilityd, wherever the checkout is.
    (tmp_path / "reachabilityd").symlink_to(harness.REPO)
    package = tmp_path / "consumer"
    shutil.copytree(FIXTURE, package, ignore=shutil.ignore_patterns(".build"))
    env = dict(os.environ, REACHABILITYD_CHECKOUT=str(tmp_path / "reachabilityd"))
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    env["DBUS_SYSTEM_BUS_ADDRESS"] = NO_BUS
    build = subprocess.run([swift, "build", "--product", "own-reachability"], cwd=package, capture_output=True,
                           text=True, env=env, timeout=900)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    assert "warning:" not in build.stdout + build.stderr, build.stdout + build.stderr
    run = subprocess.run([str(package / ".build" / "debug" / "own-reachability"), "127.0.0.1"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
    assert f"127.0.0.1 {REACHABLE | IS_LOCAL | IS_DIRECT}" in run.stdout, run.stdout
