#!/usr/bin/python3
"""The kernel backend under link flaps (run as root).

    sudo REACHABILITYD=.build/release/reachabilityd /usr/bin/python3 Benchmarks/kernel_flaps.py [--flaps 1000]

Without REACHABILITYD the release build is used (``swift build -c release``
first). The daemon runs with ``--backend kernel`` in network namespace A on
a private system bus; a veth pair joins A (``kveth0``, 192.0.2.10/24, default
route via 192.0.2.1) to namespace B (``kup0``). One flap is ``kup0`` down, then
up: ``kveth0`` loses and regains carrier. The commands go to one long-lived
``ip -n B -force -batch -`` reading stdin, so no process is spawned per flap.
The two ends get different interface indexes (10 and 20): the kernel sends a
veth's carrier loss at once only then (``linkwatch_urgent_event``); with equal
indexes, which two fresh namespaces give, it waits up to 1 s.

For every edge (down: we expect StatusChanged(0, 0); up: (2, Reachable)) it
prints the latency to our root StatusChanged, received by a client on the bus:

  * from the command: time of writing the ``ip link set`` line to the batch
    ``ip`` (includes ``ip`` parsing it and the kernel applying it);
  * from the kernel event: time at which an rtnetlink socket in namespace A
    (RTNLGRP_LINK), read by a small helper process blocked in recv() (one
    process for the whole run, started with ``ip netns exec A``), received
    the first RTM_NEWLINK for ``kveth0`` whose state changes usability
    (IFF_UP, IFF_LOWER_UP, operstate up/unknown): the message the daemon's
    monitor acts on. Netlink sockets carry no kernel time stamp, so this is
    the receive time in user space (CLOCK_MONOTONIC, which the benchmark
    shares), microseconds after the kernel sent it.

Then route and rule flaps (``--route-flaps``, default a fifth of ``--flaps``),
sent to a second batch ``ip`` in namespace A: the default route deleted and
added back, and a rule sending everything to a table whose default route is
``unreachable`` added and deleted. For those it prints the latency from the
command to our root StatusChanged and the daemon's own evaluation time after
each event (from its ``--verbose`` log: "evaluated N targets in X ms"), which
is the internet target's re-evaluation: the kernel's route lookups for its
destinations, no dump.

Then the events that move the kernel's answer without a route event
(``--events`` ``neighbour`` and ``netconf``, on by default), with a second
uplink ``kveth1`` (198.51.100.10/24, gateway 198.51.100.1):

  * neighbour: two default routes of one metric; kveth0's gateway's neighbour
    entry set ``failed`` (the kernel prefers kveth1's gateway) and back to
    ``reachable``; latency from the command to the root ``PropertiesChanged``
    carrying the new Interface (Flags do not change, so no StatusChanged);
  * netconf: kveth1's default route (metric 50) without carrier, and
    ``ignore_routes_with_linkdown`` switched on (reachable through kveth0) and
    off (not reachable) through a shell in namespace A; latency to StatusChanged;
  * for both, the daemon's own evaluation time after each event (budget: p99
    ≤ 5 ms);
  * 1,000 neighbour updates of addresses that are no gateway, then one route
    event as a sentinel: the evaluations counted between (budget: none beyond
    the sentinel's).

The benchmark's client holds the path object (``Manager.WatchPath``; skip
with ``--no-path``) for the whole run, so the daemon also evaluates the Path
interface after each event. For every link edge it prints the latency from
the kernel event to the Path ``PropertiesChanged`` carrying the new Flags
(emitted after StatusChanged, in the same evaluation) and the daemon's own
path evaluation time (its log: "path evaluated in X ms": the bound route
lookups for every link and the resolver file).

It also counts StatusChanged and Path PropertiesChanged per edge (each must
be exactly 1), reads the daemon's RSS before the first flap and after the
last, with the path object held (budget: growth ≤ 1 MiB), and counts its
wake-ups over ``--idle`` seconds after the last (budget: none).

``reachctl metrics --textfile`` runs beside the client for the whole run
(skip with ``--no-textfile``), keeping a node_exporter textfile: for every
link edge it prints the time from our StatusChanged (and from the kernel
event) to the file's replacement (its rename into place, seen by an inotify
helper process: IN_MOVED_TO), the replacements per edge, and the
replacements over the idle time (budget: none; ``--idle 60`` for the
issue's minute).
"""

import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "Integration"))

import harness  # noqa: E402
from measure import idle_wakeups, pct, rss_kb, thread_switches  # noqa: E402
from harness import MANAGER_IFACE, PROPERTIES_IFACE, REACHABLE, ROOT_PATH, TARGET_IFACE  # noqa: E402

UPLINK, UPLINK_PEER = "kveth0", "kup0"
UPLINK_V4, GATEWAY_V4 = "192.0.2.10", "192.0.2.1"
SECOND, SECOND_PEER = "kveth1", "kup1"
SECOND_V4, SECOND_GATEWAY_V4 = "198.51.100.10", "198.51.100.1"
PATH_PATH = ROOT_PATH + "/path"
PATH_IFACE = harness.SERVICE + ".Path"
RSS_BUDGET_KB = 1024

# Run in namespace A (``ip netns exec``): prints "ready", then "MONOTONIC_NS USABLE" for every
# RTM_NEWLINK of the interface index argv[1]. A process of its own, so that nothing in the
# benchmark's interpreter (its lock, its main loop) delays the time stamp.
LINK_STAMPER = r"""
import socket, struct, sys, time
RTMGRP_LINK, RTM_NEWLINK, IFLA_OPERSTATE = 1, 16, 16
IFF_UP, IFF_LOWER_UP = 0x1, 0x10000
index = int(sys.argv[1])
sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0)  # NETLINK_ROUTE
sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
sock.bind((0, RTMGRP_LINK))
print("ready", flush=True)
while True:
    try:
        data = sock.recv(65536)
    except OSError:  # ENOBUFS: events were dropped
        print("overrun", flush=True)
        continue
    now = time.monotonic_ns()
    offset, out = 0, []
    while offset + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, offset)
        if length < 16:
            break
        if kind == RTM_NEWLINK and length >= 32:
            _family, _type, ifindex, flags, _change = struct.unpack_from("=BxHiII", data, offset + 16)
            if ifindex == index:
                operstate, attr, end = 0, offset + 32, offset + length
                while attr + 4 <= end:
                    attr_length, attr_type = struct.unpack_from("=HH", data, attr)
                    if attr_length < 4:
                        break
                    if attr_type & 0x3FFF == IFLA_OPERSTATE and attr_length >= 5:
                        operstate = data[attr + 4]
                    attr += (attr_length + 3) & ~3
                usable = bool(flags & IFF_UP and flags & IFF_LOWER_UP and operstate in (0, 6))  # unknown, up
                out.append(f"{now} {int(usable)}")
        offset += (length + 3) & ~3
    if out:
        print("\n".join(out), flush=True)
"""


# Run with the textfile's directory and name: prints "ready", then "MONOTONIC_NS" each time a
# file of that name is renamed into the directory (inotify IN_MOVED_TO): one line per replacement.
TEXTFILE_STAMPER = r"""
import ctypes, os, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
if fd < 0 or libc.inotify_add_watch(fd, sys.argv[1].encode(), 0x80) < 0:  # IN_MOVED_TO
    sys.exit("inotify: errno %d" % ctypes.get_errno())
name = sys.argv[2].encode()
print("ready", flush=True)
while True:
    data = os.read(fd, 65536)
    now = time.monotonic_ns()
    offset = 0
    while offset + 16 <= len(data):
        _wd, _mask, _cookie, length = struct.unpack_from("iIII", data, offset)
        if data[offset + 16:offset + 16 + length].rstrip(b"\0") == name:
            print(now, flush=True)
        offset += 16 + length
"""


class TextfileWrites:
    """Each replacement of a file (renamed into place), as a separate process saw it: ``times`` is
    a list of CLOCK_MONOTONIC seconds."""

    def __init__(self, path: Path, directory: Path):
        self.process = harness.Process("textfile stamper", [sys.executable, "-c", TEXTFILE_STAMPER, path.parent,
                                                            path.name], directory / "textfile-stamper.log",
                                       stdout_pipe=True)
        if (harness.read_line(self.process.popen.stdout, 10) or "").strip() != "ready":
            raise harness.HarnessError(f"the inotify stamper did not start:\n{harness.tail(self.process.log)}")
        self.times = []
        self.thread = threading.Thread(target=self._read, name="textfile-stamper", daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.process.popen.stdout:
            if line.strip().isdigit():
                self.times.append(int(line) / 1e9)

    def first_after(self, start, timeout=0.5):
        deadline = time.monotonic() + timeout
        while True:
            found = next((t for t in self.times if t >= start), None)
            if found is not None or time.monotonic() > deadline:
                return found
            time.sleep(0.0002)

    def close(self):
        self.process.stop()


class IpBatch:
    """A long-lived ``ip -n NAMESPACE -force -batch -``: one line a command, no process spawned per event."""

    def __init__(self, namespace: str, log: Path):
        with open(log, "w") as errors:
            self.process = subprocess.Popen([harness.need_tool("ip"), "-n", namespace, "-force", "-batch", "-"],
                                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors,
                                            text=True, bufsize=1)

    def command(self, line: str) -> None:
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def close(self) -> None:
        """Ends the batch (end of input), killing it by PID if it does not finish."""
        self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class ShellBatch(IpBatch):
    """A long-lived ``/bin/sh`` in a namespace reading commands from stdin (sysctl writes)."""

    def __init__(self, namespace: str, log: Path):  # pylint: disable=super-init-not-called
        with open(log, "w") as errors:
            self.process = subprocess.Popen(harness.Namespaces.exec_argv(namespace) + ["/bin/sh"],
                                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=errors,
                                            text=True, bufsize=1)


class LinkEvents:
    """The RTM_NEWLINK messages of one interface in a namespace, as a separate process
    received them: ``events`` is a list of ``(CLOCK_MONOTONIC seconds, usable)``."""

    def __init__(self, netns, ifindex, directory):
        # Real-time priority (chrt, util-linux): it runs as soon as the message is there.
        chrt = harness.tool("chrt")
        priority = [chrt, "--fifo", "10"] if chrt else []
        self.process = harness.Process(
            "link stamper",
            priority + harness.Namespaces.exec_argv(netns) + [sys.executable, "-c", LINK_STAMPER, ifindex],
            directory / "link-stamper.log", stdout_pipe=True)
        if (harness.read_line(self.process.popen.stdout, 10) or "").strip() != "ready":
            raise harness.HarnessError(f"the netlink stamper did not start:\n{harness.tail(self.process.log)}")
        self.events = []
        self.cursor = 0  # events before it are older than every edge still to come
        self.overruns = 0
        self.thread = threading.Thread(target=self._read, name="link-stamper", daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.process.popen.stdout:
            words = line.split()
            if words == [b"overrun"]:
                self.overruns += 1
            elif len(words) == 2:
                self.events.append((int(words[0]) / 1e9, words[1] == b"1"))

    def first_after(self, start, usable, timeout=0.5):
        """Time of the first event after ``start`` with this usability, waiting up to ``timeout``
        for the stamper's line to arrive (None if none came)."""
        deadline = time.monotonic() + timeout
        while True:
            while self.cursor < len(self.events) and self.events[self.cursor][0] < start:
                self.cursor += 1
            for when, state in self.events[self.cursor:]:
                if state == usable:
                    return when
            if time.monotonic() > deadline:
                return None
            time.sleep(0.0002)

    def close(self):
        self.process.stop()


class NetnsDaemon(harness.Daemon):
    """reachabilityd started with ``ip netns exec NS`` (which execs it: the PID is the daemon's)."""

    def __init__(self, netns, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.netns = netns

    def argv(self):
        return harness.Namespaces.exec_argv(self.netns) + [str(self.binary)] + self.args


def thread_name(pid, tid):
    """A thread's name (``/proc/PID/task/TID/comm``), or "?" once it has gone."""
    try:
        return Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except OSError:
        return "?"


def row(name, values):
    return (f"  {name:<34} p50 {statistics.median(values):7.3f}   p99 {pct(values, 99):7.3f}   "
            f"min {min(values):7.3f}   max {max(values):7.3f}")


def evaluation_times(log, offset, pattern=r"evaluated \d+ targets in ([\d.]+) ms"):
    """The daemon's own evaluation times (ms) logged from byte ``offset`` of its log on."""
    with open(log, "rb") as f:
        f.seek(offset)
        text = f.read().decode(errors="replace")
    return [float(ms) for ms in re.findall(pattern, text)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flaps", type=int, default=1000, help="down/up cycles (default 1000)")
    parser.add_argument("--route-flaps", type=int, default=None,
                        help="route and rule down/up cycles each (default: a fifth of --flaps)")
    parser.add_argument("--events", default="route,rule,neighbour,netconf",
                        help="which of route,rule,neighbour,netconf to flap after the links (default all)")
    parser.add_argument("--no-path", dest="path", action="store_false",
                        help="do not hold the path object (Manager.WatchPath)")
    parser.add_argument("--no-textfile", dest="textfile", action="store_false",
                        help="do not run reachctl metrics --textfile beside the client")
    parser.add_argument("--idle", type=float, default=10,
                        help="seconds of idle after the flaps, wake-ups counted (default 10)")
    options = parser.parse_args()
    route_flaps = options.route_flaps if options.route_flaps is not None else max(1, options.flaps // 5)
    binary = Path(os.environ.get("REACHABILITYD") or REPO / ".build" / "release" / "reachabilityd").resolve()
    if os.geteuid() != 0:
        sys.exit("kernel_flaps: needs root (network namespaces)")
    if not os.access(binary, os.X_OK):
        sys.exit(f"kernel_flaps: no daemon at {binary} (swift build -c release, or set REACHABILITYD)")

    directory = harness.short_tmpdir("reach-flaps-")
    namespaces = harness.Namespaces()
    bus = harness.PrivateBus(directory, "system")
    daemon = batch = batch_a = shell_a = link_events = client = textfile = writes = None
    try:
        bus.start()
        client = bus.client()
        ns_a, ns_b = namespaces.create("kern"), namespaces.create("kup")
        for key in ("net.ipv6.conf.all.accept_dad", "net.ipv6.conf.default.accept_dad"):
            namespaces.sysctl(ns_a, key, "0")
        # Distinct interface indexes: the kernel delays (up to 1 s) the carrier-loss event of a
        # veth whose index equals its peer's (linkwatch_urgent_event), which two fresh namespaces give.
        harness.run([harness.need_tool("ip"), "link", "add", UPLINK, "index", "10", "netns", ns_a, "type", "veth",
                     "peer", "name", UPLINK_PEER, "index", "20", "netns", ns_b])
        namespaces.ip(ns_b, "addr", "add", f"{GATEWAY_V4}/24", "dev", UPLINK_PEER)
        namespaces.ip(ns_a, "addr", "add", f"{UPLINK_V4}/24", "dev", UPLINK)
        namespaces.ip(ns_a, "link", "set", UPLINK, "up")
        namespaces.ip(ns_a, "route", "add", "default", "via", GATEWAY_V4, "dev", UPLINK, "metric", "100")
        ifindex = int(namespaces.ip(ns_a, "-o", "link", "show", UPLINK).stdout.split(":")[0])
        link_events = LinkEvents(ns_a, ifindex, directory)

        statuses = []  # (monotonic time, (status, flags))
        client.conn.signal_subscribe(None, TARGET_IFACE, "StatusChanged", ROOT_PATH, None, 0,
                                     lambda *a: statuses.append((time.monotonic(), tuple(a[5].unpack()))))
        paths = []  # (monotonic time, Flags or None) of each Path PropertiesChanged
        interfaces = []  # (monotonic time, Interface) of each root Target PropertiesChanged carrying it

        def target_changed(*args):
            interface, changed, _invalidated = args[5].unpack()
            if interface == TARGET_IFACE and "Interface" in changed:
                interfaces.append((time.monotonic(), changed["Interface"]))
        client.conn.signal_subscribe(None, PROPERTIES_IFACE, "PropertiesChanged", ROOT_PATH, None, 0, target_changed)

        def path_changed(*args):
            interface, changed, _invalidated = args[5].unpack()
            if interface == PATH_IFACE:
                paths.append((time.monotonic(), changed.get("Flags")))
        client.conn.signal_subscribe(None, PROPERTIES_IFACE, "PropertiesChanged", PATH_PATH, None, 0, path_changed)
        recorder = harness.SignalRecorder(client)
        daemon = NetnsDaemon(ns_a, bus.address, directory / "reachabilityd.log",
                             args=["--system", "--backend", "kernel", "--verbose"], binary=binary)
        daemon.start(client)
        recorder.sync()
        batch = IpBatch(ns_b, directory / "ip-batch.log")
        command = batch.command

        # The daemon starts before kveth0 has carrier: its first answer follows a kernel event,
        # whatever it does at start-up.
        command(f"link set {UPLINK_PEER} up")
        recorder.wait_props({"Backend": "kernel"}, "Backend kernel", interface=MANAGER_IFACE)
        recorder.wait_answer({"Flags": REACHABLE, "Status": 2, "Interface": UPLINK}, "the connected answer",
                             mark=harness.Mark(0, {"Status": harness.STATUS_UNKNOWN, "Flags": 0}))
        recorder.close()
        if options.path:
            client.call(harness.SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath")
            client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
            harness.pump()
        if options.textfile:
            prom = directory / "reachability.prom"
            writes = TextfileWrites(prom, directory)
            # --liveness at its maximum: the idle window counts the writes changes cause (the
            # writer's own once-a-minute liveness rewrite is not one of them).
            textfile = harness.Process("reachctl", [binary.parent / "reachctl", "metrics", "--textfile", prom,
                                                    "--liveness", "86400"],
                                       directory / "reachctl.log",
                                       env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                                            "DBUS_SYSTEM_BUS_ADDRESS": bus.address})
            harness.wait_until(lambda: writes.times or not textfile.running, 10, "the first textfile",
                               lambda: harness.tail(textfile.log, 20), poll=0.01)
        path_log_start = daemon.log.stat().st_size
        rss_before = rss_kb(daemon.pid)

        edges = {False: ("down", (0, 0)), True: ("up", (2, REACHABLE))}
        from_command = {False: [], True: []}
        from_kernel = {False: [], True: []}
        path_from_kernel = {False: [], True: []}
        textfile_from_status = {False: [], True: []}
        textfile_from_kernel = {False: [], True: []}
        textfile_windows = []  # per link edge: the number of replacements before its command
        missing_textfile = 0
        path_windows = []  # per link edge: the index of the first Path change after its command
        missing_kernel = 0
        started = time.monotonic()
        windows = []  # per edge: the index of the first StatusChanged that came after its command
        for flap in range(options.flaps):
            for up in (False, True):
                word, expected = edges[up]
                first = len(statuses)
                first_path = len(paths)
                if writes is not None:
                    textfile_windows.append(len(writes.times))
                sent = time.monotonic()
                command(f"link set {UPLINK_PEER} {word}")
                found = harness.wait_until(
                    lambda: next((t for t, s in statuses[first:] if s == expected), None), 10,
                    f"flap {flap + 1} {word}: StatusChanged{expected}",
                    lambda: f"  StatusChanged since: {[s for _, s in statuses[first:]]}\n"
                            f"  daemon log:\n{harness.tail(daemon.log, 20)}")
                windows.append(first)
                from_command[up].append((found - sent) * 1000)
                found_path = None
                if options.path:
                    path_windows.append(first_path)
                    found_path = harness.wait_until(
                        lambda: next((t for t, f in paths[first_path:] if f == expected[1]), None), 10,
                        f"flap {flap + 1} {word}: Path Flags {expected[1]}",
                        lambda: f"  Path changes since: {paths[first_path:]}\n"
                                f"  daemon log:\n{harness.tail(daemon.log, 20)}")
                kernel = link_events.first_after(sent, up)
                if kernel is None or kernel > found:
                    missing_kernel += 1  # none, or stamped after our signal arrived: the stamper ran late
                else:
                    from_kernel[up].append((found - kernel) * 1000)
                    if found_path is not None:
                        path_from_kernel[up].append((found_path - kernel) * 1000)
                if writes is not None:
                    written = writes.first_after(sent)
                    if written is None:
                        missing_textfile += 1
                    else:
                        textfile_from_status[up].append((written - found) * 1000)
                        if kernel is not None and kernel <= written:
                            textfile_from_kernel[up].append((written - kernel) * 1000)
        elapsed = time.monotonic() - started
        carrier_evaluations = evaluation_times(daemon.log, 0)
        path_evaluations = evaluation_times(daemon.log, path_log_start, r"path evaluated in ([\d.]+) ms")
        client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
        harness.pump()
        path_windows.append(len(paths))
        path_per_edge = [path_windows[i + 1] - path_windows[i] for i in range(len(path_windows) - 1)]
        if writes is not None:
            time.sleep(0.05)  # the last edge's replacement
            textfile_windows.append(len(writes.times))
        textfile_per_edge = [textfile_windows[i + 1] - textfile_windows[i] for i in range(len(textfile_windows) - 1)]

        # Route and rule events, sent to namespace A.
        batch_a = IpBatch(ns_a, directory / "ip-batch-a.log")
        command_a = batch_a.command

        phases = {
            "route": (f"route del default via {GATEWAY_V4} dev {UPLINK}",
                      f"route add default via {GATEWAY_V4} dev {UPLINK} metric 100"),
            "rule": ("rule add pref 100 lookup 100", "rule del pref 100"),
        }
        phases = {name: phase for name, phase in phases.items() if name in options.events.split(",")}
        route_latency, route_evaluations = {}, {}
        for name, (down_command, up_command) in phases.items():
            if name == "rule":  # the table the rule selects: nothing gets out through it
                namespaces.ip(ns_a, "route", "add", "unreachable", "default", "table", "100")
            client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
            log_start = daemon.log.stat().st_size
            route_latency[name] = {False: [], True: []}
            for flap in range(route_flaps):
                for up, line in ((False, down_command), (True, up_command)):
                    word, expected = edges[up]
                    first = len(statuses)
                    sent = time.monotonic()
                    command_a(line)
                    found = harness.wait_until(
                        lambda: next((t for t, s in statuses[first:] if s == expected), None), 10,
                        f"{name} flap {flap + 1} {word}: StatusChanged{expected}",
                        lambda: f"  StatusChanged since: {[s for _, s in statuses[first:]]}\n"
                                f"  daemon log:\n{harness.tail(daemon.log, 20)}")
                    windows.append(first)
                    route_latency[name][up].append((found - sent) * 1000)
            client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
            route_evaluations[name] = evaluation_times(daemon.log, log_start)

        # Events that move the kernel's answer without a route event, over a second uplink.
        quiet_phases = [name for name in ("neighbour", "netconf") if name in options.events.split(",")]
        quiet_latency, quiet_evaluations, unrelated = {}, {}, None
        if quiet_phases:
            harness.run([harness.need_tool("ip"), "link", "add", SECOND, "index", "30", "netns", ns_a, "type",
                         "veth", "peer", "name", SECOND_PEER, "index", "40", "netns", ns_b])
            namespaces.ip(ns_b, "addr", "add", f"{SECOND_GATEWAY_V4}/24", "dev", SECOND_PEER)
            namespaces.ip(ns_b, "link", "set", SECOND_PEER, "up")
            namespaces.ip(ns_a, "addr", "add", f"{SECOND_V4}/24", "dev", SECOND)
            namespaces.ip(ns_a, "link", "set", SECOND, "up")
            shell_a = ShellBatch(ns_a, directory / "shell-a.log")
        gateway_lladdr = "02:00:00:00:01:01"
        ignore = f"/proc/sys/net/ipv4/conf/{SECOND}/ignore_routes_with_linkdown"
        for name in quiet_phases:
            if name == "neighbour":
                namespaces.ip(ns_a, "route", "append", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND,
                              "metric", "100")
                namespaces.ip(ns_a, "neigh", "replace", GATEWAY_V4, "dev", UPLINK, "lladdr", gateway_lladdr,
                              "nud", "reachable")
                steps = ((lambda: command_a(f"neigh replace {GATEWAY_V4} dev {UPLINK} nud failed"), SECOND),
                         (lambda: command_a(f"neigh replace {GATEWAY_V4} dev {UPLINK} lladdr {gateway_lladdr} "
                                            "nud reachable"), UPLINK))
            else:
                # kveth1 preferred, then without carrier: one edge of its own (not reachable).
                first = len(statuses)
                namespaces.ip(ns_a, "route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "metric", "50")
                namespaces.ip(ns_b, "link", "set", SECOND_PEER, "down")
                harness.wait_until(lambda: (0, 0) in [v for _, v in statuses[first:]], 10,
                                   "not reachable through kveth1 without carrier", lambda: harness.tail(daemon.log, 20))
                windows.append(first)
                steps = ((lambda: shell_a.command(f"echo 1 > {ignore}"), (2, REACHABLE)),
                         (lambda: shell_a.command(f"echo 0 > {ignore}"), (0, 0)))
            client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
            harness.pump()
            log_start = daemon.log.stat().st_size
            quiet_latency[name] = []
            for flap in range(route_flaps):
                for send, expected in steps:
                    watched = interfaces if name == "neighbour" else statuses
                    first = len(watched)
                    sent = time.monotonic()
                    send()
                    found = harness.wait_until(
                        lambda: next((t for t, v in watched[first:] if v == expected), None), 10,
                        f"{name} flap {flap + 1}: {expected}",
                        lambda: f"  changes since: {[v for _, v in watched[first:]]}\n"
                                f"  daemon log:\n{harness.tail(daemon.log, 20)}")
                    if name == "netconf":
                        windows.append(first)
                    quiet_latency[name].append((found - sent) * 1000)
            client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
            quiet_evaluations[name] = evaluation_times(daemon.log, log_start)
            if name == "neighbour":
                namespaces.ip(ns_a, "route", "del", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND)
        if quiet_phases:
            # A thousand neighbour updates of addresses that are no gateway, then a sentinel route event.
            client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
            before = len(evaluation_times(daemon.log, 0))
            for i in range(1000):
                command_a(f"neigh replace 192.0.2.{100 + i % 100} dev {UPLINK} lladdr "
                          f"02:00:00:00:{i // 100:02x}:{i % 100:02x} nud reachable")
            command_a(f"route add 203.0.113.128/25 via {GATEWAY_V4} dev {UPLINK}")
            harness.wait_until(lambda: len(evaluation_times(daemon.log, 0)) > before, 10,
                               "the sentinel route's evaluation", lambda: harness.tail(daemon.log, 20), poll=0.01)
            client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
            unrelated = len(evaluation_times(daemon.log, 0)) - before

        # Every signal the daemon sent before answering a ping has arrived when it returns.
        client.call(harness.SERVICE, ROOT_PATH, harness.PEER_IFACE, "Ping")
        harness.pump()
        windows.append(len(statuses))
        per_edge = [windows[i + 1] - windows[i] for i in range(len(windows) - 1)]
        rss_after = rss_kb(daemon.pid)
        growth = rss_after - rss_before
        # Per thread: a thread that ends in the window takes its count with it (the sum once went
        # negative, -7, and run.py dropped the row); it counts one wake-up, as one that starts.
        idle_before = thread_switches(daemon.pid)
        names = {tid: thread_name(daemon.pid, tid) for tid in idle_before}
        writes_before = len(writes.times) if writes is not None else 0
        reachctl_before = thread_switches(textfile.pid) if textfile is not None else {}
        time.sleep(options.idle)
        idle_after = thread_switches(daemon.pid)
        idle_switches = idle_wakeups(idle_before, idle_after)
        ended = sorted(names[tid] for tid in idle_before.keys() - idle_after.keys())
        idle_threads = (f"; threads ended {len(ended)}{' (' + ', '.join(ended) + ')' if ended else ''}, started "
                        f"{len(idle_after.keys() - idle_before.keys())}")
        idle_writes = len(writes.times) - writes_before if writes is not None else 0
        reachctl_switches = idle_wakeups(reachctl_before, thread_switches(textfile.pid)) if textfile else 0

        print(f"machine: {os.cpu_count()} cores, {os.uname().release}; daemon {binary}")
        print(f"{options.flaps} flaps ({2 * options.flaps} edges) in {elapsed:.1f} s; latency to our root "
              "StatusChanged, ms:")
        for up in (False, True):
            word, expected = edges[up]
            print(row(f"{word:<4} {expected} from the ip command", from_command[up]))
            if from_kernel[up]:
                print(row(f"{word:<4} {expected} from RTM_NEWLINK", from_kernel[up]))
        if missing_kernel or link_events.overruns:
            print(f"  (no usable RTM_NEWLINK time stamp for {missing_kernel} edges: none, or the stamper ran "
                  f"after our signal arrived; {link_events.overruns} netlink overruns)")
        if carrier_evaluations:
            print(row("daemon's evaluation after a link event", carrier_evaluations))
        if options.path:
            print("latency to the Path PropertiesChanged carrying the new Flags, ms:")
            for up in (False, True):
                word, expected = edges[up]
                if path_from_kernel[up]:
                    print(row(f"{word:<4} Path from RTM_NEWLINK", path_from_kernel[up]))
            if path_evaluations:
                print(row("daemon's path evaluation", path_evaluations))
            print(f"  Path PropertiesChanged per link edge: min {min(path_per_edge)}, max {max(path_per_edge)}")
        if writes is not None:
            print("latency to the textfile's replacement (reachctl metrics --textfile; rename seen by inotify), ms:")
            for up in (False, True):
                word, _expected = edges[up]
                if textfile_from_status[up]:
                    print(row(f"{word:<4} textfile from StatusChanged", textfile_from_status[up]))
                if textfile_from_kernel[up]:
                    print(row(f"{word:<4} textfile from RTM_NEWLINK", textfile_from_kernel[up]))
            print(f"  textfile replacements per link edge: min {min(textfile_per_edge)}, "
                  f"max {max(textfile_per_edge)}; none within 0.5 s for {missing_textfile} edges")
        for name, (down_command, up_command) in phases.items():
            print(f"{route_flaps} {name} flaps ({down_command!r} / {up_command!r}); latency to our root "
                  "StatusChanged, ms:")
            for up in (False, True):
                word, expected = edges[up]
                print(row(f"{word:<4} {expected} from the ip command", route_latency[name][up]))
            if route_evaluations[name]:
                print(row(f"daemon's evaluation after a {name} event", route_evaluations[name]))
        for name in quiet_phases:
            what = "root PropertiesChanged(Interface)" if name == "neighbour" else "root StatusChanged"
            print(f"{route_flaps} {name} flaps; latency from the command to our {what}, ms:")
            print(row("both edges", quiet_latency[name]))
            if quiet_evaluations[name]:
                budget = "ok" if pct(quiet_evaluations[name], 99) <= 5 else "OVER BUDGET"
                print(row(f"daemon's evaluation after a {name} event", quiet_evaluations[name])
                      + f"   (budget p99 5 ms: {budget})")
        if unrelated is not None:
            print(f"1000 neighbour updates of other addresses, then one route event: {unrelated} evaluations "
                  "(the route event's; budget: none for the neighbours)")
        exact = sum(1 for n in per_edge if n == 1)
        print(f"  StatusChanged per edge: min {min(per_edge)}, max {max(per_edge)}; exactly 1 for "
              f"{exact}/{len(per_edge)} edges")
        verdict = "ok" if growth <= RSS_BUDGET_KB else "OVER BUDGET"
        print(f"RSS: {rss_before / 1024:.2f} MiB before, {rss_after / 1024:.2f} MiB after; growth "
              f"{growth} KiB (budget {RSS_BUDGET_KB} KiB: {verdict})")
        path_exact = all(n == 1 for n in path_per_edge)
        held = " with the path object held" if options.path else ""
        print(f"idle over {options.idle:.0f} s after the flaps{held}: {idle_switches} context switches "
              f"(all threads); RSS {rss_after / 1024:.2f} MiB{idle_threads}")
        if textfile is not None:
            print(f"textfile over the same {options.idle:.0f} s idle: {idle_writes} replacements; reachctl "
                  f"{reachctl_switches} context switches (all threads; a thread started or ended counts one)")
        textfile_late = writes is not None and (missing_textfile or not textfile.running)
        failed = (exact != len(per_edge) or growth > RSS_BUDGET_KB or not daemon.running or not path_exact
                  or textfile_late or idle_writes or (unrelated is not None and unrelated > 2))
        return 1 if failed else 0
    finally:
        for each in (shell_a, batch_a, batch):
            if each is not None:
                each.close()
        if link_events is not None:
            link_events.close()
        if textfile is not None:
            textfile.stop()
        if writes is not None:
            writes.close()
        if daemon is not None:
            daemon.stop()
        if client is not None:
            client.close()
        bus.stop()
        namespaces.close()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
