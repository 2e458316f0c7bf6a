"""The service's life as its clients see it: ready before the name, SIGHUP, and coming back.

* **Ready before the name.** The bus starts reachabilityd through an activation file
  (``Lab.activatable``: its ``Exec=`` runs the built daemon where the lab runs it) for the
  very call a client makes; the daemon owns its name only once its backend is chosen and its
  first evaluation is done, so that call is answered with the evaluated state -- never
  ``Status -1`` or ``Backend none``. Ten times in a row (the daemon stopped by its PID
  between), with the kernel backend and with NetworkManager (the NetworkManager lab).
  A NetworkManager that owns its name but never answers does not keep the name away
  for longer than the daemon's bound (5 s): it serves the kernel's facts meanwhile.
* **SIGHUP** is a reload (everything evaluated again), never an exit; SIGTERM still ends
  the daemon cleanly.
* **The service comes back.** reachctl watch, the library (``reachability-example``) and
  NWPathMonitor (``network-path-example``) show Unknown when the daemon is stopped by its PID,
  start it again through the bus (it is activatable), hold what they held, and show the truth
  within 2 s. On a bus that cannot start it they wait without waking and recover when it is
  started by hand; a service that keeps failing to start is started at most six times per client in
  quick succession (then once per capped interval: test_announce.py).
"""

import signal
import time

import pytest

import conftest
import harness
from harness import (CHANGE_TIMEOUT, MANAGER_IFACE, ROOT_PATH, SERVICE, SOMEHOST, STATUS_NOT_REACHABLE,
                     STATUS_WIFI_ETHERNET, TARGET_IFACE)
from test_clients import BIN, clients, host_objects, in_lab, json_lines, reachctl  # noqa: F401 (a fixture)
from test_network_path import programs  # noqa: F401 (a fixture)
from test_targets import path_of

ROUNDS = 10


@pytest.fixture
def activation_lab(request):
    """The NetworkManager lab (connected) whose bus starts reachabilityd when a call asks for it."""
    conftest.require()
    lab = harness.NMLab()
    lab.enable_activation()
    return conftest._lab(request, lab)  # pylint: disable=protected-access


@pytest.fixture
def activation_lab_without_nm(request):
    """The same, NetworkManager not started."""
    conftest.require()
    lab = harness.NMLab()
    lab.enable_activation()
    return conftest._lab(request, lab, networkmanager=False)  # pylint: disable=protected-access


def activating_get_all(lab, interface: str) -> dict:
    """``GetAll`` that the bus may start the daemon for (and holds until the daemon owns its name)."""
    return dict(lab.client.call(SERVICE, ROOT_PATH, harness.PROPERTIES_IFACE, "GetAll", "s", (interface,),
                                timeout=harness.START_TIMEOUT, auto_start=True)[0])


@pytest.mark.parametrize("backend", ["kernel", "networkmanager"])
def test_the_call_that_starts_the_daemon_gets_the_evaluated_state(activation_lab, backend):
    lab = activation_lab
    daemon = lab.activatable(args=["--system", "--verbose", "--backend", backend])
    assert SERVICE in lab.client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME,
                                      "ListActivatableNames")[0]
    answers = []
    for round_ in range(ROUNDS):
        assert lab.client.name_owner(SERVICE) is None, f"round {round_}: the daemon still runs"
        if round_ % 2 == 0:
            # The first call is the client's: the internet's properties.
            internet = activating_get_all(lab, TARGET_IFACE)
            manager = activating_get_all(lab, MANAGER_IFACE)
            first = (internet["Status"], internet["Connectivity"], manager["Backend"])
        else:
            # The first call is the Manager's Backend; then reachctl, as an administrator would.
            manager = activating_get_all(lab, MANAGER_IFACE)
            status = reachctl(lab, "--json", "--daemon", "status")
            assert status.returncode == 0, f"round {round_}: reachctl status\n{status.stdout}\n{status.stderr}"
            [answer] = json_lines(status.stdout)
            first = (answer["status"], answer["connectivity"], manager["Backend"])
        answers.append(first)
        pid = daemon.kill(lab.client)
        assert not daemon.alive(pid)
    # NetworkManager checks connectivity ("full"); the kernel cannot tell ("unknown").
    connectivity = "full" if backend == "networkmanager" else "unknown"
    assert answers == [(STATUS_WIFI_ETHERNET, connectivity, backend)] * ROUNDS, \
        f"the first answers of {ROUNDS} activations: {answers}\n{harness.tail(daemon.log, 60)}"
    log = daemon.log_text()
    assert log.count("ready in") == ROUNDS, harness.tail(daemon.log, 60)
    assert "gave no first answer" not in log


def test_a_networkmanager_that_never_answers_delays_the_name_by_the_bound_only(activation_lab_without_nm):
    """NetworkManager's name is owned by a peer that never reads its calls: libnm's client is
    never made. The daemon (auto) still takes its name, after its bound, with the kernel's facts."""
    lab = activation_lab_without_nm
    hung = harness.Process("a NetworkManager that never answers", [
        "/usr/bin/python3", "-c",
        "import sys, time, dbus.bus\n"
        "bus = dbus.bus.BusConnection(sys.argv[1])\n"
        f"bus.request_name({harness.NM_NAME!r})\n"
        "print('owned', flush=True)\n"
        "time.sleep(600)\n", lab.bus.address], lab.directory / "hung-nm.log", stdout_pipe=True)
    try:
        assert harness.read_line(hung.popen.stdout, harness.START_TIMEOUT) == "owned\n", harness.tail(hung.log)
        daemon = lab.activatable(args=["--system", "--verbose"])
        started = time.monotonic()
        internet = activating_get_all(lab, TARGET_IFACE)
        waited = time.monotonic() - started
        manager = activating_get_all(lab, MANAGER_IFACE)
        daemon.owner_pid(lab.client)
        log = daemon.log_text()
        assert "the backend gave no first answer within 5000 ms" in log, harness.tail(daemon.log, 60)
        assert waited >= 4.5, f"the name came after {waited:.1f} s, before the bound: {log}"
        # NetworkManager never configured nmveth0: the kernel's truth is "not reachable" (not -1).
        assert (manager["Backend"], internet["Status"]) == ("kernel", STATUS_NOT_REACHABLE), (manager, internet)
    finally:
        hung.stop()


def test_sighup_reloads_and_sigterm_still_ends(plain_lab):
    daemon = plain_lab.daemon()
    owner = daemon.owner
    evaluations = daemon.log_text().count("evaluated ")
    daemon.process.send_signal(signal.SIGHUP)
    harness.wait_until(lambda: "received SIGHUP; evaluating everything again" in daemon.log_text(),
                       harness.CHANGE_TIMEOUT, "the reload's log line", lambda: harness.tail(daemon.log, 30))
    harness.wait_until(lambda: daemon.log_text().count("evaluated ") > evaluations, harness.CHANGE_TIMEOUT,
                       "an evaluation after SIGHUP", lambda: harness.tail(daemon.log, 30))
    # Still the same process, on the bus under the same name, answering.
    assert daemon.running, harness.tail(daemon.log, 30)
    assert plain_lab.client.name_owner(SERVICE) == owner
    assert plain_lab.client.get(SERVICE, ROOT_PATH, MANAGER_IFACE, "Backend") != ""
    assert daemon.stop() == 0, harness.tail(daemon.log, 30)
    assert "received signal 15; exiting" in daemon.log_text()



# -- a service that goes away comes back (the clients' side) -----------------------------------------------


def truth_after(watcher, app, path, what):
    """Each client's next lines: Unknown (the service away), then the truth (it is back).
    Returns when the last of them had the truth (monotonic)."""
    unknown = watcher.next_line(f"{what}: reachctl watch, the service away")
    assert "Unknown status=-1" in unknown, watcher.lines
    assert app.next_line(f"{what}: the library, the service away") == "status unknown flags -", app.lines
    path.wait_for({"status": "unsatisfied"}, f"{what}: NWPathMonitor, the service away")
    back = watcher.next_line(f"{what}: reachctl watch, the service back")
    back_at = time.monotonic()
    assert "Reachable status=2" in back, watcher.lines
    assert app.next_line(f"{what}: the library, the service back") == CONNECTED_LINE, app.lines
    back_at = max(back_at, time.monotonic())
    path.wait_for({"status": "satisfied"}, f"{what}: NWPathMonitor, the service back")
    return max(back_at, time.monotonic())


CONNECTED_LINE = "status reachable-ethernetOrWiFi flags 20002"
AT_START_LINE = "status reachable-ethernetOrWiFi flags 2"


def wakeups(programs, seconds: float = 3.0) -> list:
    """Each program's wake-ups (all threads) over the same ``seconds``."""
    before = [harness.thread_wakeups(p.popen.pid) for p in programs]
    time.sleep(seconds)
    after = [harness.thread_wakeups(p.popen.pid) for p in programs]
    return [sum(a[t] - b[t] for t in b.keys() & a.keys()) for b, a in zip(before, after)]


def assert_quiet(programs, baseline: list, what: str) -> None:
    """No client wakes more than once beyond what it did with the service up and nothing changing
    (libdispatch's worker threads wake now and then on their own): a client that polled or retried,
    even once a second, would."""
    woken = wakeups(programs)
    assert all(w <= b + 1 for w, b in zip(woken, baseline)), \
        f"{what}: wake-ups of reachctl watch, the library, NWPathMonitor {woken} (the service up: {baseline})"
KERNEL = ["--system", "--verbose", "--backend", "kernel"]


def start_clients(lab, clients, programs):
    watcher = clients(lab, [BIN / "reachctl", "watch"], "reachctl-watch")
    assert "Reachable status=2" in watcher.next_line("reachctl watch, the first answer"), watcher.lines
    app = clients(lab, [BIN / "reachability-example", "--daemon", SOMEHOST[0]], "example")
    assert app.next_line("the mode") == "mode daemon"
    # Its status at startListening (Alamofire 5): the host's flags read without a lookup (the
    # internet's, 2) or, if its answer came first, its own (20002); the same status either way.
    assert app.next_line("the library's first answer") in (CONNECTED_LINE, AT_START_LINE), app.lines
    path = programs.start_in(in_lab(lab, []), lab.bus.address, lab.directory, "daemon")
    path.wait_for({"status": "satisfied"}, "NWPathMonitor's first answer")
    return watcher, app, path


def test_clients_start_the_service_again_and_hold_what_they_held(activation_lab, clients, programs, monkeypatch):
    monkeypatch.setenv("REACHABILITY_DEBUG", "1")
    lab = activation_lab
    daemon = lab.activatable(args=KERNEL)
    watcher, app, path = start_clients(lab, clients, programs)  # the first call started the daemon
    host_path = path_of("host", SOMEHOST[0])
    for round_ in range(3):
        first = daemon.owner_pid(lab.client)
        stopped = time.monotonic()
        daemon.kill(lab.client, wait_gone=False)
        back_at = truth_after(watcher, app, path, f"round {round_}")
        # Started again by the clients (nobody else calls it here), holding what they held.
        again = daemon.owner_pid(lab.client)
        assert again != first
        assert host_path in host_objects(lab)
        assert back_at - stopped <= 2.0, f"round {round_}: the truth again {back_at - stopped:.2f} s after the stop"
    assert "starting " + SERVICE + " again (attempt 1 of 6)" in harness.tail(app.log, 200)


def test_clients_wait_without_polling_when_the_bus_cannot_start_the_service(nm_lab, clients, programs,
                                                                           monkeypatch):
    monkeypatch.setenv("REACHABILITY_DEBUG", "1")
    lab = nm_lab
    lab.daemon(args=KERNEL)
    watcher, app, path = start_clients(lab, clients, programs)
    baseline = wakeups([watcher, app, path])
    lab.daemons[-1].stop()
    watcher_said = watcher.next_line("reachctl watch, the service away")
    assert "Unknown status=-1" in watcher_said, watcher.lines
    assert app.next_line("the library, the service away") == "status unknown flags -"
    path.wait_for({"status": "unsatisfied"}, "NWPathMonitor, the service away")
    waiting = f"the system bus cannot start {SERVICE}; waiting for it to come back"
    for client in (watcher, app, path):
        harness.wait_until(lambda c=client: waiting in c.log.read_text(errors="replace"), CHANGE_TIMEOUT,
                           f"{client.log.name} says it waits", lambda c=client: harness.tail(c.log, 20))
    # Waiting: no polling, no retries.
    assert_quiet([watcher, app, path], baseline, "waiting for a service the bus cannot start")
    # Started by hand: everything is held again and the truth shown.
    lab.daemon(args=KERNEL)
    assert "Reachable status=2" in watcher.next_line("reachctl watch, the service back"), watcher.lines
    assert app.next_line("the library, the service back") == CONNECTED_LINE, app.lines
    path.wait_for({"status": "satisfied"}, "NWPathMonitor, the service back")
    assert path_of("host", SOMEHOST[0]) in host_objects(lab)


def test_a_service_that_keeps_failing_is_started_a_bounded_number_of_times(activation_lab, clients, programs,
                                                                           monkeypatch):
    monkeypatch.setenv("REACHABILITY_DEBUG", "1")
    # The attempts after the fast ones (every 30 s: test_announce.py) pushed out of this test.
    monkeypatch.setenv("REACHABILITY_RESTART_CAP", "3600")
    lab = activation_lab
    daemon = lab.activatable(args=KERNEL)
    watcher, app, path = start_clients(lab, clients, programs)
    baseline = wakeups([watcher, app, path])
    # From now on the bus runs a program that fails at once, counting its starts.
    starts = lab.directory / "failed-starts"
    (lab.servicedir / f"{SERVICE}.service").write_text(
        f"[D-BUS Service]\nName={SERVICE}\nExec=/bin/sh -c 'echo started >> {starts}; exit 1'\n")
    lab.client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME, "ReloadConfig")
    daemon.kill(lab.client, wait_gone=False)
    assert "Unknown status=-1" in watcher.next_line("reachctl watch, the service away"), watcher.lines
    assert app.next_line("the library, the service away") == "status unknown flags -"
    gave_up = f"{SERVICE} could not be started again (6 attempts); waiting for it to come back"
    for client in (watcher, app, path):
        harness.wait_until(lambda c=client: gave_up in c.log.read_text(errors="replace"), 60,
                           f"{client.log.name} gives up", lambda c=client: harness.tail(c.log, 30))
    # Three clients, six attempts each at most (the bus runs one start for calls that come together).
    count = len(starts.read_text().splitlines())
    assert 6 <= count <= 18, f"{count} starts"
    assert_quiet([watcher, app, path], baseline, "after the last attempt")
    assert len(starts.read_text().splitlines()) == count, "a start after the last attempt"
    # Then it waits for the name: the daemon started by hand is found, everything held again.
    lab.daemon(args=KERNEL)
    assert "Reachable status=2" in watcher.next_line("reachctl watch, the service back"), watcher.lines
    assert app.next_line("the library, the service back") == CONNECTED_LINE, app.lines
    path.wait_for({"status": "satisfied"}, "NWPathMonitor, the service back")
