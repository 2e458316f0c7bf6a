#!/usr/bin/python3
"""reachabilityd's own figures against a real NetworkManager (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/daemon_bench.py [--flaps 50] [--idle 60]

Prints:
  * change latency: NetworkManager's StateChanged on the bus → our root
    StatusChanged on the bus, both received by one client, for every carrier
    flap (down edge: NM reaches 20; up edge: NM reaches 70). Negative means we
    announced the change first (we see the kernel's carrier event, NetworkManager
    waits for its carrier timeout). Also the StatusChanged count per flap.
  * start-up: exec → bus name owned.
  * idle: context switches (voluntary + involuntary, all threads) over --idle
    seconds with nothing changing, and RSS.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

import harness  # noqa: E402
from measure import context_switches as switches, pct, rss_kb  # noqa: E402
from harness import NM_IFACE, NM_NAME, NM_PATH, ROOT_PATH, SERVICE, TARGET_IFACE  # noqa: E402


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

        down, up, per_flap = [], [], []
        for i in range(options.flaps):
            for carrier, nm_state, ours, out in ((False, 20, (0, 0), down), (True, 70, (2, 2), up)):
                start = len(events)
                lab.set_carrier(carrier)

                def seen():
                    new = events[start:]
                    nm = [t for t, k, v in new if k == "nm" and v == nm_state]
                    us = [t for t, k, v in new if k == "us" and v == ours]
                    return (nm[0], us[-1]) if nm and us else None
                nm_t, us_t = harness.wait_until(seen, 30, f"flap {i} carrier={carrier}")
                out.append((us_t - nm_t) * 1000)
                per_flap.append(sum(1 for _, k, _ in events[start:] if k == "us"))

        pid = daemon.pid
        # nsenter execs the daemon, so the PID is the daemon's.
        time.sleep(2)
        before = switches(pid)
        time.sleep(options.idle)
        after = switches(pid)

        print(f"machine: {os.cpu_count()} cores, {os.uname().release}")
        print(f"change latency, NetworkManager StateChanged → our StatusChanged ({options.flaps} flaps; "
              "negative: we were first)")
        for name, values in (("down (NM 20, us (0,0))", down), ("up   (NM 70, us (2,2))", up)):
            print(f"  {name}: p50 {statistics.median(values):8.2f} ms   p99 {pct(values, 99):8.2f} ms   "
                  f"min {min(values):8.2f}   max {max(values):8.2f}")
        print(f"  StatusChanged per edge: min {min(per_flap)}, max {max(per_flap)}")
        print(f"start-up, exec → name owned: {startup_ms:.1f} ms")
        print(f"idle over {options.idle:.0f} s: {after - before} context switches (all threads); "
              f"RSS {rss_kb(pid) / 1024:.1f} MiB")
    finally:
        lab.close()


if __name__ == "__main__":
    main()
