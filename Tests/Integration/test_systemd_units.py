"""Units that follow the network, and a service that announces itself and is never given up on,
under a real systemd (``container.py``), with the build under test installed in the container
(``container.install_build``: the debug build, no package; the package's own tests are in
test_systemd.py).

* ``reachability-wait@HOST.service``: a unit with ``Wants=``/``After=`` on it starts only once
  HOST is reachable.
* ``reachability-online.target``: started while the internet is reachable, not stopped by a
  blink shorter than the debounce (2 s), stopped after it by a carrier loss that lasts, with a
  unit bound to it (``BindsTo=``); ``reachabilityd-units.service`` has no capability and
  ``systemd-analyze security`` 1.5 at most.
* ``reachability-unmetered.target``: NetworkManager in the container manages the uplink; a
  backup bound to the target stops when ``connection.metered`` turns yes, starts again after.
* The README's applet, as a user, hears ``systemctl stop``/``start`` with the carrier changed
  meanwhile, and ``systemctl restart``, within 2 s.
* ``reachctl watch`` and the library come back after ``systemctl mask`` past their fast
  attempts, then ``unmask``, within the cap (30 s).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time

import container as ct
import harness
from test_systemd import GATEWAY_NEIGHBOUR, OUT, Lines, add_uplink, boot, example_binary, readme_applet, run_journal, unit_property


# --- units that follow the network (the build under test, not the package) ------------

FOLLOWING = ["reachabilityd-units.service", "reachability-online.target", "reachability-unmetered.target"]


def build_box(request, units) -> ct.Container:
    """A container on dbus-daemon with the debug build installed (``container.install_build``)."""
    box = boot(request, "dbus-daemon", None)
    ct.install_build(box, harness.daemon_binary().parent, units)
    return box


def active_state(box: ct.Container, unit: str) -> str:
    return unit_property(box, unit, "ActiveState")


def wait_state(box: ct.Container, unit: str, state: str, what: str, timeout: float = 20) -> float:
    """Waits (bounded; systemd's state is read, no signal says it here) for ``unit`` to be in
    ``state``; returns when it was seen (monotonic)."""
    harness.wait_until(lambda: active_state(box, unit) == state, timeout, f"{unit} {state}: {what}",
                       lambda: box.run(["systemctl", "status", "--no-pager", unit], check=False).stdout
                       + box.run(["journalctl", "--no-pager", "-n", "30"], check=False).stdout, poll=0.1)
    return time.monotonic()


def test_a_unit_after_reachability_wait_starts_once_the_host_is_reachable(request):
    box = build_box(request, ["reachability-wait@.service"])
    box.sh("echo '192.0.2.1 gateway.reach.test' >> /etc/hosts")
    wait_unit = "reachability-wait@gateway.reach.test.service"
    box.path("/etc/systemd/system/after-wait.service").write_text(
        f"[Unit]\nWants={wait_unit}\nAfter={wait_unit}\n[Service]\nType=oneshot\nRemainAfterExit=yes\n"
        "ExecStart=/bin/sh -c 'reachctl --daemon query gateway.reach.test > /run/after-wait.txt; "
        "echo exit $? >> /run/after-wait.txt'\n")
    box.run(["systemctl", "daemon-reload"])
    box.run(["systemctl", "start", "--no-block", "after-wait.service"])
    # No uplink yet: the wait waits (reachctl wait runs, through the daemon the call started).
    wait_state(box, wait_unit, "activating", "waiting while 192.0.2.1 has no route")
    harness.wait_until(lambda: active_state(box, "reachabilityd.service") == "active", 20,
                       "the daemon started by the wait's call", poll=0.1)
    assert active_state(box, "after-wait.service") == "inactive"
    add_uplink(box)
    wait_state(box, wait_unit, "active", "reached once the uplink is there")
    wait_state(box, "after-wait.service", "active", "started after the wait")
    report = box.run(["cat", "/run/after-wait.txt"]).stdout
    assert report.splitlines()[-1] == "exit 0", f"the unit after the wait did not find the host reachable:\n{report}"
    verify = box.run(["systemd-analyze", "verify", wait_unit], check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert_quiet(box, wait_unit)


def assert_quiet(box, unit):
    """No "Failed to set thread priority" in the unit's run: libdispatch renices its worker
    threads, which the units' system call filter refused (errno=1) until it allowed setpriority."""
    log = run_journal(box, unit)
    assert "thread priority" not in log, f"{unit} logs libdispatch's refused renice:\n{log}"


def test_online_target_follows_the_internet_with_its_debounce(request):
    box = build_box(request, FOLLOWING)
    box.path("/etc/systemd/system/bound.service").write_text(
        "[Unit]\nBindsTo=reachability-online.target\nAfter=reachability-online.target\n"
        "[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=reachability-online.target\n")
    box.run(["systemctl", "daemon-reload"])
    box.run(["systemctl", "enable", "bound.service"])
    box.run(["systemctl", "enable", "--now", "reachabilityd-units.service"])
    # Offline (only lo): the helper says so and stops (nothing runs).
    harness.wait_until(lambda: "stopping it" in box.run(["journalctl", "--no-pager", "-u",
                                                          "reachabilityd-units.service"]).stdout,
                       20, "the helper's first answer", poll=0.2)
    assert active_state(box, "reachability-online.target") == "inactive"
    up = time.monotonic()
    add_uplink(box)
    started = wait_state(box, "reachability-online.target", "active", "online once the uplink is there")
    assert started - up < 3.0, f"reachability-online.target started {started - up:.1f} s after the uplink"
    wait_state(box, "bound.service", "active", "started with the target (WantedBy=)")
    wait_state(box, "reachability-unmetered.target", "active", "the kernel backend is never metered")
    assert_quiet(box, "reachabilityd-units.service")
    # A blink shorter than the delay (2 s) stops nothing.
    entered = unit_property(box, "reachability-online.target", "ActiveEnterTimestampMonotonic")
    box.run(["ip", "link", "set", "up1", "down"])
    box.run(["ip", "link", "set", "up1", "up"])
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        assert active_state(box, "reachability-online.target") == "active", "stopped by a blink"
        time.sleep(0.2)
    assert unit_property(box, "reachability-online.target", "ActiveEnterTimestampMonotonic") == entered
    # A carrier loss that lasts: stopped after the delay, and what is bound to it with it.
    lost = time.monotonic()
    box.run(["ip", "link", "set", "up1", "down"])
    stopped = wait_state(box, "reachability-online.target", "inactive", "stopped after the carrier loss")
    assert 1.5 <= stopped - lost < 2.0 + 2.0, f"stopped {stopped - lost:.1f} s after the carrier loss (delay 2 s)"
    wait_state(box, "bound.service", "inactive", "BindsTo= stops it with the target", timeout=5)
    wait_state(box, "reachability-unmetered.target", "inactive", "not reachable: not unmetered either", timeout=5)
    # Back: both targets again, and the bound unit.
    box.run(["ip", "link", "set", "up1", "up"])
    wait_state(box, "reachability-online.target", "active", "online again")
    wait_state(box, "bound.service", "active", "started again with the target")
    security = box.run(["systemd-analyze", "security", "--no-pager", "reachabilityd-units.service"]).stdout
    (OUT / "security-units.txt").parent.mkdir(parents=True, exist_ok=True)
    (OUT / "security-units.txt").write_text(security)
    exposure = float(re.search(r"Overall exposure level for reachabilityd-units.service: ([0-9.]+)", security)[1])
    assert exposure <= 1.5, security
    assert unit_property(box, "reachabilityd-units.service", "CapabilityBoundingSet") == ""
    verify = box.run(["systemd-analyze", "verify", *FOLLOWING], check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_the_targets_are_never_started_while_their_condition_is_false(request):
    """However they are pulled in — the Wants= + After= idiom people write for
    network-online.target, a unit's Requires=, a manual systemctl start — the two targets stay
    inactive while offline, and while the helper does not run (nobody knows the condition);
    online, with the helper, the same pull starts them. (They once started while offline and
    stayed active.)"""
    box = build_box(request, FOLLOWING)
    for name, dependency in (("wants", "Wants"), ("requires", "Requires")):
        box.path(f"/etc/systemd/system/pull-{name}.service").write_text(
            f"[Unit]\n{dependency}=reachability-online.target reachability-unmetered.target\n"
            "After=reachability-online.target reachability-unmetered.target\n"
            "[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n")
    box.run(["systemctl", "daemon-reload"])
    targets = ["reachability-online.target", "reachability-unmetered.target"]

    def pull_everything(what):
        for unit in ("pull-wants.service", "pull-requires.service"):
            box.run(["systemctl", "restart", unit])
        box.run(["systemctl", "start", *targets])
        for target in targets:
            assert active_state(box, target) == "inactive", f"{target} active {what}"
            assert unit_property(box, target, "ConditionResult") == "no", f"{target}: {what}"

    # No helper, online: nobody knows the condition.
    add_uplink(box)
    pull_everything("online, with no helper running")
    # The helper, offline.
    box.run(["ip", "link", "set", "up1", "down"])
    box.run(["systemctl", "start", "reachabilityd-units.service"])
    harness.wait_until(lambda: "stopping it" in box.run(["journalctl", "--no-pager", "-u",
                                                          "reachabilityd-units.service"]).stdout,
                       20, "the helper's first answer", poll=0.2)
    pull_everything("offline, with the helper running")
    # Online: the helper starts both, and the same pulls find them active.
    box.run(["ip", "link", "set", "up1", "up"])
    for target in targets:
        wait_state(box, target, "active", "online, started by the helper")
    box.run(["systemctl", "stop", *targets])
    box.run(["systemctl", "restart", "pull-wants.service"])
    for target in targets:
        assert active_state(box, target) == "active", f"{target} not started by Wants= while online"
    # Offline again: the condition files go at once (before the debounce stops the targets),
    # so that nothing starts them meanwhile; then the helper stops them.
    box.run(["ip", "link", "set", "up1", "down"])
    harness.wait_until(lambda: not box.path("/run/reachabilityd-units/online").exists(), 5,
                       "the condition file removed once offline", poll=0.05)
    for target in targets:
        wait_state(box, target, "inactive", "stopped once offline")
    pull_everything("offline again")


def networkmanager_uplink(box: ct.Container) -> None:
    """A veth pair inside the container whose inner end NetworkManager manages with a static
    profile (192.0.2.10/24 via 192.0.2.1, no IPv6, no connectivity check), connected."""
    box.sh("mkdir -p /etc/NetworkManager/conf.d /etc/NetworkManager/system-connections; "
           "printf '[main]\\nno-auto-default=*\\n[keyfile]\\nunmanaged-devices=interface-name:up1\\n"
           "[connectivity]\\nenabled=false\\n' > /etc/NetworkManager/conf.d/90-test-uplink.conf; "
           "printf '[connection]\\nid=reach-up0\\ntype=ethernet\\ninterface-name=up0\\n"
           "[ipv4]\\nmethod=manual\\naddress1=192.0.2.10/24,192.0.2.1\\n[ipv6]\\nmethod=ignore\\n' "
           "> /etc/NetworkManager/system-connections/reach-up0.nmconnection; "
           "chmod 600 /etc/NetworkManager/system-connections/reach-up0.nmconnection; "
           "ip link add up0 type veth peer name up1; ip link set up1 up; "
           "systemctl restart NetworkManager.service; nmcli connection reload")
    # Whatever profile NetworkManager chose by itself (the machine's own may match any Ethernet).
    box.run(["nmcli", "connection", "up", "reach-up0", "ifname", "up0"], timeout=60)
    harness.wait_until(lambda: box.run(["nmcli", "-g", "GENERAL.STATE", "device", "show", "up0"],
                                       check=False).stdout.startswith("100"),
                       30, "NetworkManager connected on up0",
                       lambda: box.run(["nmcli", "device"], check=False).stdout, poll=0.2)
    box.sh(GATEWAY_NEIGHBOUR)


def test_a_backup_bound_to_the_unmetered_target_stops_on_a_metered_link(request):
    box = build_box(request, FOLLOWING)
    networkmanager_uplink(box)
    box.path("/etc/systemd/system/backup.service").write_text(
        "[Unit]\nBindsTo=reachability-unmetered.target\nAfter=reachability-unmetered.target\n"
        "[Service]\nExecStart=/bin/sleep infinity\n[Install]\nWantedBy=reachability-unmetered.target\n")
    box.run(["systemctl", "daemon-reload"])
    box.run(["systemctl", "enable", "backup.service"])
    box.run(["systemctl", "enable", "--now", "reachabilityd-units.service"])
    wait_state(box, "reachability-unmetered.target", "active", "NetworkManager's link, not metered")
    wait_state(box, "backup.service", "active", "the backup started with the target")
    assert json.loads(box.run(["reachctl", "--daemon", "--json", "status"]).stdout)["metered"] is False

    def metered(value: str) -> float:
        box.run(["nmcli", "connection", "modify", "reach-up0", "connection.metered", value])
        box.run(["nmcli", "device", "reapply", "up0"])
        return time.monotonic()

    turned = metered("yes")
    stopped = wait_state(box, "reachability-unmetered.target", "inactive", "the link turned metered")
    assert stopped - turned < 2.0 + 3.0, f"stopped {stopped - turned:.1f} s after metered yes (delay 2 s)"
    wait_state(box, "backup.service", "inactive", "BindsTo= stopped the backup", timeout=5)
    assert active_state(box, "reachability-online.target") == "active", "metered is still online"
    metered("no")
    wait_state(box, "reachability-unmetered.target", "active", "not metered again")
    wait_state(box, "backup.service", "active", "the backup started again")


def test_the_readme_applet_hears_systemctl_restart(request):
    box = build_box(request, [])
    add_uplink(box)
    applet = box.popen(["python3", readme_applet(box)], user="reachabilityd-metrics", stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    request.addfinalizer(lambda: box.stop(applet))
    lines = Lines(applet)
    lines.wait_for(lambda line: line == "online 0x2", "the applet's first line (its call started the service)", 20)
    for carrier, expected in (("down", "offline 0x0"), ("up", "online 0x2")):
        box.run(["systemctl", "stop", "reachabilityd.service"])
        box.run(["ip", "link", "set", "up1", carrier])  # changed while no daemon runs
        restarted = time.monotonic()
        box.run(["systemctl", "start", "reachabilityd.service"])
        lines.wait_for(lambda line, e=expected: line == e, f"the applet after the restart (carrier {carrier})",
                       timeout=max(2.0 - (time.monotonic() - restarted), 0.01))
    # And systemctl restart itself, nothing changed: the same state, said again.
    box.run(["systemctl", "restart", "reachabilityd.service"])
    lines.wait_for(lambda line: line == "online 0x2", "the applet after systemctl restart", timeout=2.0)


# The clients' longest wait between attempts to start the service, in the test below.
CAP = 8


def test_watchers_come_back_after_a_long_mask_within_the_cap(request):
    """Masked past the clients' six fast attempts (about 31 s) and through three at the cap, each
    of which the bus refused, then unmasked: reachctl watch and the library show the truth again
    within the cap, with no other call starting the service. The cap is REACHABILITY_RESTART_CAP's
    (CAP s here; 30 s by default, which the unit tests of the backoff hold): the same attempts as
    two minutes masked at the default, in a third of the time."""
    box = build_box(request, [])
    add_uplink(box)
    example = example_binary()
    logs = harness.short_tmpdir("reach-mask-")
    request.addfinalizer(lambda: shutil.rmtree(logs, ignore_errors=True))
    environment = ["env", "REACHABILITY_DEBUG=1", f"REACHABILITY_RESTART_CAP={CAP}"]
    with open(logs / "watch.log", "wb") as watch_log, open(logs / "example.log", "wb") as example_log:
        watch = box.popen([*environment, "reachctl", "--daemon", "--json", "watch"], stdout=subprocess.PIPE,
                          stderr=watch_log)
        listener = box.popen([*environment, str(example), "--daemon"], stdout=subprocess.PIPE,
                             stdin=subprocess.PIPE, stderr=example_log)
    request.addfinalizer(lambda: (box.stop(watch), box.stop(listener)))
    watch_lines, listener_lines = Lines(watch), Lines(listener)

    def watch_status(status):
        return lambda line: line.startswith("{") and json.loads(line).get("status") == status

    def listener_status(word):
        return lambda line: line.startswith(f"status {word} ")

    watch_lines.wait_for(watch_status(2), "reachctl watch: Status 2", timeout=20)
    listener_lines.wait_for(listener_status("reachable-ethernetOrWiFi"), "the library: reachable", timeout=20)
    box.run(["systemctl", "mask", "reachabilityd.service"])
    masked = time.monotonic()
    box.run(["systemctl", "stop", "reachabilityd.service"])
    watch_lines.wait_for(watch_status(-1), "reachctl watch: Unknown", timeout=5)
    listener_lines.wait_for(listener_status("unknown"), "the library: unknown", timeout=5)
    spent = "could not be started again (6 attempts)"
    for name in ("watch.log", "example.log"):
        harness.wait_until(lambda n=name: spent in (logs / n).read_text(errors="replace"), 60,
                           f"{name}: the fast attempts spent", lambda n=name: harness.tail(logs / n, 20), poll=0.5)
    # Still following the name at the cap: the ninth attempt (the third at the cap) comes about
    # 31 + 3 x CAP s after the mask, and the clients have not given up.
    ninth = f"again (attempt 9, one every {CAP} s)"
    for name in ("watch.log", "example.log"):
        harness.wait_until(lambda n=name: ninth in (logs / n).read_text(errors="replace"), 150,
                           f"{name}: attempts at the cap while masked", lambda n=name: harness.tail(logs / n, 20),
                           poll=0.5)
    assert time.monotonic() - masked >= 30 + 2 * CAP, "the attempts at the cap came sooner than the cap allows"
    box.run(["systemctl", "unmask", "reachabilityd.service"])
    unmasked = time.monotonic()
    watch_lines.wait_for(watch_status(2), "reachctl watch: Status 2 again within the cap", timeout=CAP + 5)
    listener_lines.wait_for(listener_status("reachable-ethernetOrWiFi"), "the library: reachable again",
                            timeout=max(CAP + 5 - (time.monotonic() - unmasked), 0.01))
    assert active_state(box, "reachabilityd.service") == "active"
