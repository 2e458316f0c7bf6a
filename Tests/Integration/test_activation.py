"""The service's life seen from its first call and its signals: ready before the name, SIGHUP.

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
"""

import signal
import time

import pytest

import conftest
import harness
from harness import MANAGER_IFACE, ROOT_PATH, SERVICE, STATUS_NOT_REACHABLE, STATUS_WIFI_ETHERNET, TARGET_IFACE
from test_clients import json_lines, reachctl

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

