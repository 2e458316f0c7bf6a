#!/usr/bin/python3
"""From a kernel link event to NWPathMonitor's pathUpdateHandler, or to an SCNetworkReachability callback (run as root).

    swift build -c release
    sudo /usr/bin/python3 Benchmarks/path_handler_latency.py [--flaps 200] [--client path|sc]

The kernel lab of kernel_flaps.py: the daemon (``--backend kernel``) in
network namespace A on a private system bus, ``kveth0`` joined to ``kup0`` in
namespace B; one flap is ``kup0`` down, then up, sent to a long-lived batch
``ip``. ``network-path-example`` runs in A, once with the lab's bus as its
system bus (the daemon's Path object) and once with no bus (the engine
in-process); its pathUpdateHandler prints one line per path, on the main
queue. For every edge the latency is measured from the kernel event (the
receive time of the first RTM_NEWLINK for ``kveth0`` whose usability changed,
stamped by kernel_flaps.py's netlink helper process) to the time this script
read the handler's line from the example's pipe (a reader thread stamps it:
the figure includes the pipe and the reader's wake-up, so it is an upper
bound). The budget is 5 ms at p99.

With ``--client sc`` the program is ``system-configuration-example`` (Apple's
Reachability sample on the SystemConfiguration product): the latency is from the
same RTM_NEWLINK to the line its internet reference's callback prints, on the
callback's dispatch queue.
"""

import argparse
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "Tests" / "Integration"))
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from kernel_flaps import IpBatch, LinkEvents, NetnsDaemon  # noqa: E402
from measure import pct  # noqa: E402
from harness import MANAGER_IFACE, REACHABLE  # noqa: E402

UPLINK, UPLINK_PEER = "kveth0", "kup0"
UPLINK_V4, GATEWAY_V4 = "192.0.2.10", "192.0.2.1"
BUDGET_MS = 5.0
NO_BUS = "unix:path=/nonexistent/path-benchmark-bus"


class Example:
    """network-path-example (or system-configuration-example) in namespace A; ``lines`` queues
    (arrival time, status) of its handler lines (or its internet callback's, as a path status)."""

    def __init__(self, netns, binary, bus_address, log):
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=bus_address)
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        with open(log, "ab") as errors:
            self.popen = subprocess.Popen(harness.Namespaces.exec_argv(netns) + [str(binary)],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors, env=env,
                                          bufsize=0)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.popen.stdout:
            now = time.monotonic()
            words = line.split()
            if words and words[0] == b"handler":
                self.lines.put((now, words[1].decode()))
            elif words[:2] in ([b"callback", b"internet"], [b"start", b"internet"]):
                self.lines.put((now, "unsatisfied" if words[3] == b"status=0" else "satisfied"))

    def wait(self, status, timeout=10):
        """The arrival time of the next handler line with ``status``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                when, seen = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise harness.WaitTimeout(f"no handler line '{status}' within {timeout} s") from None
            if seen == status:
                return when

    def stop(self):
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def row(name, values):
    return (f"  {name:<40} p50 {statistics.median(values):7.3f}   p99 {pct(values, 99):7.3f}   "
            f"min {min(values):7.3f}   max {max(values):7.3f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flaps", type=int, default=200, help="down/up cycles per mode (default 200)")
    parser.add_argument("--client", choices=("path", "sc"), default="path",
                        help="NWPathMonitor's handler (default) or an SCNetworkReachability callback")
    options = parser.parse_args()
    build = REPO / ".build" / "release"
    binary = Path(os.environ.get("REACHABILITYD") or build / "reachabilityd").resolve()
    example = binary.parent / ("network-path-example" if options.client == "path" else "system-configuration-example")
    receiver = "the pathUpdateHandler's line" if options.client == "path" else "the SCNetworkReachability callback's line"
    if os.geteuid() != 0:
        sys.exit("path_handler_latency: needs root (network namespaces)")
    for needed in (binary, example):
        if not os.access(needed, os.X_OK):
            sys.exit(f"path_handler_latency: no {needed} (swift build -c release, or set REACHABILITYD)")

    directory = harness.short_tmpdir("reach-pathlat-")
    namespaces = harness.Namespaces()
    bus = harness.PrivateBus(directory, "system")
    daemon = batch = link_events = client = None
    results = {}
    try:
        bus.start()
        client = bus.client()
        ns_a, ns_b = namespaces.create("kern"), namespaces.create("kup")
        # Distinct interface indexes: see kernel_flaps.py (linkwatch_urgent_event).
        harness.run([harness.need_tool("ip"), "link", "add", UPLINK, "index", "10", "netns", ns_a, "type", "veth",
                     "peer", "name", UPLINK_PEER, "index", "20", "netns", ns_b])
        namespaces.ip(ns_b, "addr", "add", f"{GATEWAY_V4}/24", "dev", UPLINK_PEER)
        namespaces.ip(ns_b, "link", "set", UPLINK_PEER, "up")
        namespaces.ip(ns_a, "addr", "add", f"{UPLINK_V4}/24", "dev", UPLINK)
        namespaces.ip(ns_a, "link", "set", UPLINK, "up")
        namespaces.ip(ns_a, "route", "add", "default", "via", GATEWAY_V4, "dev", UPLINK, "metric", "100")
        ifindex = int(namespaces.ip(ns_a, "-o", "link", "show", UPLINK).stdout.split(":")[0])
        link_events = LinkEvents(ns_a, str(ifindex), directory)

        recorder = harness.SignalRecorder(client)
        daemon = NetnsDaemon(ns_a, bus.address, directory / "reachabilityd.log",
                             args=["--system", "--backend", "kernel"], binary=binary)
        daemon.start(client)
        recorder.sync()
        recorder.wait_props({"Backend": "kernel"}, "Backend kernel", interface=MANAGER_IFACE)
        recorder.wait_props({"Flags": REACHABLE, "Status": 2, "Interface": UPLINK}, "the connected answer")
        recorder.close()
        batch = IpBatch(ns_b, directory / "ip-batch.log")
        command = batch.command

        for mode, address in (("daemon", bus.address), ("in-process", NO_BUS)):
            program = Example(ns_a, example, address, directory / f"example-{mode}.log")
            try:
                program.wait("satisfied")
                latencies = {False: [], True: []}
                missing = 0
                for flap in range(options.flaps):
                    for up, word, status in ((False, "down", "unsatisfied"), (True, "up", "satisfied")):
                        sent = time.monotonic()
                        command(f"link set {UPLINK_PEER} {word}")
                        handled = program.wait(status)
                        kernel = link_events.first_after(sent, up)
                        if kernel is None or kernel > handled:
                            missing += 1
                        else:
                            latencies[up].append((handled - kernel) * 1000)
                results[mode] = (latencies, missing)
            finally:
                program.stop()

        print(f"machine: {os.cpu_count()} cores, {os.uname().release}; daemon {binary}")
        print(f"{options.flaps} flaps per mode; latency from RTM_NEWLINK to {receiver}, ms:")
        worst = 0.0
        for mode, (latencies, missing) in results.items():
            for up, word in ((False, "down (unsatisfied)"), (True, "up (satisfied)")):
                if latencies[up]:
                    print(row(f"{mode:<10} {word}", latencies[up]))
            every = latencies[False] + latencies[True]
            if every:
                worst = max(worst, pct(every, 99))
                print(row(f"{mode:<10} every edge", every))
            if missing:
                print(f"  ({mode}: no usable RTM_NEWLINK time stamp for {missing} edges)")
        verdict = "met" if worst <= BUDGET_MS else "MISSED"
        print(f"RTM_NEWLINK to {receiver}, p99 (worst mode): {worst:.3f} ms (budget {BUDGET_MS} ms: {verdict})")
    finally:
        if batch is not None:
            batch.close()
        if link_events is not None:
            link_events.close()
        if daemon is not None:
            daemon.stop()
        if client is not None:
            client.close()
        bus.stop()
        namespaces.close()


if __name__ == "__main__":
    main()
