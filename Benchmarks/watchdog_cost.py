#!/usr/bin/env python3
"""What systemd's watchdog costs the idle daemon (run as root).

    sudo /usr/bin/python3 Benchmarks/watchdog_cost.py [--idle 60] [--watchdog-sec 30]

The daemon (the kernel backend, on a private bus) is started as the shipped unit starts it
under systemd — NOTIFY_SOCKET and WATCHDOG_USEC (WatchdogSec=) set — with this script's own
socket standing in for systemd's; then it is left alone, and its threads' wake-ups are
counted (voluntary and involuntary context switches, /proc) beside the WATCHDOG=1 datagrams
that arrived. The same without a watchdog for comparison. The unit's WatchdogSec=30 means one
datagram every 15 s: 4 wake-ups a minute of an otherwise silent daemon.
"""

import argparse
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "Tests" / "Integration"))

import harness  # noqa: E402


def measure(idle: float, watchdog_sec: int | None) -> tuple:
    """(wake-ups by thread, WATCHDOG=1 datagrams) over `idle` seconds after start-up."""
    lab = harness.PlainLab().start()
    directory = Path(tempfile.mkdtemp(prefix="reach-watchdog-"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(directory / "notify"))
    notify.setblocking(False)
    saved = {name: os.environ.get(name) for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC")}
    try:
        if watchdog_sec is not None:
            os.environ["NOTIFY_SOCKET"] = str(directory / "notify")
            os.environ["WATCHDOG_USEC"] = str(watchdog_sec * 1_000_000)
        daemon = lab.daemon(args=["--system", "--backend", "kernel"])
        # Settled: the start-up's own work (and its first feeding) is not counted.
        time.sleep(2)
        drained = 0
        while True:
            try:
                notify.recv(64)
                drained += 1
            except BlockingIOError:
                break
        woken = harness.idle_wakeups(daemon.pid, idle)
        feedings = 0
        while True:
            try:
                feedings += notify.recv(64) == b"WATCHDOG=1"
            except BlockingIOError:
                break
        return woken, feedings
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for running in lab.daemons:
            running.stop()
        lab.bus.stop()
        notify.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--idle", type=float, default=60)
    parser.add_argument("--watchdog-sec", type=int, default=30)
    options = parser.parse_args()
    for label, watchdog in (("without a watchdog", None), (f"WatchdogSec={options.watchdog_sec}", options.watchdog_sec)):
        woken, feedings = measure(options.idle, watchdog)
        total = sum(woken.values())
        print(f"idle over {options.idle:.0f} s {label}: {total} wake-ups ({woken or 'none'}), "
              f"{feedings} WATCHDOG=1", flush=True)


if __name__ == "__main__":
    main()
