#!/usr/bin/python3
"""Host targets at scale against the real NetworkManager and dnsmasq (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/scale_bench.py [--hosts 10000]

dnsmasq in the upstream namespace serves N distinct names (hN.bench.test, each
its own address, half IPv4 routed through the gateway, half IPv6 on-link).
One client watches them all, pipelined. Prints:
  * resolution: time from the first WatchHost until the first 1,000 hosts
    have an answer (Status no longer -1), and until all N have;
  * memory: RSS with N host targets;
  * names that follow their answers: dnsmasq gives every name a TTL of 60 s
    (--local-ttl); over --ttl-window seconds with nothing changing, the lookups
    per minute the TTLs cause (from dnsmasq's query log: each lookup is
    getaddrinfo's A and AAAA queries and the TTL's A and AAAA queries), and how
    they are spread (the busiest second against the mean);
  * one carrier loss: the daemon's own evaluation time for all targets (its
    --verbose log), and how many StatusChanged signals it sent (only targets
    whose flags changed may send one).
"""

import argparse
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

import harness  # noqa: E402
from measure import rss_kb  # noqa: E402
from gi.repository import GLib  # noqa: E402
from harness import (CONNCHECK_HOST, MANAGER_IFACE, ROOT_PATH, SERVICE, SOMEHOST, TARGET_IFACE,  # noqa: E402
                     UPSTREAM_V4, UPSTREAM_V6, Dnsmasq)


def address(i):
    return f"198.51.{i // 250 % 256}.{i % 250 + 1}" if i % 2 == 0 else f"2001:db8:1::{i + 0x1000:x}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=10000)
    parser.add_argument("--ttl-window", type=float, default=90.0,
                        help="seconds of TTL-driven lookups to count (0: skip)")
    options = parser.parse_args()
    n = options.hosts

    lab = harness.NMLab()
    try:
        lab.start()
        hosts_file = lab.directory / "bench.hosts"
        hosts_file.write_text("".join(f"{address(i)} h{i}.bench.test\n" for i in range(n)))
        lab.dnsmasq.stop()
        lab.dnsmasq.log.rename(lab.dnsmasq.log.with_suffix(".first.log"))
        # --addn-hosts serves the file even with --no-hosts; no query log at this rate.
        lab.dnsmasq = Dnsmasq(lab.ns_up, lab.directory, host_records=[
            f"{CONNCHECK_HOST},{UPSTREAM_V4},{UPSTREAM_V6}", ",".join(SOMEHOST)],
            extra_args=[f"--addn-hosts={hosts_file}", "--dns-forward-max=1000", "--local-ttl=60"])
        lab.dnsmasq.start()

        daemon = lab.daemon(args=["--system", "--verbose", "--max-targets-per-client", str(n + 10),
                                  "--max-targets-per-user", str(n + 10),
                                  "--max-targets", str(n + 10)])
        client = lab.client
        answered = {}
        statuses = []

        def on_props(conn, sender, path, iface, member, params):
            _iface, changed, _inv = params.unpack()
            if "Status" in changed and changed["Status"] != -1 and path not in answered:
                answered[path] = time.monotonic()

        def on_status(conn, sender, path, iface, member, params):
            statuses.append(path)

        client.conn.signal_subscribe(SERVICE, "org.freedesktop.DBus.Properties", "PropertiesChanged", None, None,
                                     0, on_props)
        client.conn.signal_subscribe(SERVICE, TARGET_IFACE, "StatusChanged", None, None, 0, on_status)

        # Watch all, keeping 8 calls in flight (the bus's per-connection reply limit).
        loop = GLib.MainLoop()
        state = {"next": 0, "pending": 0}
        start = time.monotonic()

        def send():
            while state["pending"] < 8 and state["next"] < n:
                i = state["next"]
                state["next"] += 1
                state["pending"] += 1
                client.conn.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost",
                                 GLib.Variant("(s)", (f"h{i}.bench.test",)), None, 0, -1, None, done, None)

        def done(conn, result, _):
            conn.call_finish(result)
            state["pending"] -= 1
            if state["next"] >= n and state["pending"] == 0:
                loop.quit()
            send()

        send()
        loop.run()
        watched = time.monotonic() - start
        harness.wait_until(lambda: len(answered) >= n, 120, f"{n} answers",
                           lambda: f"{len(answered)} answered")
        times = sorted(answered.values())
        first_1000 = times[min(999, n - 1)] - start
        all_n = times[-1] - start
        pid = daemon.pid
        rss = rss_kb(pid)
        # The resolver logs its peak once its last lookup has ended, which can be just after the last
        # answer reached us: wait for the line (no signal tells it; the log file is re-read).
        peak_line = r"at most (\d+) were in flight at once"
        try:
            harness.wait_until(lambda: re.search(peak_line, daemon.log_text()), 10,
                               "the resolver's log line with its peak of lookups in flight", poll=0.05)
        except harness.WaitTimeout:
            pass  # reported as "?" below, and as a missed goal by run.py
        peaks = [int(p) for p in re.findall(peak_line, daemon.log_text())]

        # Nothing changes: the names' TTLs alone make lookups.
        per_second = []
        if options.ttl_window > 0:
            query = re.compile(r"query\[A\] h\d+\.bench\.test")

            def a_queries():
                return len(query.findall(lab.dnsmasq.log.read_text(errors="replace")))

            last = a_queries()
            window_start = time.monotonic()
            while time.monotonic() - window_start < options.ttl_window:
                time.sleep(1.0)  # a sampling period, not a wait for an event
                now = a_queries()
                per_second.append(now - last)
                last = now

        # One carrier loss: every target loses its route at once.
        before = len(statuses)
        log_before = len(daemon.log_text())
        lab.set_carrier(False)
        harness.wait_until(lambda: len(statuses) - before >= n, 60, "every target announced the loss",
                           lambda: f"{len(statuses) - before} StatusChanged")
        time.sleep(0.5)
        evaluations = re.findall(r"evaluated (\d+) targets in ([\d.]+) ms; announced (\d+) changes in ([\d.]+) ms",
                                 daemon.log_text()[log_before:])
        signals = len(statuses) - before
        per_target = {}
        for path in statuses[before:]:
            per_target[path] = per_target.get(path, 0) + 1
        twice = sum(1 for count in per_target.values() if count > 1)

        print(f"machine: {os.cpu_count()} cores; {n} host targets, one client")
        print(f"WatchHost × {n}: {watched:.2f} s (8 calls in flight)")
        print(f"first 1,000 hosts answered: {first_1000:.2f} s; all {n}: {all_n:.2f} s")
        print(f"peak lookups in flight: {max(peaks) if peaks else '?'} (the resolver's bound: 8 in all, 4 for one user)")
        print(f"RSS with {n} host targets: {rss / 1024:.1f} MiB")
        print(f"StatusChanged sent after one carrier loss: {signals} for {n} targets and the internet, "
              f"{len(per_target)} distinct, {twice} more than once")
        if per_second:
            # Each lookup asks A twice (getaddrinfo's, the TTL's query).
            lookups = [c / 2 for c in per_second]
            mean = sum(lookups) / len(lookups)
            print(f"TTL 60 s, {len(lookups)} s with nothing changing: {mean * 60:.0f} lookups per minute "
                  f"({mean * 60 / n:.2f} per name); busiest second {max(lookups):.0f} lookups, mean {mean:.0f}/s")
        print("evaluations that followed (targets, evaluation ms, changed targets, announcing ms):")
        for c, ms, changed, ams in evaluations[:4]:
            print(f"  {int(c):6d} targets: evaluated in {float(ms):7.1f} ms; {int(changed):6d} changed, "
                  f"announced in {float(ams):7.1f} ms")
    finally:
        lab.close()


if __name__ == "__main__":
    main()
