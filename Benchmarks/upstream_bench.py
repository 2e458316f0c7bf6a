#!/usr/bin/python3
"""A dead upstream: how soon it is "limited", beside NetworkManager alone and GLib (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/upstream_bench.py [--rounds 10]

The NetworkManager lab of the integration tests (test_internet_nm.py), its connectivity check
at NetworkManager's default interval (300 s). Each round the upstream dies (the conncheck server
stops, and nothing beyond the gateway answers) and a program in NetworkManager's namespace tries
three destinations beyond the gateway, 1 s each. Printed: the time from the first failing
connection's start to the daemon's ``Connectivity`` "limited" and to GLib's NetworkManager
backend's LIMITED (a python-gi GNetworkMonitor beside it, which hears NetworkManager's own
verdict); then the upstream back and one answered connection: the time to
"full" again. Apart: NetworkManager alone, its interval set to 30 s in a second lab and nothing
connecting: the time from the upstream's death to its own "limited" (its interval decides). And
false "limited": rounds where one destination never answers, tried five times, while
connections to the gateway's web server are answered (goal 0). All times CLOCK_MONOTONIC.
"""

import argparse
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

import harness  # noqa: E402
from harness import NM_IFACE, NM_NAME, NM_PATH  # noqa: E402
from measure import pct  # noqa: E402
from test_internet_nm import DEAD, connect_from_nm_namespace as connect  # noqa: E402

LIMITED = 2  # G_NETWORK_CONNECTIVITY_LIMITED
# GLib's monitor: its connectivity at start and at each change of it (notify::connectivity: GLib's
# NetworkManager backend does not emit network-changed when only the connectivity changed).
GLIB = """
import time
from gi.repository import Gio, GLib
monitor = Gio.NetworkMonitor.get_default()
print("ready", type(monitor).__gtype__.name, int(monitor.get_connectivity()), flush=True)
monitor.connect("notify::connectivity",
                lambda m, _: print(f"changed {time.monotonic():.6f} {int(m.get_connectivity())}", flush=True))
GLib.MainLoop().run()
"""
class GLibMonitor:
    """GLIB with GLib's NetworkManager backend, in NetworkManager's namespaces."""

    def __init__(self, lab):
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address, GIO_USE_NETWORK_MONITOR="networkmanager")
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        self.process = subprocess.Popen(
            [harness.need_tool("nsenter"), "-t", str(lab.anchor.pid), "-n", "--", "/usr/bin/python3", "-c", GLIB],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        self.changes = []  # (time, connectivity)
        self.lines = []
        self.ready = threading.Event()
        self.lock = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            self.lines.append(line.rstrip())
            words = line.split()
            if words[:1] == ["ready"]:
                self.ready.set()
            if words[:1] == ["changed"]:
                with self.lock:
                    self.changes.append((float(words[1]), int(words[2])))
                    self.lock.notify_all()

    def first(self, connectivity, since, timeout=30.0):
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for stamp, value in self.changes:
                    if stamp >= since and value == connectivity:
                        return stamp
                if time.monotonic() >= deadline:
                    return None
                self.lock.wait(deadline - time.monotonic())

    def stop(self):
        self.process.kill()
        self.process.wait()


def wait_connectivity(recorder, value, mark, timeout=30.0):
    recorder.wait_props({"Connectivity": value}, f"Connectivity {value}", mark=mark, timeout=timeout)
    return time.monotonic()


def with_daemon(rounds):
    lab = harness.NMLab(conncheck_interval=300)
    ours, glib, back, false_limited = [], [], [], 0
    try:
        lab.start()
        recorder = lab.recorder()
        lab.daemon()
        recorder.sync()
        recorder.wait_props({"Connectivity": "full"}, "the connected answer")
        monitor = GLibMonitor(lab)
        if not monitor.ready.wait(harness.START_TIMEOUT):
            raise SystemExit("GLib's monitor did not start")
        for _ in range(rounds):
            mark = recorder.mark()
            lab.conncheck.stop()
            start = time.monotonic()
            connect(lab, 1.0, *DEAD)
            ours.append(wait_connectivity(recorder, "limited", mark) - start)
            seen = monitor.first(LIMITED, start)
            glib.append(None if seen is None else seen - start)
            mark = recorder.mark()
            lab.conncheck.start()
            start = time.monotonic()
            connect(lab, 2.0, harness.UPSTREAM_V4)
            back.append(wait_connectivity(recorder, "full", mark) - start)
            time.sleep(10.5)  # the daemon asks at most once per 10 s (upstreamCheckInterval)
        for _ in range(rounds):
            mark = recorder.mark()
            connect(lab, 0.3, *[DEAD[0]] * 5)
            connect(lab, 2.0, harness.UPSTREAM_V4)
            recorder.barrier()
            false_limited += sum(1 for e in recorder.since(mark, "properties")
                                 if e.changed.get("Connectivity") == "limited")
        monitor.stop()
        if None in glib:
            print("GLib's monitor printed:", *monitor.lines, sep="\n  ")
        recorder.close()
    finally:
        lab.close()
    return ours, glib, back, false_limited


def networkmanager_alone(rounds, interval):
    lab = harness.NMLab(conncheck_interval=interval)
    times = []
    try:
        lab.start()
        for _ in range(rounds):
            lab.conncheck.stop()
            start = time.monotonic()
            deadline = start + interval + 30
            while time.monotonic() < deadline:
                state = lab.client.get(NM_NAME, NM_PATH, NM_IFACE, "Connectivity")
                if state == 3:  # NM_CONNECTIVITY_LIMITED
                    break
                time.sleep(0.1)  # NetworkManager alone: this script polls it, the daemon is not there
            times.append(time.monotonic() - start)
            lab.conncheck.start()
            lab.check_connectivity()
    finally:
        lab.close()
    return times


def line(name, values):
    found = [v for v in values if v is not None]
    missing = len(values) - len(found)
    return (f"  {name}: p50 {pct(found, 50):.2f} s  p99 {pct(found, 99):.2f} s  max {max(found):.2f} s"
            + (f"  (never in {missing} of {len(values)})" if missing else ""))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--alone-rounds", type=int, default=3)
    parser.add_argument("--interval", type=int, default=30, help="NetworkManager's interval when it is alone")
    options = parser.parse_args()
    print(f"machine: {os.cpu_count()} cores; daemon {harness.daemon_binary()}")
    ours, glib, back, false_limited = with_daemon(options.rounds)
    alone = networkmanager_alone(options.alone_rounds, options.interval)
    print("upstream dead → limited, from the first failing connection's start (three destinations, 1 s each):")
    print(line("ours", ours))
    print(line("GLib's NetworkManager backend beside it", glib))
    print(line(f"NetworkManager alone, nothing connecting, interval {options.interval} s", alone))
    print("upstream back → full, from the answered connection's start:")
    print(line("ours", back))
    print(f"false limited: {false_limited} in {options.rounds} rounds of one dead destination among working ones")


if __name__ == "__main__":
    main()
