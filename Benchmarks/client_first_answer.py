#!/usr/bin/python3
"""From SCNetworkReachabilitySetCallback to the first callback, and the bus messages per reference (run as root).

    swift build -c release
    sudo /usr/bin/python3 Benchmarks/client_first_answer.py [--references 200]

The daemon (``--backend kernel``) runs in a network namespace with a private
system bus; ``system-configuration-example --churn N --host localhost
--address 127.0.0.1`` runs beside it, its system bus the lab's bus: it makes a
host reference and an address reference in turn, sets the callback, schedules
it on a queue, waits for the host's first callback, unschedules and drops it,
N times, then N times more. It prints the time from ``SetCallback`` to the host's first
callback for its first reference (the process's first use: the bus
connection, the choice of daemon or in-process) and the median and 99th
percentile over the host references of the second N.

Three runs: through the daemon with the host watched by nobody else (each
reference's first answer waits for the daemon's lookup of ``localhost``);
through the daemon with the host held by another client (the answer is known
when the reference is made); and in-process (no bus). During the daemon runs
``dbus-monitor`` records every message on the bus; the messages the example's
connection sent or received, per kind and member, are divided by the number of
host references it made (each made beside an address reference).
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "Tests" / "Integration"))
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from harness import MANAGER_IFACE, ROOT_PATH, SERVICE  # noqa: E402
from kernel_flaps import NetnsDaemon  # noqa: E402

NO_BUS = "unix:path=/nonexistent/first-answer-benchmark-bus"
HEADER = re.compile(r"^(method call|method return|signal|error) time=\S+ sender=(\S+) -> destination=(\S+)"
                    r"(?: serial=\d+)?(?: reply_serial=\d+)?(?: path=[^;]*;)?(?: interface=[^;]*;)?"
                    r"(?: member=(\S+))?")


def monitor(address, log):
    """dbus-monitor on the bus, its output to ``log``; returns the process."""
    return subprocess.Popen([harness.need_tool("dbus-monitor"), "--address", address],
                            stdout=open(log, "wb"), stderr=subprocess.DEVNULL)


def unique_name_of(pid, client):
    """The unique bus name of process ``pid`` (the example), from the bus driver."""
    for name in client.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "ListNames")[0]:
        if not name.startswith(":"):
            continue
        try:
            owner = client.call("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                "GetConnectionUnixProcessID", "s", (name,))[0]
        except harness.DBusCallError:
            continue
        if owner == pid:
            return name
    return None


def messages(log, name):
    """``{(kind, member or 'reply'): count}`` of the messages ``name`` sent or received."""
    counts = collections.Counter()
    for line in Path(log).read_text(errors="replace").splitlines():
        match = HEADER.match(line)
        if not match:
            continue
        kind, sender, destination, member = match.groups()
        if name not in (sender, destination):
            continue
        direction = "sent" if sender == name else "received"
        counts[(direction, kind, member or "(reply)")] += 1
    return counts


def churn(example, netns, address, references, env_mode):
    """Runs the example's churn; returns (its words, its pid)."""
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=address)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    env.pop("REACHABILITY_MODE", None)
    if env_mode:
        env["REACHABILITY_MODE"] = env_mode
    process = subprocess.Popen(harness.Namespaces.exec_argv(netns) + [
        str(example), "--churn", str(references), "--host", "localhost", "--address", "127.0.0.1"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    return process


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--references", type=int, default=200,
                        help="N: 2 x N references per run, N of them hosts (default 200)")
    options = parser.parse_args()
    build = REPO / ".build" / "release"
    binary = Path(os.environ.get("REACHABILITYD") or build / "reachabilityd").resolve()
    example = binary.parent / "system-configuration-example"
    if os.geteuid() != 0:
        sys.exit("client_first_answer: needs root (a network namespace)")
    for needed in (binary, example):
        if not os.access(needed, os.X_OK):
            sys.exit(f"client_first_answer: no {needed} (swift build -c release, or set REACHABILITYD)")

    directory = harness.short_tmpdir("reach-first-")
    namespaces = harness.Namespaces()
    bus = harness.PrivateBus(directory, "system")
    daemon = client = None
    try:
        bus.start()
        client = bus.client()
        netns = namespaces.create("first")
        namespaces.ip(netns, "link", "set", "lo", "up")
        daemon = NetnsDaemon(netns, bus.address, directory / "reachabilityd.log",
                             args=["--system", "--backend", "kernel"], binary=binary)
        daemon.start(client)
        print(f"client_first_answer: {2 * options.references} references per run "
              "(host localhost and address 127.0.0.1 in turn); times from SetCallback to the host's first callback")
        for label, shared in (("daemon, host watched by nobody else", False),
                              ("daemon, host held by another client", True)):
            held = None
            if shared:
                held = client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", ("localhost",))[0]
            log = directory / f"monitor-{int(shared)}.log"
            watcher = monitor(bus.address, log)
            time.sleep(0.5)  # dbus-monitor has become a monitor (BecomeMonitor) before the client starts
            process = churn(example, netns, bus.address, options.references, "daemon")
            name = None
            while process.poll() is None and name is None:
                name = unique_name_of(process.pid, client)
                time.sleep(0.005)
            out, err = process.communicate(timeout=600)
            time.sleep(0.5)
            watcher.terminate()
            watcher.wait()
            if held is not None:
                client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (held,))
            report(label, out, err, process.returncode)
            if name is None:
                print("  (the example's bus name was not seen: no message count)")
                continue
            counts = messages(log, name)
            total = sum(counts.values())
            hosts = options.references  # N in each of the two rounds, every other one a host
            print(f"  bus messages of the example's connection: {total} for {hosts} host and {hosts} address "
                  f"references ({total / hosts:.2f} per pair)")
            for (direction, kind, member), count in sorted(counts.items(), key=lambda item: -item[1]):
                print(f"    {direction:<9} {kind:<14} {member:<24} {count:6d}  ({count / hosts:.2f} per pair)")
        out, err, code = in_process(example, netns, options.references)
        report("in-process (no bus)", out, err, code)
    finally:
        if client is not None:
            client.close()
        if daemon is not None:
            daemon.stop()
        bus.stop()
        namespaces.close()


def in_process(example, netns, references):
    process = churn(example, netns, NO_BUS, references, None)
    out, err = process.communicate(timeout=600)
    return out, err, process.returncode


def report(label, out, err, code):
    words = dict(word.split("=", 1) for word in out.split() if "=" in word)
    if code != 0 or "first-callback-us-p50" not in words:
        print(f"  {label}: failed (exit {code})\n{out}\n{err[-2000:]}")
        return
    print(f"  {label}: first reference {int(words['first-us']) / 1000:.2f} ms; later ones "
          f"p50 {int(words['first-callback-us-p50']) / 1000:.3f} ms, "
          f"p99 {int(words['first-callback-us-p99']) / 1000:.3f} ms")


if __name__ == "__main__":
    main()
