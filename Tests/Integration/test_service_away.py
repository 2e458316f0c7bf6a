"""When the service is away, nobody keeps its last word — under a real systemd with the
package installed (the harness of test_systemd.py).

Five clients follow the service: a GLib program on ``Gio.NetworkMonitor`` (the package's
GIO module chosen with no environment variable), ``reachctl watch``, the Swift library's
listener (``reachability-example``), a C program on the C API (``libreachability-sc1``'s
packages, built in the container from the installed header) and, after each event,
``reachctl wait``. The service is then taken away five ways — ``systemctl stop`` (the clients start it
again at once), ``systemctl mask --now`` (nobody can), ``kill -STOP`` (a hang: the name stays),
``dpkg -r`` and ``dpkg --purge`` — and the default route is deleted. Within the bound each client must say "unknown", or the truth, or (the GIO module)
GLib's own monitor's answer: never the last "reachable". After a stop or a hang the service
is back (the clients or systemd start it again) and every client follows the route's return.

The bounds (docs/design.md, "When the service is away"): the GIO module hands over within its
call bound (2 s, gio/monitor.h) of the change; a hung service is ended by systemd's watchdog
(WatchdogSec=30, TimeoutAbortSec=10 in data/reachabilityd.service) and restarted, so the
libraries' clients say "unknown" within 41 s of the hang; ``reachctl wait`` answers in-process
once the service does not answer within 3 s.

Each of these failed before this round's changes: the GLib program said "online" for as long as
the service was away; the libraries kept the last answer for as long as it hung; ``reachctl
wait`` exited 2 at once with the service removed, and waited on a hung service.
"""

import json
import subprocess
import time

import pytest

import harness
from conftest import need
from test_systemd import (GIO_PACKAGE, LIBRARY_PACKAGES, MONITOR_TEST, REPO, Lines, add_uplink, boot,
                          example_binary, install_deb, unit_property)

GIO_MONITOR = "ReachabilitydNetworkMonitor"
# The module's call bound (gio/monitor.h) and the program's own turn.
GIO_BOUND = 2.0 + 3.0
# WatchdogSec= + TimeoutAbortSec= + RestartSec= of the shipped unit, and room for a loaded machine.
HANG_BOUND = 30 + 10 + 1 + 9
# A stop or a removal is heard at once (NameOwnerChanged): the clients' own turn.
AWAY_BOUND = 5.0
ROUTE = "default via 192.0.2.1 dev up0 onlink"
UNITS = ("reachabilityd.service", "reachabilityd-units.service", "reachabilityd-metrics-textfile.service",
         "reachability-online.target", "reachability-unmetered.target")


class Client:
    """A following program's lines, and what each means: "up", "down" or "unknown"."""

    def __init__(self, name, process, meaning):
        self.name = name
        self.lines = Lines(process)
        self.meaning = meaning
        self.last = None

    def wait_for(self, wanted, what, timeout):
        """Reads lines until the latest meaningful one is one of `wanted` (a set)."""
        def done(line):
            word = self.meaning(line)
            if word is not None:
                self.last = word
            return word in wanted
        if self.last in wanted:
            return self.last
        self.lines.wait_for(done, f"{self.name}: {what}", timeout)
        return self.last


def glib_meaning(line):
    # "ready TYPE available metered connectivity" and "changed TIME available metered connectivity available".
    parts = line.split()
    if parts and parts[0] == "ready":
        return "up" if parts[2] == "1" else "down"
    if parts and parts[0] == "changed":
        return "up" if parts[2] == "1" else "down"
    return None


def watch_meaning(line):
    if not line.startswith("{"):
        return None
    status = json.loads(line).get("status")
    return {2: "up", 1: "up", 0: "down", -1: "unknown"}.get(status)


def swift_meaning(line):
    # "status reachable-ethernetOrWiFi flags ...", "status notReachable ...", "status unknown flags -".
    if not line.startswith("status "):
        return None
    word = line.split()[1]
    return "unknown" if word == "unknown" else "up" if word.startswith("reachable") else "down"


def c_meaning(line):
    # "flags internet flags=0x2" once, then "callback internet flags=0xN" (Apple's flags have no
    # "unknown": not reachable is 0).
    parts = line.split()
    if len(parts) == 3 and parts[0] in ("flags", "callback") and parts[1] == "internet":
        return "up" if int(parts[2].split("=")[1], 16) & 0x2 else "down"
    return None


def start_clients(request, box):
    """The five clients, each having said "up"."""
    example = example_binary()
    need([] if example.exists() else [f"{example} (swift build)"])
    box.sh(f"cc -o /root/reachability-test {REPO}/capi/tests/reachability-test.c "
           "$(pkg-config --cflags --libs reachability-sc)", timeout=180)
    processes = {
        # --follow: it follows until its standard input closes.
        "the GLib program": (box.popen(["/usr/bin/python3", str(MONITOR_TEST), "--follow"], stdout=subprocess.PIPE,
                                       stdin=subprocess.PIPE, stderr=subprocess.DEVNULL), glib_meaning),
        "reachctl watch": (box.popen(["reachctl", "--json", "watch"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL), watch_meaning),
        "the Swift listener": (box.popen([str(example)], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL), swift_meaning),
        "the C program": (box.popen(["/root/reachability-test", "watch", "queue", "192.0.2.1", "192.0.2.10"],
                                    stdout=subprocess.PIPE, stdin=subprocess.PIPE, stderr=subprocess.DEVNULL),
                          c_meaning),
    }
    request.addfinalizer(lambda: [box.stop(process) for process, _ in processes.values()])
    clients = [Client(name, process, meaning) for name, (process, meaning) in processes.items()]
    for client in clients:
        client.wait_for({"up"}, "online at start", 30)
    first = clients[0].lines.seen[0].split()
    assert first[:2] == ["ready", GIO_MONITOR], f"the GLib program did not get the module: {first}"
    return clients


def wait_not_up(clients, bound, what):
    """Every client says "down" or "unknown" within `bound` of now; returns when each said it."""
    started = time.monotonic()
    said = {}
    for client in clients:
        left = max(bound - (time.monotonic() - started), 0.01)
        said[client.name] = (client.wait_for({"down", "unknown"}, what, left), round(time.monotonic() - started, 2))
    return said


def run_wait(box, reachctl, timeout):
    started = time.monotonic()
    done = box.run([reachctl, "wait", "--timeout", str(timeout)], check=False, timeout=timeout + 30)
    return done.returncode, done.stderr, time.monotonic() - started


@pytest.mark.parametrize("event", ["stop", "masked", "hang", "remove", "purge"])
def test_no_client_keeps_the_last_word_when_the_service_is_away(request, deb, gio_deb, library_debs, event):  # pylint: disable=redefined-outer-name
    box = boot(request, "dbus-daemon", None)
    install_deb(box, deb)
    install_deb(box, gio_deb)
    box.run(["dpkg", "-i", *(str(library_debs[name]) for name in LIBRARY_PACKAGES)], timeout=120)
    add_uplink(box)
    clients = start_clients(request, box)
    pid = unit_property(box, "reachabilityd.service", "MainPID")
    assert pid != "0", "the clients did not start the service"

    if event == "stop":
        # The clients start it again at once: what they say meanwhile, and after, must hold.
        box.run(["systemctl", "stop", "reachabilityd.service"])
        bound = AWAY_BOUND
    elif event == "masked":
        # Stopped for good (until unmasked): nobody can start it again meanwhile.
        box.run(["systemctl", "mask", "--runtime", "--now", "reachabilityd.service"])
        bound = AWAY_BOUND
    elif event == "hang":
        box.run(["kill", "-STOP", pid])
        bound = HANG_BOUND
        doctor = box.run(["reachctl", "doctor"], check=False, timeout=60)
        assert doctor.returncode == 2 and "it is hung" in doctor.stdout and "stopped (SIGSTOP)" in doctor.stdout, \
            f"reachctl doctor on a hung service: exit {doctor.returncode}\n{doctor.stdout}{doctor.stderr}"
    else:
        box.run(["systemctl", "enable", "--now", "reachabilityd-units.service"])
        # Both, as `apt remove reachabilityd` does (the module's package depends on the daemon's);
        # the running GLib program keeps the module it loaded.
        box.run(["dpkg", "-r" if event == "remove" else "--purge", GIO_PACKAGE, "reachabilityd"], timeout=120)
        bound = AWAY_BOUND
    box.sh(f"ip route del {ROUTE}")
    said = wait_not_up(clients, bound, f"not 'up' within {bound} s of the {event} and the route's deletion")

    # reachctl wait now: never the last answer (exit 0); the service's, or its own in-process one.
    reachctl = "reachctl" if event in ("stop", "masked", "hang") else str(harness.daemon_binary().parent / "reachctl")
    status, err, seconds = run_wait(box, reachctl, 5)
    assert status == 1, f"reachctl wait after the {event}: exit {status} after {seconds:.2f} s: {err}"

    if event in ("remove", "purge"):
        for unit in UNITS:
            state = unit_property(box, unit, "ActiveState")
            assert state in ("inactive", "failed", ""), f"{unit} is {state} after dpkg {event}"
        running = box.run(["systemctl", "list-units", "--no-legend", "--state=active", "reachability*"]).stdout
        assert running.strip() == "", f"units left running after dpkg {event}:\n{running}"
        return

    # The service back (started again by the clients, or by systemd after its watchdog), and the
    # route back: every client follows.
    if event == "masked":
        box.run(["systemctl", "unmask", "--runtime", "reachabilityd.service"])
    box.sh(f"ip route add {ROUTE}")
    for client in clients:
        # After a hang: the watchdog's bound; once unmasked: the clients' cap (30 s) between attempts.
        client.wait_for({"up"}, f"'up' again after the {event} ({said})", HANG_BOUND if event != "stop" else 20)
    assert unit_property(box, "reachabilityd.service", "ActiveState") == "active"
    if event == "hang":
        assert unit_property(box, "reachabilityd.service", "MainPID") != pid, "the hung process still serves"
        journal = box.run(["journalctl", "-u", "reachabilityd.service", "--no-pager", "-o", "cat"]).stdout
        assert "Watchdog timeout" in journal or "watchdog" in journal.lower(), journal[-3000:]
    status, err, _ = run_wait(box, "reachctl", 20)
    assert status == 0, f"reachctl wait once the service and the route are back: exit {status}: {err}"
