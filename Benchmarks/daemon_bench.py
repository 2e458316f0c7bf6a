#!/usr/bin/python3
"""reachabilityd's own figures against a real NetworkManager (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/daemon_bench.py [--flaps 50] [--idle 60]

Prints:
  * change latency: NetworkManager's StateChanged on the bus → our root
    StatusChanged on the bus, both received by one client, for every carrier
    flap (down edge: NM reaches 20; up edge: NM reaches 70). Negative means we
    announced the change first (we see the kernel's carrier event, NetworkManager
    waits for its carrier timeout). Also the StatusChanged count per flap.
  * the same flaps, in the same run, seen by GLib's GNetworkMonitor with its
    NetworkManager backend (GIO_USE_NETWORK_MONITOR=networkmanager), in a
    PyGObject client in NetworkManager's namespaces: NM's StateChanged → the
    first `network-changed` whose `available` matches the new state, and how
    many `network-changed` it emits per edge. All times are CLOCK_MONOTONIC,
    which every process on the machine shares.
  * the up edge against the kernel: each edge's first default route
    (RTM_NEWROUTE, read by `ip -ts monitor route` in NetworkManager's
    namespace) → our StatusChanged(2, 2), and → GLib's first `available`
    TRUE (negative: GLib said available before the kernel had a default
    route, when a connect() still fails "Network is unreachable"); and in
    how many edges GLib said unavailable again after it said available.
  * start-up: exec → bus name owned.
  * idle: context switches (voluntary + involuntary, all threads) over --idle
    seconds with nothing changing, and RSS, with the path object held
    (Manager.WatchPath: the Path interface's facts are evaluated then); RSS
    without it too.
"""

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

import harness  # noqa: E402
from measure import context_switches as switches, describe_origins, pct, rss_by_origin, rss_kb  # noqa: E402
from harness import NM_IFACE, NM_NAME, NM_PATH, ROOT_PATH, SERVICE, TARGET_IFACE  # noqa: E402


# GNetworkMonitor's side: one line per `network-changed`, stamped on CLOCK_MONOTONIC.
GIO_MONITOR = r"""
import sys, time
from gi.repository import Gio, GLib
monitor = Gio.NetworkMonitor.get_default()
print("ready", type(monitor).__name__, monitor.get_network_available(), flush=True)
monitor.connect("network-changed", lambda _m, available: print(time.monotonic(), available, flush=True))
GLib.MainLoop().run()
"""


class KernelRoutes:
    """The default routes the kernel adds in NetworkManager's namespaces, as ``ip -ts monitor
    route`` reads them (the kernel sends each event to every listener at once): events
    ``(monotonic time, "kernel", True)``. ``ip`` stamps wall-clock time, turned into
    CLOCK_MONOTONIC with one offset read at start."""

    def __init__(self, lab, events):
        self.offset = time.time() - time.monotonic()
        self.process = subprocess.Popen(
            [harness.need_tool("nsenter"), "-t", str(lab.anchor.pid), "-n", "--", harness.need_tool("ip"), "-ts",
             "monitor", "route"], stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        context = harness.main_context()
        for line in self.process.stdout:
            stamp, _, route = line.partition("]")
            if stamp.startswith("[") and route.strip().startswith("default "):
                wall = datetime.datetime.fromisoformat(stamp[1:]).timestamp()
                events.append((wall - self.offset, "kernel", True))
                context.wakeup()

    def stop(self):
        self.process.kill()
        self.process.wait()


class GioMonitor:
    """GNetworkMonitor (NetworkManager backend) where the daemon runs; its events as (time, "gio", available)."""

    def __init__(self, lab, events):
        env = dict(os.environ, GIO_USE_NETWORK_MONITOR="networkmanager", DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        self.process = subprocess.Popen(
            [harness.need_tool("nsenter"), "-t", str(lab.anchor.pid), "-n", "-m", "-u", "--",
             "/usr/bin/python3", "-c", GIO_MONITOR], stdout=subprocess.PIPE, text=True, env=env)
        ready = self.process.stdout.readline().split()
        if ready[:2] != ["ready", "GNetworkMonitorNM"]:
            raise harness.HarnessError(f"GNetworkMonitor did not start with its NetworkManager backend: {ready}")
        self.implementation = ready[1]
        threading.Thread(target=self._read, args=(events,), daemon=True).start()

    def _read(self, events):
        context = harness.main_context()
        for line in self.process.stdout:
            stamp, available = line.split()
            events.append((float(stamp), "gio", available == "True"))
            # The main thread may be blocked in the GLib loop waiting for exactly this event: wake it
            # (otherwise it sleeps until its wait's own deadline, 30 s later).
            context.wakeup()

    def stop(self):
        self.process.kill()
        self.process.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flaps", type=int, default=50)
    parser.add_argument("--idle", type=float, default=60)
    options = parser.parse_args()

    lab = harness.NMLab()
    try:
        lab.start()
        client = lab.client
        events = []  # (time, kind, value)
        client.conn.signal_subscribe(NM_NAME, NM_IFACE, "StateChanged", NM_PATH, None, 0,
                                     lambda *a: events.append((time.monotonic(), "nm", a[5].unpack()[0])))
        client.conn.signal_subscribe(None, TARGET_IFACE, "StatusChanged", ROOT_PATH, None, 0,
                                     lambda *a: events.append((time.monotonic(), "us", a[5].unpack())))

        # Start-up: exec → name owned (NameOwnerChanged seen by the client).
        owned = []
        client.conn.signal_subscribe("org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                                     "/org/freedesktop/DBus", SERVICE, 0,
                                     lambda *a: owned.append(time.monotonic()) if a[5].unpack()[2] else None)
        daemon = lab.daemon(start=False, args=["--system"])
        exec_time = time.monotonic()
        daemon.start(client, wait=False)
        harness.wait_until(lambda: owned, 10, "name owned")
        startup_ms = (owned[0] - exec_time) * 1000
        harness.wait_until(lambda: any(k == "us" and v == (2, 2) for _, k, v in events), 15, "connected answer")

        gio = GioMonitor(lab, events)
        kernel = KernelRoutes(lab, events)
        # Per up edge: our answer and GLib's first available, from the kernel's first default route;
        # and whether GLib said unavailable again after available (before the next down edge).
        after_route, gio_after_route, gio_back_down = [], [], 0

        down, up, per_flap = [], [], []
        gio_down, gio_up, gio_per_flap = [], [], []
        for i in range(options.flaps):
            for carrier, nm_state, ours, out, gio_out in ((False, 20, (0, 0), down, gio_down),
                                                          (True, 70, (2, 2), up, gio_up)):
                start = len(events)
                lab.set_carrier(carrier)

                def seen():
                    new = events[start:]
                    nm = [t for t, k, v in new if k == "nm" and v == nm_state]
                    us = [t for t, k, v in new if k == "us" and v == ours]
                    glib = [t for t, k, v in new if k == "gio" and v == carrier]
                    return (nm[0], us[-1], glib[0]) if nm and us and glib else None
                nm_t, us_t, gio_t = harness.wait_until(seen, 30, f"flap {i} carrier={carrier}")
                out.append((us_t - nm_t) * 1000)
                gio_out.append((gio_t - nm_t) * 1000)
                # Let late notifications of this edge arrive before they are counted: NetworkManager's
                # connectivity settles after its State (no signal tells when GLib is done).
                time.sleep(1.0)
                per_flap.append(sum(1 for _, k, _ in events[start:] if k == "us"))
                gio_per_flap.append(sum(1 for _, k, _ in events[start:] if k == "gio"))
                if carrier:
                    edge = sorted(events[start:], key=lambda e: e[0])
                    route = next((t for t, k, _ in edge if k == "kernel"), None)
                    if route is not None:
                        after_route.append((us_t - route) * 1000)
                        gio_after_route.append((gio_t - route) * 1000)
                    told = [v for _, k, v in edge if k == "gio"]
                    if True in told and False in told[told.index(True):]:
                        gio_back_down += 1
        gio.stop()
        kernel.stop()

        pid = daemon.pid
        # nsenter execs the daemon, so the PID is the daemon's.
        time.sleep(2)
        rss_without_path = rss_kb(pid)
        client.call(SERVICE, ROOT_PATH, SERVICE + ".Manager", "WatchPath")
        time.sleep(1)
        before = switches(pid)
        time.sleep(options.idle)
        after = switches(pid)

        print(f"machine: {os.cpu_count()} cores, {os.uname().release}")
        print(f"change latency, NetworkManager StateChanged → our StatusChanged ({options.flaps} flaps; "
              "negative: we were first)")
        for name, values in (("down (NM 20, us (0,0))", down), ("up   (NM 70, us (2,2))", up)):
            print(f"  {name}: p50 {statistics.median(values):8.2f} ms   p99 {pct(values, 99):8.2f} ms   "
                  f"min {min(values):8.2f}   max {max(values):8.2f}")
        print(f"  StatusChanged per edge: min {min(per_flap)}, max {max(per_flap)}, "
              f"mean {statistics.mean(per_flap):.2f}")
        print(f"the same edges seen by GLib's GNetworkMonitor ({gio.implementation}): NM StateChanged → first "
              "network-changed with the new `available`")
        for name, values, ours in (("down", gio_down, down), ("up  ", gio_up, up)):
            print(f"  {name}: p50 {statistics.median(values):8.2f} ms   p99 {pct(values, 99):8.2f} ms   "
                  f"min {min(values):8.2f}   max {max(values):8.2f}   "
                  f"(ours minus GLib's at p99: {pct(ours, 99) - pct(values, 99):+.2f} ms)")
        print(f"  network-changed per edge: min {min(gio_per_flap)}, max {max(gio_per_flap)}, "
              f"mean {statistics.mean(gio_per_flap):.2f}")
        print(f"up edge from the kernel's first default route (RTM_NEWROUTE; {len(after_route)} of "
              f"{options.flaps} edges seen; negative: before the kernel had a default route)")
        if after_route:
            for name, values in (("ours", after_route), ("GLib", gio_after_route)):
                print(f"  {name}: p50 {statistics.median(values):8.2f} ms   p99 {pct(values, 99):8.2f} ms   "
                      f"min {min(values):8.2f}   max {max(values):8.2f}   "
                      f"before the route in {sum(1 for v in values if v < 0)} edges")
        print(f"  GLib said unavailable again after available in {gio_back_down} of {options.flaps} up edges")
        print(f"start-up, exec → name owned: {startup_ms:.1f} ms")
        print(f"idle over {options.idle:.0f} s: {after - before} context switches (all threads); "
              f"RSS {rss_kb(pid) / 1024:.1f} MiB with the path object held "
              f"({rss_without_path / 1024:.1f} MiB before WatchPath)")
        origins = rss_by_origin(pid, harness.daemon_binary())
        print("idle RSS by origin (libraries' file pages are shared with every process that maps them; "
              "the daemon's own: its file and its anonymous memory):")
        print(describe_origins(origins))
        ours = sum(origins.get(key, (0, 0))[0] for key in ("the daemon's own file", "heap, stacks, anonymous"))
        ours += sum(anonymous for key, (_, anonymous) in origins.items()
                    if key not in ("the daemon's own file", "heap, stacks, anonymous"))
        print(f"idle RSS private to the daemon (its file, heap and stacks, the libraries' written pages): "
              f"{ours / 1024:.1f} MiB")
    finally:
        lab.close()


if __name__ == "__main__":
    main()
