"""A restarted service announces itself, and clients that hold targets never give up.

* **Announced.** Once the daemon owns its name (a start, a restart, an upgrade) it sends the
  internet target's ``PropertiesChanged`` with every property and one ``StatusChanged``, so
  that a client subscribed by the well-known name learns the new instance's state without
  reading again: the README's applet, verbatim, run against the lab's bus, shows "offline"
  within 2 s after the daemon is restarted with the carrier lost while it was down, and
  "online" after the next restart with the carrier back. Before its name the daemon says
  nothing (nobody can hear it by the name yet): one StatusChanged per start, not two.
* **Never giving up.** ``reachctl watch`` and the library (``reachability-example``) hold the
  internet while the bus cannot start the service for longer than their six fast attempts
  (the activation file runs a missing program); once the file is fixed, they start it at
  their capped interval (``REACHABILITY_RESTART_CAP``, 2 s here instead of 30 s) and show the
  truth again. A client that stops listening (it holds nothing) asks nothing and never wakes.
* **The bus restarts.** The system bus itself goes and comes back on the same socket: the
  service exits with it; both clients connect to the new bus at their backoff, the new bus
  starts the service for them, and they show the truth again within the cap.
"""

import os
import re
import subprocess
import time

import harness
from harness import SERVICE
from test_activation import activation_lab  # noqa: F401 (a fixture)
from test_clients import BIN, clients  # noqa: F401 (a fixture)
from test_kernel_backend import KERNEL_CONNECTED, KERNEL_OFFLINE, UPLINK_PEER, daemon_args, kernel_lab  # noqa: F401
from test_kernel_backend import recorder_before_start
from test_setup_commands import REPO

KERNEL = daemon_args("--backend", "kernel")
# What changes: Kind and Name never do (EmitsChangedSignal "const"), so no announcement carries them.
CONSTANT = ("Kind", "Name")
ONLINE = {k: v for k, v in KERNEL_CONNECTED.items() if k not in CONSTANT}
CONNECTED_LINE = "status reachable-ethernetOrWiFi flags 2"
OFFLINE = {k: v for k, v in KERNEL_OFFLINE.items() if k not in CONSTANT}


def applet_script(directory):
    text = (REPO / "README.md").read_text()
    section = text.split("### A panel applet", 1)[1]
    [snippet] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    script = directory / "applet.py"
    script.write_text(snippet)
    return script


def test_the_readme_applet_hears_a_restarted_daemon(kernel_lab):
    lab = kernel_lab
    recorder = recorder_before_start(lab)
    daemon = lab.daemon(args=KERNEL)
    recorder.wait_answer(ONLINE, "the first answer, announced")
    # One StatusChanged for the start (the announcement), none before the name.
    assert len(recorder.status_changes()) == 1, recorder.describe()
    applet = subprocess.Popen(["/usr/bin/python3", str(applet_script(lab.directory))], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env=dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address),
                              bufsize=0)
    try:
        assert harness.read_line(applet.stdout, harness.START_TIMEOUT) == "online 0x2\n"
        for carrier, line in ((False, "offline 0x0\n"), (True, "online 0x2\n")):
            assert daemon.stop() == 0, harness.tail(daemon.log)
            lab.client.wait_for_name_gone(SERVICE)
            # Changed while nobody serves: nothing is told until the new instance is up.
            lab.set_peer(UPLINK_PEER, carrier)
            lab.wait_operstate("kveth0", "UP" if carrier else "DOWN")
            mark = recorder.mark()
            daemon = lab.daemon(args=KERNEL)
            started = time.monotonic()
            said = harness.read_line(applet.stdout, 2.0)
            took = time.monotonic() - started
            assert said == line, f"the applet said {said!r} {took:.2f} s after the restart (carrier {carrier})"
            recorder.wait_answer(ONLINE if carrier else OFFLINE, "the new instance", mark=mark)
            recorder.assert_announced(mark)
            assert len(recorder.status_changes(mark)) == 1, recorder.describe(mark)
    finally:
        applet.kill()
        applet.communicate()


def test_clients_never_give_up_while_they_hold_something(activation_lab, clients, monkeypatch):
    monkeypatch.setenv("REACHABILITY_DEBUG", "1")
    monkeypatch.setenv("REACHABILITY_RESTART_CAP", "2")
    lab = activation_lab
    daemon = lab.activatable(args=daemon_args("--backend", "kernel"))
    good = (lab.servicedir / f"{SERVICE}.service").read_text()
    watcher = clients(lab, [BIN / "reachctl", "watch"], "reachctl-watch")
    assert "Reachable status=2" in watcher.next_line("reachctl watch, the first answer"), watcher.lines
    app = clients(lab, [BIN / "reachability-example", "--daemon"], "example")
    assert app.next_line("the mode") == "mode daemon"
    assert app.next_line("the library's first answer") == CONNECTED_LINE, app.lines
    # The bus runs a program that is not there (a removed package, a masked unit).
    (lab.servicedir / f"{SERVICE}.service").write_text(
        f"[D-BUS Service]\nName={SERVICE}\nExec=/nonexistent/reachabilityd\n")
    lab.client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME, "ReloadConfig")
    daemon.kill(lab.client, wait_gone=False)
    assert "Unknown status=-1" in watcher.next_line("reachctl watch, the service away"), watcher.lines
    assert app.next_line("the library, the service away") == "status unknown flags -"
    spent = f"{SERVICE} could not be started again (6 attempts)"
    for client in (watcher, app):
        harness.wait_until(lambda c=client: spent in c.log.read_text(errors="replace"), 60,
                           f"{client.log.name}: the fast attempts spent", lambda c=client: harness.tail(c.log, 30))
    # Past the fast attempts: the capped ones go on.
    for client in (watcher, app):
        harness.wait_until(lambda c=client: "(attempt 8," in c.log.read_text(errors="replace"), 20,
                           f"{client.log.name}: an attempt after the fast ones",
                           lambda c=client: harness.tail(c.log, 30))
    # The library stops listening: it holds nothing, so it asks nothing and never wakes (three caps).
    app.send("stop")
    assert app.next_line("the library stopped") == "stopped", app.lines
    attempts = app.log.read_text(errors="replace").count("starting " + SERVICE)
    harness.idle_wakeups(app.popen.pid, 1.0)  # the release itself settles
    woken = sum(harness.idle_wakeups(app.popen.pid, 6.0).values())
    assert app.log.read_text(errors="replace").count("starting " + SERVICE) == attempts, \
        f"an attempt while nothing is held:\n{harness.tail(app.log, 10)}"
    assert woken <= 1, f"the library woke {woken} times in 6 s while it held nothing"
    # Fixed (reinstalled, unmasked): within the cap, reachctl watch shows the truth again.
    (lab.servicedir / f"{SERVICE}.service").write_text(good)
    lab.client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME, "ReloadConfig")
    fixed = time.monotonic()
    assert "Reachable status=2" in watcher.next_line("reachctl watch, the service back", timeout=15), watcher.lines
    took = time.monotonic() - fixed
    assert took < 2.0 + 5.0, f"the truth again {took:.1f} s after the fix (cap 2 s)"
    daemon.owner_pid(lab.client)
    app.send("start")
    assert app.next_line("the library listening again") == CONNECTED_LINE, app.lines



def test_clients_follow_a_system_bus_that_restarts(activation_lab, clients, monkeypatch):
    """The bus itself restarts (an upgrade of dbus-broker, ``systemctl restart dbus``): the service
    exits with it; ``reachctl watch`` and the library, which lost their connection, connect to the
    new bus (at their restart backoff, while they hold something), the new bus starts the service
    for them, and they show the truth again within the cap."""
    monkeypatch.setenv("REACHABILITY_DEBUG", "1")
    monkeypatch.setenv("REACHABILITY_RESTART_CAP", "2")
    lab = activation_lab
    # As a system's bus address is: the socket alone (no guid), so any instance serving it is the bus.
    guidless = f"unix:path={lab.bus.socket}"
    lab.bus.address = guidless
    daemon = lab.activatable(args=daemon_args("--backend", "kernel"))
    watcher = clients(lab, [BIN / "reachctl", "watch"], "reachctl-watch")
    assert "Reachable status=2" in watcher.next_line("reachctl watch, the first answer"), watcher.lines
    app = clients(lab, [BIN / "reachability-example", "--daemon"], "example")
    assert app.next_line("the mode") == "mode daemon"
    assert app.next_line("the library's first answer") == CONNECTED_LINE, app.lines
    pid = daemon.owner_pid(lab.client)
    lab.bus.stop()
    harness.wait_until(lambda: not os.path.exists(f"/proc/{pid}"), harness.STOP_TIMEOUT,
                       "the daemon gone with its bus", lambda: harness.tail(daemon.log))
    assert "Unknown status=-1" in watcher.next_line("reachctl watch, the bus gone"), watcher.lines
    assert app.next_line("the library, the bus gone") == "status unknown flags -"
    lab.start_bus()
    lab.bus.address = guidless
    restarted = time.monotonic()
    assert "Reachable status=2" in watcher.next_line("reachctl watch on the new bus", timeout=15), \
        watcher.lines
    took = time.monotonic() - restarted
    assert took < 2.0 + 3.0, f"reachctl watch showed the truth {took:.1f} s after the bus came back (cap 2 s)"
    assert app.next_line("the library on the new bus", timeout=15) == CONNECTED_LINE, app.lines
    daemon.owner_pid(lab.client)
    for client in (watcher, app):
        assert "connected to the system bus again" in client.log.read_text(errors="replace"), \
            harness.tail(client.log, 30)
