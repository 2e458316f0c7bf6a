"""``reachctl metrics``: the daemon's metrics in the Prometheus text format (docs/metrics.md, "Metrics").

* The text passes Prometheus's own checker (``promtool check metrics``) and says
  what the issue asks: every watched target with its flags as labels, its
  changes, the path's interfaces, the backend, NetworkManager's returns, the
  evaluation latency histogram, lookups in flight, the clients.
* ``--textfile FILE`` keeps FILE for node_exporter: rewritten (a new inode, by
  rename) after a change, and not at all while nothing changes.
* A target released is gone from the text (its name is nobody's business after).
* The example alert rule in ``data/`` fires when the internet target has been
  unreachable for five minutes, and not before (``promtool test rules``).

The daemon runs on a private system bus with the kernel backend; reachctl runs as
root (the policy's root-and-adm rule is tested in test_install_files.py).
"""

import os
import re
import signal
import subprocess
import time

import pytest

import harness
from harness import MANAGER_IFACE, ROOT_PATH, SERVICE

REACHCTL = harness.daemon_binary().parent / "reachctl"


def reachctl_env(lab):
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DBUS_SYSTEM_BUS_ADDRESS": lab.bus.address,
            "LANG": "C.UTF-8"}


def metrics(lab):
    done = subprocess.run([str(REACHCTL), "metrics"], capture_output=True, text=True, timeout=30,
                          env=reachctl_env(lab), check=False)
    assert done.returncode == 0, f"reachctl metrics failed ({done.returncode}): {done.stderr}"
    assert done.stderr == "", done.stderr
    return done.stdout


def samples(text, name):
    """``{labels-string: value}`` of metric ``name``."""
    found = {}
    for line in text.splitlines():
        match = re.match(rf"^{name}(\{{.*\}})? (\S+)$", line)
        if match:
            found[match.group(1) or ""] = float(match.group(2))
    return found


@pytest.fixture
def daemon(plain_lab):
    return plain_lab.daemon(args=["--system", "--backend", "kernel"])


def test_metrics_pass_promtool_and_say_what_is_watched(plain_lab, daemon):
    client = plain_lab.client
    client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.1",))
    client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", ("localhost",))
    client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddressPair", "ss", ("127.0.0.1", "127.0.0.1"))
    client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath")
    text = metrics(plain_lab)
    checked = subprocess.run([harness.need_tool("promtool"), "check", "metrics"], input=text, capture_output=True,
                             text=True, timeout=30, check=False)
    assert checked.returncode == 0, f"promtool check metrics:\n{checked.stdout}{checked.stderr}\n{text}"

    reachable = samples(text, "reachability_target_reachable")
    assert reachable.get('{target="127.0.0.1",kind="address"}') == 1, reachable
    assert reachable.get('{target="127.0.0.1,127.0.0.1",kind="pair"}') == 1, reachable
    assert '{target="internet",kind="internet"}' in reachable, reachable
    flags = samples(text, "reachability_target_flags")
    loopback = [labels for labels in flags if 'target="127.0.0.1"' in labels]
    assert len(loopback) == 1, flags
    assert 'reachable="1"' in loopback[0] and 'is_local_address="1"' in loopback[0], loopback
    assert 'interface_type="loopback"' in loopback[0] and flags[loopback[0]] == 196610, flags
    assert samples(text, "reachability_target_changes_total"), text
    assert samples(text, "reachability_backend").get('{backend="kernel"}') == 1, text
    assert samples(text, "reachability_networkmanager_restarts_total") == {"": 0}, text
    assert samples(text, "reachability_lookups_in_flight") == {"": 0}, text
    assert samples(text, "reachability_clients") == {"": 1}, text
    assert samples(text, "reachability_targets") == {'{kind="internet"}': 1, '{kind="host"}': 1,
                                                     '{kind="address"}': 1, '{kind="pair"}': 1}, text
    assert samples(text, "reachability_evaluation_seconds_count")[""] >= 1, text
    assert samples(text, "reachability_path_interface_usable"), text

    # Released: the target's series go with it.
    client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o",
                (ROOT_PATH + "/address/_3127_2e0_2e0_2e1",))
    harness.wait_until(lambda: 'target="127.0.0.1"' not in metrics(plain_lab), harness.CHANGE_TIMEOUT,
                       "the released target to leave the metrics", poll=0.1)


def test_textfile_is_rewritten_on_change_only(plain_lab, daemon, tmp_path):
    path = tmp_path / "reachability.prom"
    log = tmp_path / "reachctl.log"
    process = harness.Process("reachctl", [REACHCTL, "metrics", "--textfile", path], log,
                              env=reachctl_env(plain_lab))

    def describe():
        return f"reachctl log:\n{harness.tail(log, 40)}\n{daemon.log_text()[-2000:]}"

    try:
        harness.wait_until(lambda: path.exists() or not process.running, harness.CHANGE_TIMEOUT,
                           "the textfile to be written", describe, poll=0.05)
        assert process.running, describe()
        assert "reachability_target_reachable" in path.read_text()
        # Nothing changes: nothing is written, and reachctl is not woken (the benchmark counts a
        # whole minute). It once woke every second: Swift's global executor on Linux (libdispatch's
        # pool) starts a monitor timer with its first job. The lab is the machine's own namespace,
        # whose network may move meanwhile (a dead gateway's neighbour entry failing is a change of
        # the internet's answer): a window counts when the service announced no change in it
        # (Metrics.Changed, the signal reachctl follows), and one comes within the bound.
        context = harness.main_context()
        deadline = time.monotonic() + harness.CHANGE_TIMEOUT * 3
        with harness.metrics_changes(plain_lab.client) as changes:
            while True:
                harness.pump(context)
                first, told = os.stat(path).st_ino, len(changes)
                woken = harness.idle_wakeups(process.pid, 2.0)
                after = os.stat(path).st_ino
                # Whatever the service announced before reachctl could have written is in by its answer.
                plain_lab.client.call(SERVICE, ROOT_PATH, "org.freedesktop.DBus.Peer", "Ping")
                harness.pump(context)
                if len(changes) == told:
                    break
                assert time.monotonic() < deadline, "the service announced changes all along: no quiet window"
        assert after == first, "rewritten while nothing changed"
        assert woken == {}, f"reachctl woke while nothing changed (thread: wake-ups): {woken}"
        plain_lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.1",))
        harness.wait_until(lambda: 'target="127.0.0.1"' in path.read_text(), harness.CHANGE_TIMEOUT,
                           "the new target in the textfile", describe, poll=0.02)
        assert os.stat(path).st_ino != first, "not replaced by rename"
        leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("reachability.prom.tmp")]
        assert not leftovers, leftovers
    finally:
        status = process.stop()
    assert status in (0, -signal.SIGTERM), describe()


class TextfileWriter:
    """``reachctl metrics --textfile`` on the lab's bus, its file and its log; ``extra`` goes to reachctl."""

    def __init__(self, lab, daemon, tmp_path, *extra):
        self.path = tmp_path / "reachability.prom"
        self.log = tmp_path / "reachctl.log"
        self.daemon = daemon
        self.process = harness.Process("reachctl", [REACHCTL, "metrics", "--textfile", self.path, *extra], self.log,
                                       env=reachctl_env(lab))

    def describe(self):
        text = self.path.read_text() if self.path.exists() else "(no file)"
        return f"file:\n{text}\nreachctl log:\n{harness.tail(self.log, 40)}\n{self.daemon.log_text()[-2000:]}"

    def up(self):
        return samples(self.path.read_text(), "reachability_up") if self.path.exists() else {}

    def wait_up(self, value, what, timeout=harness.CHANGE_TIMEOUT):
        harness.wait_until(lambda: self.up() == {"": value} or not self.process.running, timeout, what,
                           self.describe, poll=0.05)
        assert self.process.running, self.describe()


def test_textfile_says_when_the_daemon_is_gone(plain_lab, daemon, tmp_path):
    """The daemon stops under a running writer: the file says so at once
    (reachability_up 0, none of the targets' last values, a fresh liveness time), and
    the daemon's metrics are back when it is."""
    writer = TextfileWriter(plain_lab, daemon, tmp_path)
    path, describe = writer.path, writer.describe
    try:
        writer.wait_up(1, "the textfile with reachability_up 1")
        assert samples(path.read_text(), "reachability_target_reachable"), describe()
        daemon.stop()
        writer.wait_up(0, "reachability_up 0 after the stop")
        text = path.read_text()
        assert not samples(text, "reachability_target_reachable"), describe()
        assert samples(text, "reachctl_textfile_updated_timestamp_seconds"), describe()
        checked = subprocess.run([harness.need_tool("promtool"), "check", "metrics"], input=text,
                                 capture_output=True, text=True, timeout=30, check=False)
        assert checked.returncode == 0, f"promtool check metrics:\n{checked.stdout}{checked.stderr}\n{text}"
        daemon.start()
        writer.wait_up(1, "reachability_up 1 once it is back")
        assert samples(path.read_text(), "reachability_target_reachable"), describe()
    finally:
        status = writer.process.stop()
    assert status in (0, -signal.SIGTERM), describe()


def test_textfile_says_when_the_daemon_hangs(plain_lab, daemon, tmp_path):
    """The daemon stops answering but keeps its name (SIGSTOP: a hang, which sends no
    signal): at its next heartbeat the writer asks the live service, gets no answer within
    its bound and writes reachability_up 0 with none of the last values; once the daemon
    answers again, its metrics are back. (It once kept reachability_up 1 with a fresh time
    for as long as the hang lasted.)"""
    # --liveness 2: a heartbeat every 2 s, each asking the service within 1 s.
    writer = TextfileWriter(plain_lab, daemon, tmp_path, "--liveness", "2")
    path, describe = writer.path, writer.describe
    stopped = False
    try:
        writer.wait_up(1, "the textfile with reachability_up 1")
        os.kill(daemon.pid, signal.SIGSTOP)
        stopped = True
        # The bound: one heartbeat (2 s) and its question's timeout (1 s), with room.
        writer.wait_up(0, "reachability_up 0 while the daemon hangs", 6)
        assert not samples(path.read_text(), "reachability_target_reachable"), describe()
        assert "did not answer" in writer.log.read_text(), describe()
        os.kill(daemon.pid, signal.SIGCONT)
        stopped = False
        writer.wait_up(1, "reachability_up 1 once it answers again", 6)
        assert samples(path.read_text(), "reachability_target_reachable"), describe()
    finally:
        if stopped:
            os.kill(daemon.pid, signal.SIGCONT)
        status = writer.process.stop()
    assert status in (0, -signal.SIGTERM), describe()


@pytest.mark.parametrize("extra", [[], ["--textfile", "reachability.prom"]], ids=["print", "textfile"])
def test_metrics_without_a_daemon_is_a_sentence(plain_lab, extra, tmp_path):
    """No daemon on the bus: `reachctl metrics` (and `--textfile`, which once crashed there, its
    follower dropped inside its own connection's dispatch) exits 2 with one sentence."""
    argv = [str(REACHCTL), "metrics"] + [str(tmp_path / a) if a.endswith(".prom") else a for a in extra]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=harness.START_TIMEOUT,
                          env=reachctl_env(plain_lab), check=False)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert done.stderr.startswith("reachctl: ") and "Fatal error" not in done.stderr, done.stderr
