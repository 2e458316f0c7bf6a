#!/usr/bin/python3
"""GLib's GNetworkMonitor through our GIO module beside GLib's own NetworkManager backend (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/gio_bench.py [--flaps 20]

daemon_bench.py's lab (the real NetworkManager in its namespaces, the daemon
beside it) and its carrier flaps; two GLib programs in Python that know
nothing of us (gio/tests/monitor-test.py) follow them at once, in
NetworkManager's namespaces: one gets our module (built here with
``make -C gio``, found through GIO_EXTRA_MODULES, chosen by its priority),
the other GLib's NetworkManager backend (GIO_USE_NETWORK_MONITOR=
networkmanager). For each edge (down: NetworkManager reaches State 20; up:
70) it prints, per monitor, the time from NetworkManager's StateChanged to
the first ``network-changed`` after which the monitor says the new state —
what a handler that reads ``g_network_monitor_get_network_available()`` sees,
the way GLib's own programs use the monitor (negative: before NetworkManager
said it) — and, apart, the first whose *argument* says it: GLib's
NetworkManager backend emits signals whose argument is not yet (or no longer)
what its property says, so the two measures differ for it, never for the
module (test_gio_module.py holds the module to that). And how many ``network-changed``
the edge brought (counted until one second after the edge's last signal:
no signal tells when GLib's backend is done). And the module's own hop: the
daemon's first StatusChanged whose Reachable bit matches the edge (received
by this process) → the module's network-changed. All times are
CLOCK_MONOTONIC.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

import harness  # noqa: E402
from measure import pct  # noqa: E402
from harness import NM_IFACE, NM_NAME, NM_PATH, REACHABLE, ROOT_PATH, TARGET_IFACE  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PROGRAM = REPO / "gio" / "tests" / "monitor-test.py"
SETTLE = 1.0  # seconds after an edge's last network-changed before it is counted
ARGUMENT = ":argument"  # an event of the signal's argument, beside the one of what the handler read
disagreements = {}  # monitor → network-changed whose argument was not what its property said


class Monitor:
    """monitor-test.py --follow in NetworkManager's namespaces; each network-changed as two events:
    (time, name, what the handler read) and (time, name + ARGUMENT, the signal's argument)."""

    def __init__(self, lab, name, expected_type, events, env):
        environment = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address, **env)
        environment.pop("DBUS_SESSION_BUS_ADDRESS", None)
        self.name = name
        self.process = subprocess.Popen(
            [harness.need_tool("nsenter"), "-t", str(lab.anchor.pid), "-n", "-m", "-u", "--",
             "/usr/bin/python3", str(PROGRAM), "--follow"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=environment)
        ready = self.process.stdout.readline().split()
        if ready[:2] != ["ready", expected_type]:
            self.stop()
            raise harness.HarnessError(f"{name}: GNetworkMonitor is not {expected_type}: {ready}")
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        context = harness.main_context()
        for line in self.process.stdout:
            words = line.split()
            if words and words[0] == "changed":
                stamp = float(words[1])
                events.append((stamp, self.name, words[5] == "1"))
                events.append((stamp, self.name + ARGUMENT, words[2] == "1"))
                if words[2] != words[5]:
                    disagreements[self.name] = disagreements.get(self.name, 0) + 1
                context.wakeup()

    def stop(self):
        self.process.kill()
        self.process.wait()


def build_module(directory: Path) -> Path:
    harness.run(["make", "-C", REPO / "gio", f"BUILDDIR={directory}", "module"], timeout=300)
    return directory


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flaps", type=int, default=20)
    options = parser.parse_args()

    build = Path(tempfile.mkdtemp(prefix="reach-gio-bench-"))
    lab = harness.NMLab()
    monitors = []
    try:
        modules = build_module(build)
        lab.start()
        client = lab.client
        events = []  # (time, kind, value)
        client.conn.signal_subscribe(NM_NAME, NM_IFACE, "StateChanged", NM_PATH, None, 0,
                                     lambda *a: events.append((time.monotonic(), "nm", a[5].unpack()[0])))
        client.conn.signal_subscribe(None, TARGET_IFACE, "StatusChanged", ROOT_PATH, None, 0,
                                     lambda *a: events.append((time.monotonic(), "daemon",
                                                               bool(a[5].unpack()[1] & REACHABLE))))
        lab.daemon(args=["--system"])
        monitors.append(Monitor(lab, "ours", "ReachabilitydNetworkMonitor", events,
                                {"GIO_EXTRA_MODULES": str(modules)}))
        monitors.append(Monitor(lab, "glib", "GNetworkMonitorNM", events,
                                {"GIO_USE_NETWORK_MONITOR": "networkmanager"}))

        latency = {name: {False: [], True: []} for name in ("ours", "glib", "glib" + ARGUMENT)}
        counts = {"ours": [], "glib": []}
        hop = []
        for flap in range(options.flaps):
            for carrier, nm_state in ((False, 20), (True, 70)):
                start = len(events)
                lab.set_carrier(carrier)

                def seen(start=start, carrier=carrier, nm_state=nm_state):
                    new = events[start:]
                    nm = [t for t, k, v in new if k == "nm" and v == nm_state]
                    first = {name: [t for t, k, v in new if k == name and v == carrier] for name in latency}
                    if nm and all(first.values()):
                        return nm[0], {name: times[0] for name, times in first.items()}
                    return None
                nm_t, firsts = harness.wait_until(seen, 30, f"flap {flap} carrier={carrier}")
                for name, stamp in firsts.items():
                    latency[name][carrier].append((stamp - nm_t) * 1000)
                daemon = [t for t, k, v in events[start:] if k == "daemon" and v == carrier]
                if daemon:
                    hop.append((firsts["ours"] - daemon[0]) * 1000)
                # Late notifications of this edge (NetworkManager's connectivity settles after its State).
                while True:
                    last = max(t for t, _, _ in events[start:])
                    left = last + SETTLE - time.monotonic()
                    if left <= 0:
                        break
                    time.sleep(left)
                for name in counts:
                    counts[name].append(sum(1 for _, k, _ in events[start:] if k == name))

        print(f"machine: {os.cpu_count()} cores, {os.uname().release}; {options.flaps} carrier flaps")
        print("GNetworkMonitor, NetworkManager StateChanged → first network-changed after which the monitor "
              "says the new `network-available` (negative: before NetworkManager)")
        for carrier, edge in ((False, "down (NM 20)"), (True, "up   (NM 70)")):
            for name, label in (("ours", "reachabilityd module"), ("glib", "GLib's NM backend  "),
                                ("glib" + ARGUMENT, "GLib's NM backend, by the signal's argument")):
                values = latency[name][carrier]
                print(f"  {edge} {label}: p50 {statistics.median(values):8.2f} ms   p99 {pct(values, 99):8.2f} ms   "
                      f"min {min(values):8.2f}   max {max(values):8.2f}")
        for name, label in (("ours", "reachabilityd module"), ("glib", "GLib's NM backend")):
            print(f"  network-changed per edge, {label}: min {min(counts[name])}, max {max(counts[name])}, "
                  f"mean {statistics.mean(counts[name]):.2f}; whose argument was not the property: "
                  f"{disagreements.get(name, 0)}")
        if hop:
            print(f"  the module's own hop, the daemon's StatusChanged → network-changed ({len(hop)} edges): "
                  f"p50 {statistics.median(hop):.2f} ms   p99 {pct(hop, 99):.2f} ms")
        ahead = all(statistics.median(latency["ours"][edge]) < statistics.median(latency["glib"][edge])
                    for edge in (False, True))
        fewer = statistics.mean(counts["ours"]) < statistics.mean(counts["glib"])
        by_argument = all(statistics.median(latency["ours"][edge]) < statistics.median(latency["glib" + ARGUMENT][edge])
                          for edge in (False, True))
        print(f"  the module ahead of GLib's backend on both edges (p50): {'yes' if ahead else 'NO'} "
              f"(by GLib's signal argument: {'yes' if by_argument else 'NO'}); "
              f"fewer notifications: {'yes' if fewer else 'NO'}")
    finally:
        for monitor in monitors:
            monitor.stop()
        lab.close()
        subprocess.run(["rm", "-rf", str(build)], check=False)


if __name__ == "__main__":
    main()
