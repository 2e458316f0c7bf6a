#!/usr/bin/python3
"""Start-up of reachabilityd: exec → bus name owned, and the activated first call (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/startup_bench.py [--runs 20]

The daemon owns its name only once its backend is chosen and its first evaluation is done
(NetworkManager's client made, or the kernel's links read), so the name's time is the time to
the first real answer. In the NetworkManager lab (NetworkManager connected), for each backend
(`auto`, which chooses NetworkManager there, and `kernel`):
  * exec → name owned: the time before the daemon's exec to the NameOwnerChanged a client sees;
  * activated first call: a client's call to the name while nothing owns it (the bus starts the
    daemon through an activation file and holds the call until the name is owned) → its reply,
    which must carry the evaluated state (Status 2, not -1).
Each run starts a new daemon and stops it by PID.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

import harness  # noqa: E402
from measure import pct  # noqa: E402
from harness import ROOT_PATH, SERVICE, TARGET_IFACE  # noqa: E402


def exec_to_name(lab, args, runs):
    owned = []
    subscription = lab.client.conn.signal_subscribe(
        harness.DBUS_NAME, harness.DBUS_NAME, "NameOwnerChanged", harness.DBUS_PATH, SERVICE, 0,
        lambda *a: owned.append(time.monotonic()) if a[5].unpack()[2] else None)
    times = []
    try:
        for _ in range(runs):
            owned.clear()
            daemon = lab.daemon(start=False, args=args)
            started = time.monotonic()
            daemon.start(lab.client, wait=False)
            harness.wait_until(lambda: owned, 10, "name owned", lambda: harness.tail(daemon.log, 20))
            times.append((owned[0] - started) * 1000)
            daemon.stop()
            lab.client.wait_for_name_gone(SERVICE)
    finally:
        lab.client.conn.signal_unsubscribe(subscription)
    return times


def activated_first_call(lab, args, runs):
    daemon = lab.activatable(args=args)
    times = []
    for _ in range(runs):
        started = time.monotonic()
        status = lab.client.call(SERVICE, ROOT_PATH, harness.PROPERTIES_IFACE, "Get", "ss", (TARGET_IFACE, "Status"),
                                 timeout=30, auto_start=True)[0]
        times.append((time.monotonic() - started) * 1000)
        if status != harness.STATUS_WIFI_ETHERNET:
            raise SystemExit(f"the activated first call answered Status {status}\n{harness.tail(daemon.log, 30)}")
        daemon.kill(lab.client)
    return times


def line(label, values):
    return (f"  {label}: p50 {statistics.median(values):7.1f} ms   p95 {pct(values, 95):7.1f} ms   "
            f"min {min(values):7.1f}   max {max(values):7.1f}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    options = parser.parse_args()
    lab = harness.NMLab()
    lab.enable_activation()
    try:
        lab.start()
        results = {}
        for backend in ("auto", "kernel"):
            args = ["--system", "--backend", backend]
            results[backend] = (exec_to_name(lab, args, options.runs),
                                activated_first_call(lab, args, options.runs))
        print(f"start-up over {options.runs} runs each (NetworkManager connected)")
        for backend, (name, call) in results.items():
            print(line(f"--backend {backend:6}  exec → name owned      ", name))
            print(line(f"--backend {backend:6}  activated first call   ", call))
        worst = max(statistics.median(name) for name, _ in results.values())
        print(f"start-up, exec → name owned (p50, worse backend): {worst:.1f} ms")
    finally:
        lab.close()


if __name__ == "__main__":
    main()
