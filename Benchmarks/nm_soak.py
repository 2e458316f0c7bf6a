#!/usr/bin/env python3
"""Soak against the real NetworkManager: link flaps by removing and re-adding the upstream veth (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/nm_soak.py [--flaps 2000]

Removing the veth pair takes the link away at once; re-adding it makes
NetworkManager see a new device and activate its profile again (tens of
milliseconds; a carrier loss would wait for its carrier timeout). For every
flap the daemon must announce the loss and the return; no StatusChanged may
repeat the flags of the one before it; RSS may grow by at most 1 MiB (measured
after a warm-up of 20 flaps). Prints the figures and exits 1 if one is missed.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

import harness  # noqa: E402
from measure import rss_kb  # noqa: E402
from harness import NM_IFNAME, REACHABLE, ROOT_PATH, TARGET_IFACE, UPSTREAM_IFNAME, UPSTREAM_V4, UPSTREAM_V6  # noqa: E402

WARM_UP = 20


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flaps", type=int, default=2000)
    options = parser.parse_args()
    lab = harness.NMLab()
    batch = None
    try:
        lab.start()
        statuses = []
        lab.client.conn.signal_subscribe(None, TARGET_IFACE, "StatusChanged", ROOT_PATH, None, 0,
                                         lambda *a: statuses.append(tuple(a[5].unpack())))
        daemon = lab.daemon(args=["--system"])
        harness.wait_until(lambda: (2, REACHABLE) in statuses, 30, "the connected answer")
        # One ip process in the upstream namespace takes the commands (no fork per command).
        batch = subprocess.Popen([harness.need_tool("ip"), "-n", lab.ns_up, "-force", "-batch", "-"],
                                 stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, bufsize=1)

        def command(*lines):
            batch.stdin.write("".join(line + "\n" for line in lines))
            batch.stdin.flush()

        remove = [f"link del {UPSTREAM_IFNAME}"]
        add = [f"link add {UPSTREAM_IFNAME} type veth peer name {NM_IFNAME} netns {lab.ns_nm}",
               f"addr add {UPSTREAM_V4}/24 dev {UPSTREAM_IFNAME}",
               f"addr add {UPSTREAM_V6}/64 dev {UPSTREAM_IFNAME} nodad",
               f"link set {UPSTREAM_IFNAME} up"]
        rss_start = None
        started = time.monotonic()
        durations = []
        for flap in range(options.flaps):
            if flap == WARM_UP:
                rss_start = rss_kb(daemon.pid)
                started_measured = time.monotonic()
            begin = time.monotonic()
            for lines, expected, word in ((remove, (0, 0), "removed"), (add, (2, REACHABLE), "re-added")):
                first = len(statuses)
                command(*lines)
                harness.wait_until(lambda: expected in statuses[first:], 30, f"flap {flap + 1}: veth {word}",
                                   lambda: f"  since: {statuses[first:]}\n  daemon log:\n"
                                           f"{harness.tail(daemon.log, 30)}")
            durations.append(time.monotonic() - begin)
        lab.client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
        harness.pump()
        rss_end = rss_kb(daemon.pid)
        repeats = sum(1 for a, b in zip(statuses, statuses[1:]) if a == b)
        losses = statuses.count((0, 0))
        returns = statuses.count((2, REACHABLE))
        growth = rss_end - rss_start
        print(f"machine: {os.cpu_count()} cores, {os.uname().release}; load {os.getloadavg()[0]:.2f}")
        print(f"{options.flaps} NetworkManager flaps (veth removed and re-added) in "
              f"{time.monotonic() - started:.0f} s; median flap {sorted(durations)[len(durations) // 2] * 1000:.0f} ms")
        print(f"StatusChanged: {len(statuses)} in all; {losses} losses (0,0), {returns} returns (2,2); "
              f"{repeats} repeating the previous flags")
        print(f"RSS after {WARM_UP} warm-up flaps {rss_start} KiB, at the end {rss_end} KiB: growth {growth} KiB "
              f"over {options.flaps - WARM_UP} flaps in {time.monotonic() - started_measured:.0f} s")
        ok = repeats == 0 and losses >= options.flaps and returns >= options.flaps + 1 and growth <= 1024
        print("result:", "every goal met" if ok else "GOAL MISSED")
        sys.exit(0 if ok else 1)
    finally:
        if batch is not None:
            batch.stdin.close()
            batch.wait(10)
        lab.close()


if __name__ == "__main__":
    main()
