"""``reachctl wait``, as scripts and ``reachability-wait@.service`` run it (nm-online's and
systemd-networkd-wait-online's manner), against the daemon in the kernel lab and in the
NetworkManager lab.

* Exit 0 at once when the targets are reached; 1 after ``--timeout`` with each target not
  reached and its reason on standard error (nothing with ``-q``); 0 as soon as the carrier
  comes back (and not one wake-up while it waits: signals, never polling); 2 on a bad target
  or option.
* ``-4`` / ``-6`` (the kernel lab has IPv4 only), ``--any`` (the internet gone, a local address
  still there), ``--full`` (the kernel backend cannot check connectivity: never "full";
  NetworkManager's check can), ``--unmetered`` (NetworkManager's ``connection.metered``).
"""

import os
import signal
import subprocess
import time

import harness
from harness import CHANGE_TIMEOUT, ROOT_PATH, SERVICE, TARGET_IFACE
from test_clients import BIN, client_env, in_lab
from test_kernel_backend import (KERNEL_CONNECTED, KERNEL_OFFLINE, UPLINK_PEER, daemon_args,  # noqa: F401
                                 kernel_lab, start_daemon)
from test_activation import activation_lab  # noqa: F401 (a fixture)
from test_network_path import set_metered

KERNEL = daemon_args("--backend", "kernel")


def in_kernel_lab(lab, argv):
    return harness.Namespaces.exec_argv(lab.ns_a) + [str(a) for a in argv]


def wait_argv(lab, *args):
    argv = [BIN / "reachctl", "wait", *args]
    return in_kernel_lab(lab, argv) if hasattr(lab, "ns_a") else in_lab(lab, argv)


def run_wait(lab, *args, limit=60):
    """reachctl wait run to its end; returns (exit status, stdout, stderr, seconds)."""
    started = time.monotonic()
    done = subprocess.run(wait_argv(lab, *args), capture_output=True, text=True, timeout=limit,
                          env=client_env(lab))
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def online_kernel_lab(kernel_lab):
    state = start_daemon(kernel_lab, KERNEL)
    state.recorder.wait_answer(KERNEL_CONNECTED, "the kernel lab online")
    return state


def offline(state):
    state.lab.set_peer(UPLINK_PEER, False)
    state.recorder.wait_answer(KERNEL_OFFLINE, "the kernel lab without carrier")


def test_wait_returns_at_once_when_reached_and_after_the_timeout_with_the_reason(kernel_lab):
    state = online_kernel_lab(kernel_lab)
    status, out, err, seconds = run_wait(kernel_lab)
    assert status == 0, f"exit {status}\n{err}"
    assert out == "" and err == "", (out, err)
    assert seconds < 2.0, f"reachctl wait took {seconds:.2f} s while the internet was reachable"
    assert run_wait(kernel_lab, "-4", "--timeout", "5")[0] == 0
    assert run_wait(kernel_lab, "127.0.0.1", "0.0.0.0")[0] == 0
    # In-process (the same engine, no daemon asked): the same answer.
    status, _, err, _ = run_wait(kernel_lab, "--no-daemon", "--timeout", "10")
    assert status == 0 and "evaluating in this process" in err, (status, err)

    # IPv6: the kernel lab has none; 1 after the timeout, the reason on standard error.
    status, out, err, seconds = run_wait(kernel_lab, "-6", "--timeout", "1")
    assert status == 1, f"exit {status}\n{err}"
    assert 1.0 <= seconds < 5.0, seconds
    assert "internet: not reached within 1 s: no-ipv6" in err, err

    # --full: the kernel backend cannot check connectivity.
    status, _, err, _ = run_wait(kernel_lab, "--full", "--timeout", "1")
    assert status == 1 and "connectivity-unknown" in err, err

    offline(state)
    status, out, err, seconds = run_wait(kernel_lab, "--timeout", "1.5")
    assert status == 1, f"exit {status}\n{err}"
    assert 1.5 <= seconds < 5.5, seconds
    assert out == "", out
    lines = [line for line in err.splitlines() if "not reached" in line]
    reason = state.recorder.props["Reason"]
    assert reason, state.recorder.describe()
    assert lines == [f"reachctl: internet: not reached within 1.5 s: {reason}"
                     + (f" ({state.recorder.props['Error']})" if state.recorder.props["Error"] else "")], err
    status, _, err, _ = run_wait(kernel_lab, "--no-daemon", "--timeout", "1")
    assert status == 1 and "internet: not reached within 1 s: no-carrier" in err, err
    # -q: the status only (in-process too).
    status, out, err, _ = run_wait(kernel_lab, "-q", "--timeout", "1")
    assert (status, out, err) == (1, "", ""), (status, out, err)
    status, out, err, _ = run_wait(kernel_lab, "-q", "--no-daemon", "--timeout", "1")
    assert (status, out, err) == (1, "", ""), (status, out, err)
    # --any: the local address is reachable; without it, only the internet is named.
    assert run_wait(kernel_lab, "--any", "--timeout", "5", "0.0.0.0", "127.0.0.1")[0] == 0
    status, _, err, _ = run_wait(kernel_lab, "--timeout", "1", "0.0.0.0", "127.0.0.1")
    assert status == 1 and "0.0.0.0: not reached" in err and "127.0.0.1" not in err, err
    # --json: each target's last state.
    status, out, _, _ = run_wait(kernel_lab, "--json", "--timeout", "1")
    assert status == 1 and '"reachable":false' in out and '"target":"internet"' in out, out


def test_wait_returns_when_the_carrier_comes_back_without_waking_meanwhile(kernel_lab):
    state = online_kernel_lab(kernel_lab)
    offline(state)
    log = kernel_lab.directory / "wait.log"
    env = dict(client_env(kernel_lab), REACHABILITY_DEBUG="1")
    with open(log, "wb") as stderr:
        waiter = subprocess.Popen(wait_argv(kernel_lab, "--timeout", "60"), stdout=subprocess.PIPE, stderr=stderr,
                                  env=env)
    try:
        # The daemon's answer to its Watch call (the library's debug log says so): from now on it waits.
        harness.wait_until(lambda: "WatchAddress internet: success" in log.read_text(errors="replace"),
                           CHANGE_TIMEOUT, "reachctl wait holding the internet", lambda: harness.tail(log))
        assert waiter.poll() is None, f"reachctl wait ended while offline: {waiter.returncode}\n{harness.tail(log)}"
        first = sum(harness.idle_wakeups(waiter.pid, 2.0).values())
        woken = first if first <= 1 else sum(harness.idle_wakeups(waiter.pid, 2.0).values())
        assert woken <= 1, f"reachctl wait woke {woken} times in 2 s while nothing changed (first window: {first})"
        back = time.monotonic()
        kernel_lab.set_peer(UPLINK_PEER, True)
        status = waiter.wait(timeout=CHANGE_TIMEOUT)
        took = time.monotonic() - back
        assert status == 0, f"exit {status}\n{harness.tail(log)}"
        assert took < 2.0, f"reachctl wait returned {took:.2f} s after the carrier came back"
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()


def test_wait_refuses_bad_targets_and_options(kernel_lab):
    online_kernel_lab(kernel_lab)
    for args, word in ((["bad..name"], "is empty"), (["https://example.com/"], "is a URL"),
                       (["--timeout", "-1"], "from 0 (forever) to a year, not -1"),
                       (["--timeout", "soon"], "timeout")):
        status, out, err, _ = run_wait(kernel_lab, *args)
        assert status == 2, f"{args}: exit {status}\n{err}"
        assert word in err, f"{args}: {err}"


def test_reachctl_as_an_unprivileged_user_logs_nothing_of_thread_priorities(kernel_lab):
    """As units run it (a user without CAP_SYS_NICE), reachctl asks libdispatch for no
    thread above the default priority: libdispatch would renice the thread, be refused, and
    log "Failed to set thread priority" into the unit's journal: its timers (the wait's timeout
    here) ran on libdispatch's manager thread, which it starts at the user-interactive quality of
    service. LIBDISPATCH_LOG=stderr puts libdispatch's log on standard error (it said so before,
    for both commands)."""
    online_kernel_lab(kernel_lab)
    for args in (["wait", "--no-daemon", "-6", "--timeout", "1"], ["--no-daemon", "status"]):
        argv = in_kernel_lab(kernel_lab, ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                          BIN / "reachctl", *args])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                              env=dict(client_env(kernel_lab), LIBDISPATCH_LOG="stderr"))
        assert done.returncode in (0, 1), f"{args}: exit {done.returncode}\n{done.stderr}"
        assert "Failed to set thread priority" not in done.stderr, f"{args}: {done.stderr}"


def test_wait_full_and_unmetered_with_networkmanager(nm_lab):
    lab = nm_lab
    lab.daemon()
    recorder = lab.recorder()
    recorder.sync()
    recorder.wait_props({"Connectivity": "full", "Reachable": True}, "NetworkManager's full connectivity")
    assert run_wait(lab, "--full", "--unmetered", "-4", "-6", "--timeout", "10")[0] == 0
    set_metered(lab, "yes")
    recorder.wait_props({"Metered": True}, "metered yes")
    status, _, err, _ = run_wait(lab, "--unmetered", "--timeout", "1")
    assert status == 1 and "internet: not reached within 1 s: metered" in err, err
    assert run_wait(lab, "--timeout", "5")[0] == 0, "metered is still reachable"
    # Waiting for an unmetered link: returns once the profile is no longer metered.
    waiter = subprocess.Popen(wait_argv(lab, "--unmetered", "--timeout", "60"), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=client_env(lab))
    try:
        time.sleep(0.5)
        assert waiter.poll() is None, waiter.communicate()
        set_metered(lab, "no")
        assert waiter.wait(timeout=CHANGE_TIMEOUT) == 0, waiter.communicate()
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    # --full: a captive portal is no full connectivity.
    lab.set_portal(True)
    assert lab.check_connectivity() == "portal"
    recorder.wait_props({"Connectivity": "portal"}, "the portal")
    status, _, err, _ = run_wait(lab, "--full", "--timeout", "1")
    assert status == 1 and "internet: not reached within 1 s: portal" in err, err
    assert lab.client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Connectivity") == "portal"


# --- the service away: reachctl wait (and reachability-wait@) evaluates in-process ---------


def test_wait_evaluates_in_process_when_the_bus_cannot_start_the_service(activation_lab):
    """The name is activatable but its start fails (a masked unit, a removed binary): wait does
    not exit 2 at once, it waits on its own evaluation, and says why."""
    lab = activation_lab
    starts = lab.directory / "failed-starts"
    (lab.servicedir / f"{SERVICE}.service").write_text(
        f"[D-BUS Service]\nName={SERVICE}\nExec=/bin/sh -c 'echo started >> {starts}; exit 1'\n")
    lab.client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME, "ReloadConfig")
    status, out, err, seconds = run_wait(lab, "--timeout", "20")
    assert status == 0, f"exit {status} after {seconds:.2f} s\n{out}{err}"
    assert starts.exists(), "the bus was not asked to start the service"
    assert "could not start" in err and "evaluating in this process" in err, err
    assert seconds < 10, f"reachctl wait took {seconds:.2f} s"
    # A target not reached (the lab's DNS has no such name): 1 after the timeout, with the
    # in-process engine's reason.
    status, _, err, _ = run_wait(lab, "nosuchhost.test", "--timeout", "1")
    assert status == 1 and "not reached within 1 s" in err, (status, err)


def test_wait_evaluates_in_process_when_the_service_hangs(kernel_lab):
    """The daemon holds its name but answers nothing (SIGSTOP): wait evaluates in-process
    after its bound (3 s) instead of waiting on the hung service until its timeout."""
    state = online_kernel_lab(kernel_lab)
    os.kill(state.daemon.pid, signal.SIGSTOP)
    try:
        status, out, err, seconds = run_wait(kernel_lab, "--timeout", "20")
        assert status == 0, f"exit {status} after {seconds:.2f} s\n{out}{err}"
        assert "did not answer within 3 s" in err and "evaluating in this process" in err, err
        assert seconds < 8, f"reachctl wait took {seconds:.2f} s against a hung service"
        status, _, err, seconds = run_wait(kernel_lab, "-6", "--timeout", "1")
        assert status == 1 and "not reached within 1 s" in err, (status, err)
        assert seconds < 8, seconds
    finally:
        os.kill(state.daemon.pid, signal.SIGCONT)
