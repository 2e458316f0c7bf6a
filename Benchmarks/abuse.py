#!/usr/bin/env python3
"""Abusive clients against the daemon, and what a well-behaved client sees meanwhile (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/abuse.py [--seconds 30]

Three abusers run at once, each its own process and connection:
  * watcher: WatchHost with a fresh name in a tight loop (its limit stops it: TooManyTargets);
  * querier: 100,000 Query calls, 64 in flight (it runs until all are answered);
  * mangler: oversized and malformed calls (1 MiB strings, 100,000-element arrays, wrong
    signatures, a 60-deep variant, unknown members) in a loop.
Meanwhile a second client calls Get(Flags) one at a time. Prints its p50/p99/max, the
errors each abuser got, and the daemon's RSS before, during and after; exits 1 if the
second client's p99 is over 10 ms or the daemon died.
"""

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "Integration"))

import harness  # noqa: E402
from measure import pct, rss_kb  # noqa: E402
from gi.repository import Gio, GLib  # noqa: E402
from harness import MANAGER_IFACE, ROOT_PATH, SERVICE, TARGET_IFACE  # noqa: E402


def connect(address):
    return Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None)


def error_name(error):
    return Gio.DBusError.get_remote_error(error) or f"local:{error.code}"


def call(conn, interface, member, signature, args, errors, timeout=30000):
    try:
        conn.call_sync(SERVICE, ROOT_PATH, interface, member, GLib.Variant(signature, args) if signature else None,
                       None, Gio.DBusCallFlags.NO_AUTO_START, timeout, None)
        errors["ok"] += 1
    except GLib.Error as error:
        errors[error_name(error)] += 1


def watcher(address, deadline):
    conn, errors, i = connect(address), collections.Counter(), 0
    while time.monotonic() < deadline:
        call(conn, MANAGER_IFACE, "WatchHost", "(s)", (f"h{i}.abuse.invalid",), errors)
        i += 1
    return errors


def querier(address, deadline, total=100_000, window=64):
    conn, errors = connect(address), collections.Counter()
    loop = GLib.MainLoop()
    state = {"sent": 0, "pending": 0}

    def done(c, result, _):
        try:
            c.call_finish(result)
            errors["ok"] += 1
        except GLib.Error as error:
            errors[error_name(error)] += 1
        state["pending"] -= 1
        send()

    def send():
        while state["pending"] < window and state["sent"] < total:
            n = state["sent"]
            # Mostly answered at once; every 1,000th an unwatched host name, which waits for its lookup.
            target = "localhost" if n % 1000 == 999 else ["", "127.0.0.1", f"198.51.100.{n % 250}"][n % 3]
            conn.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", GLib.Variant("(s)", (target,)), None,
                      Gio.DBusCallFlags.NO_AUTO_START, 30000, None, done, None)
            state["sent"] += 1
            state["pending"] += 1
        if state["pending"] == 0:
            loop.quit()

    send()
    loop.run()
    errors["sent"] = state["sent"]
    return errors


def mangler(address, deadline):
    conn, errors = connect(address), collections.Counter()
    nested = GLib.Variant("s", "x")
    for _ in range(60):
        nested = GLib.Variant("v", nested)
    calls = [
        (MANAGER_IFACE, "WatchHost", "(s)", ("x" * (1 << 20),)),
        (MANAGER_IFACE, "WatchAddress", "(s)", ("1" * (1 << 20),)),
        (MANAGER_IFACE, "WatchHost", "(as)", (["a"] * 100_000,)),
        (MANAGER_IFACE, "Query", "(ay)", (b"\xff" * 100_000,)),
        (MANAGER_IFACE, "Release", "(o)", ("/" + "a/" * 1000 + "b",)),
        ("org.freedesktop.DBus.Properties", "Set", "(ssv)", (TARGET_IFACE, "Flags", nested)),
        ("org.freedesktop.DBus.Properties", "GetAll", "(s)", ("x" * 100_000,)),
        (MANAGER_IFACE, "NoSuchMethod", "(s)", ("x",)),
        ("org.example.Nope", "Method", "", ()),
    ]
    while time.monotonic() < deadline:
        for interface, member, signature, args in calls:
            call(conn, interface, member, signature, args, errors)
    return errors


ROLES = {"watcher": watcher, "querier": querier, "mangler": mangler}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--role", choices=ROLES)
    parser.add_argument("--address")
    options = parser.parse_args()
    if options.role:
        result = ROLES[options.role](options.address, time.monotonic() + options.seconds)
        print(json.dumps(dict(result)))
        return

    lab = harness.PlainLab().start()
    try:
        daemon = lab.daemon(args=["--system", "--backend", "kernel"])
        rss_before = rss_kb(daemon.pid)
        abusers = {role: subprocess.Popen([sys.executable, __file__, "--role", role, "--address", lab.bus.address,
                                           "--seconds", str(options.seconds)], stdout=subprocess.PIPE, text=True)
                   for role in ROLES}
        times, rss_peak = [], rss_before
        started = time.monotonic()
        while any(p.poll() is None for p in abusers.values()):
            start = time.monotonic()
            lab.client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Flags")
            times.append((time.monotonic() - start) * 1000)
            rss_peak = max(rss_peak, rss_kb(daemon.pid))
        results = {role: json.loads(p.communicate(timeout=120)[0] or "{}") for role, p in abusers.items()}
        alive = daemon.running
        rss_after = rss_kb(daemon.pid)
        print(f"machine: {os.cpu_count()} cores, {os.uname().release}; load {os.getloadavg()[0]:.2f}")
        print(f"second client, Get(Flags) one at a time during {time.monotonic() - started:.0f} s of abuse: "
              f"{len(times)} calls, "
              f"p50 {pct(times, 50):.2f} ms, p99 {pct(times, 99):.2f} ms, max {max(times):.2f} ms")
        for role, errors in results.items():
            print(f"  {role}: {errors}")
        print(f"daemon RSS: {rss_before} KiB before, peak {rss_peak} KiB, {rss_after} KiB after; "
              f"{'alive' if alive else 'DEAD'}")
        ok = alive and pct(times, 99) <= 10
        print("result:", "every goal met" if ok else "GOAL MISSED")
        sys.exit(0 if ok else 1)
    finally:
        for daemon in lab.daemons:
            daemon.stop()
        lab.bus.stop()


if __name__ == "__main__":
    main()
