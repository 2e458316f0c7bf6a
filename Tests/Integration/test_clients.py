"""reachctl and the ReachabilitydClient library, run as programs against the daemon
in the real-NetworkManager lab, and in-process (with NetworkManager through
libnm, and with no bus at all).

The clients run where the daemon runs (NetworkManager's namespaces) with the
lab's bus as their system bus. ``reachability-example`` is an application on
the library: it prints every listener call and takes commands on stdin.
"""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

import harness
from harness import IS_DIRECT, REACHABLE, ROOT_PATH, SOMEHOST, CHANGE_TIMEOUT, STOP_TIMEOUT
from test_targets import ROUTED, path_of, records, restart_dnsmasq, start_daemon

BIN = harness.daemon_binary().parent
MISSING = "nosuch.test"
TARGETS = [SOMEHOST[0], ROUTED[0], SOMEHOST[1], "127.0.0.1", MISSING]


def client_env(lab):
    env = dict(os.environ)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    env["DBUS_SYSTEM_BUS_ADDRESS"] = lab.bus.address
    return env


def in_lab(lab, argv):
    return [harness.need_tool("nsenter"), "-t", str(lab.anchor.pid), "-n", "-m", "-u", "--", *map(str, argv)]


def reachctl(lab, *args, env=None):
    """reachctl run to completion where the daemon runs (or, without a lab, here)."""
    argv = [BIN / "reachctl", *args]
    result = subprocess.run(in_lab(lab, argv) if lab else argv, capture_output=True, text=True,
                            timeout=harness.START_TIMEOUT, env=env or (client_env(lab) if lab else None))
    return result


def json_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class Client:
    """A long-running client program with piped stdin/stdout; stopped by PID."""

    def __init__(self, lab, argv, name):
        self.log = lab.directory / f"{name}.log"
        self.lines = []
        with open(self.log, "ab") as log:
            # Unbuffered: a buffered reader takes every line the pipe holds, and the next
            # read_line's select() then sees none of those it kept.
            self.popen = subprocess.Popen(in_lab(lab, argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=log, env=client_env(lab), start_new_session=True, bufsize=0)

    def next_line(self, what, timeout=CHANGE_TIMEOUT):
        line = harness.read_line(self.popen.stdout, timeout)
        if line is None:
            raise harness.WaitTimeout(f"{what}: no line within {timeout} s; lines so far: {self.lines}\n"
                                      f"client log:\n{harness.tail(self.log, 40)}")
        self.lines.append(line.rstrip("\n"))
        return self.lines[-1]

    def send(self, command):
        self.popen.stdin.write(f"{command}\n".encode())
        self.popen.stdin.flush()

    def stop(self, signum=signal.SIGTERM):
        """Stop it; returns the rest of its output."""
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signum)
        try:
            rest, _ = self.popen.communicate(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.kill(self.popen.pid, signal.SIGKILL)
            rest, _ = self.popen.communicate()
        return rest.decode(errors="replace").splitlines()


@pytest.fixture
def clients():
    started = []
    yield lambda *args: started.append(Client(*args)) or started[-1]
    for client in started:
        client.stop(signal.SIGKILL)


def resolvable(lab, name):
    """Whether the lab's resolver answers ``name`` now (as the daemon's lookups would)."""
    return subprocess.run(in_lab(lab, [harness.need_tool("getent"), "ahosts", name]), capture_output=True,
                          timeout=30).returncode == 0


def host_objects(lab):
    objects = lab.client.call(harness.SERVICE, ROOT_PATH, harness.OBJECT_MANAGER_IFACE, "GetManagedObjects")[0]
    return sorted(objects)


# -- reachctl ------------------------------------------------------------------------------------------------


def test_reachctl_answers_from_the_daemon_and_in_process_alike(nm_lab):
    lab = start_daemon(nm_lab)
    daemon = reachctl(lab, "query", "--json", *TARGETS)
    assert daemon.returncode == 1, f"{MISSING} is not reachable: exit 1\n{daemon.stderr}"
    assert "in this process" not in daemon.stderr
    answers = json_lines(daemon.stdout)
    assert [a["target"] for a in answers] == TARGETS
    by_target = {a["target"]: a for a in answers}
    assert all(a["mode"] == "daemon" for a in answers)
    assert by_target[SOMEHOST[0]]["flags"] == REACHABLE | IS_DIRECT
    assert by_target[SOMEHOST[0]]["flag_names"] == ["Reachable", "Directly Reachable Address"]
    assert sorted(by_target[SOMEHOST[0]]["addresses"]) == sorted(SOMEHOST[1:])
    assert by_target[SOMEHOST[0]]["kind"] == "host" and by_target[SOMEHOST[1]]["kind"] == "address"
    assert by_target[ROUTED[0]]["flags"] == REACHABLE and by_target[ROUTED[0]]["interface"] == harness.NM_IFNAME
    assert by_target[MISSING]["flags"] == 0 and by_target[MISSING]["status"] == 0
    assert by_target[MISSING]["error"], "a failed lookup says why"
    assert set(answers[0]) == {"target", "kind", "mode", "flags", "flag_names", "status", "reachable", "interface",
                               "interface_type", "connectivity", "metered", "vpn", "reachable_ipv4",
                               "reachable_ipv6", "addresses", "error", "reason"}

    local = reachctl(lab, "query", "--json", "--no-daemon", *TARGETS)
    assert local.returncode == 1, local.stderr
    assert "--no-daemon; evaluating in this process" in local.stderr
    in_process = json_lines(local.stdout)
    assert all(a.pop("mode") == "in-process" for a in in_process)
    for answer in answers:
        answer.pop("mode")
        if answer["target"] == MISSING:
            # The resolver's wording is GLib's in both; only the presence matters.
            assert in_process[TARGETS.index(MISSING)].pop("error") and answer.pop("error")
    assert in_process == answers

    reachable = reachctl(lab, "query", SOMEHOST[0], "127.0.0.1")
    assert reachable.returncode == 0, reachable.stderr
    assert reachable.stdout.startswith(f"{SOMEHOST[0]}\n  Reachability:  Reachable,Directly Reachable Address")
    # Global options before the command, as after it.
    before = reachctl(lab, "--json", "--daemon", "query", SOMEHOST[0])
    assert before.returncode == 0 and json_lines(before.stdout)[0]["mode"] == "daemon", before
    internet = reachctl(lab)
    assert internet.returncode == 0 and internet.stdout.startswith("internet\n  Reachability:  Reachable")
    assert f"Interface:     {harness.NM_IFNAME} (ethernet)" in internet.stdout
    assert "Connectivity:  full" in internet.stdout


def test_reachctl_without_any_bus_evaluates_in_process():
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/reachctl-test-bus")
    result = reachctl(None, "query", "--json", "127.0.0.1", "::1", env=env)
    assert result.returncode == 0, result.stderr
    assert "no reachabilityd on the system bus; evaluating in this process" in result.stderr
    answers = json_lines(result.stdout)
    assert [(a["target"], a["mode"], a["flag_names"]) for a in answers] == [
        (t, "in-process", ["Reachable", "Local Address", "Directly Reachable Address"]) for t in ("127.0.0.1", "::1")]


@pytest.mark.parametrize("args, message", [
    (["query", "bad_host!"], 'contains "!"'),
    (["query", "fe80::1%nosuch"], "no interface"),
    (["watch", "-"], "label"),
    (["--bogus"], "Unknown option"),
    (["list", "--no-daemon"], "cannot run with --no-daemon"),
    (["--no-daemon", "list"], "cannot run with --no-daemon"),
    (["--daemon", "--no-daemon", "query"], "exclude each other"),
    (["frobnicate"], 'unknown command "frobnicate"; the commands are status, query, watch, wait, list, doctor, '
                     'metrics, follow-units'),
    (["example.com"], "(for a host: reachctl query example.com)"),
    (["query", "http://user@example.com:8080/index.html"],
     '"http://user@example.com:8080/index.html" is a URL; a TARGET is a host name or an address: '
     "for its host, reachctl query example.com"),
    (["watch", "https://[2001:db8::1]/"], "is a URL; a TARGET is a host name or an address: for its host, "
                                          "reachctl watch 2001:db8::1"),
    (["query", "example.com:443"], '"example.com:443" is a host and a port; a TARGET is a host name or an address '
                                   "(reachability does not depend on the port): reachctl query example.com"),
    (["query", "[::1]:22"], "reachctl query ::1"),
    # No system bus: a sentence, not libdbus's error.
    (["list"], "reachabilityd cannot be asked: there is no system bus (Failed to connect to socket "
               "/nonexistent/reachctl-test-bus"),
    (["--daemon", "query", "127.0.0.1"], "there is no system bus"),
])
def test_reachctl_usage_and_bad_input_exit_2(args, message):
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/reachctl-test-bus")
    result = reachctl(None, *args, env=env)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert message in result.stderr and result.stderr.startswith("reachctl: ")


def test_reachctl_global_options_go_before_or_after_the_command():
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent/reachctl-test-bus")
    for args in (["--no-daemon", "query", "127.0.0.1"], ["--json", "--no-daemon", "query", "127.0.0.1"],
                 ["query", "--no-daemon", "--json", "127.0.0.1"], ["--json", "query", "127.0.0.1", "--no-daemon"]):
        result = reachctl(None, *args, env=env)
        assert result.returncode == 0, (args, result.stderr)
        assert "--no-daemon; evaluating in this process" in result.stderr
        assert ("--json" in args) == result.stdout.startswith("{"), (args, result.stdout)


def test_reachctl_without_a_daemon_on_the_bus(plain_lab):
    """A bus without reachabilityd: list and --daemon say so in a sentence;
    doctor says what is missing; without --daemon, query answers in-process."""
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=plain_lab.bus.address)
    for args, hint in ((["list"], "list shows the targets the daemon watches"),
                       (["--daemon", "query", "127.0.0.1"], "without --daemon, reachctl evaluates in this process")):
        result = reachctl(None, *args, env=env)
        assert result.returncode == 2, result
        assert result.stderr == "reachctl: reachabilityd is not running, and the system bus cannot start it " \
                                f"(reachctl doctor says why); {hint}\n", result.stderr
    doctor = reachctl(None, "doctor", env=env)
    assert doctor.returncode == 2, doctor
    assert "activatable      no: the bus has no activation file" in doctor.stdout, doctor.stdout
    assert doctor.stdout.rstrip().endswith("reachabilityd does not work: it is not running and the bus cannot start "
                                           "it: install io.github.reachabilityd.Reachability1.service in "
                                           "/usr/share/dbus-1/system-services, then reload the bus (systemctl reload "
                                           "dbus)."), doctor.stdout
    assert reachctl(None, "query", "127.0.0.1", env=env).returncode == 0


def test_reachctl_list_says_when_nothing_is_watched(plain_lab):
    plain_lab.daemon(args=["--system", "--backend", "kernel"])
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=plain_lab.bus.address)
    listed = reachctl(None, "list", env=env)
    assert (listed.returncode, listed.stdout, listed.stderr) == (0, "reachabilityd watches no target.\n", "")
    assert reachctl(None, "list", "--json", env=env).stdout == ""
    doctor = reachctl(None, "doctor", env=env)
    assert doctor.returncode == 0, doctor
    assert "answers          yes: version " in doctor.stdout and doctor.stdout.endswith("reachabilityd works.\n")


def test_root_list_names_each_targets_holders(plain_lab):
    """Root's `reachctl list` says who holds each target: its user and the connection's
    unique name (Manager.ListHolders); in --json each target's line has its holders. (Another user's call
    is answered with that user's own connections only: test_install_files.py calls every
    member as nobody.)"""
    plain_lab.daemon(args=["--system", "--backend", "kernel"])
    client = plain_lab.client
    client.call(harness.SERVICE, harness.ROOT_PATH, harness.MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.1",))
    unique = client.conn.get_unique_name()
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=plain_lab.bus.address)
    listed = reachctl(None, "list", env=env)
    assert listed.returncode in (0, 1), listed
    assert f"Holders:\n  127.0.0.1  root (uid 0), {unique}\n" in listed.stdout, listed.stdout
    # One line per target, as for every user, each naming its holders.
    records = json_lines(reachctl(None, "list", "--json", env=env).stdout)
    assert [(r["target"], r["holders"]) for r in records] == [("127.0.0.1", [{"client": unique, "uid": 0}])], records
    [rows] = client.call(harness.SERVICE, harness.ROOT_PATH, harness.MANAGER_IFACE, "ListHolders")
    assert rows == [(f"{harness.ROOT_PATH}/address/_3127_2e0_2e0_2e1", unique, 0)], rows


def test_reachctl_json_always_has_flags(plain_lab):
    """--json keeps `flags` when the state is unknown (Status -1): null, not left out. The
    daemon is told to use NetworkManager, which is not on this bus, so it knows nothing."""
    plain_lab.daemon(args=["--system", "--backend", "networkmanager"])
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=plain_lab.bus.address)
    done = reachctl(None, "--daemon", "--json", "status", env=env)
    [record] = json_lines(done.stdout)
    assert record["status"] == -1 and "flags" in record and record["flags"] is None, done.stdout


def test_reachctl_help_documents_exit_status():
    result = reachctl(None, "--help")
    assert result.returncode == 0
    assert "EXIT STATUS" in result.stdout and "2  usage error" in result.stdout


def test_reachctl_list_and_too_many_targets(nm_lab):
    lab = start_daemon(nm_lab, harness_args("--max-targets-per-client", "1"))
    result = reachctl(lab, "watch", SOMEHOST[0], ROUTED[0])
    assert result.returncode == 2, result
    assert "the per-client limit is 1" in result.stderr, result.stderr

    # `list` shows what other clients watch.
    holder = lab.bus.client()
    try:
        holder.call(harness.SERVICE, ROOT_PATH, harness.MANAGER_IFACE, "WatchHost", "s", (SOMEHOST[0],))
        listed = reachctl(lab, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [(a["target"], a["kind"], a["flags"]) for a in json_lines(listed.stdout)] == [
            (SOMEHOST[0], "host", REACHABLE | IS_DIRECT)]
    finally:
        holder.close()


def harness_args(*extra):
    return ["--system", "--verbose", *extra]


def start_kernel_daemon(lab):
    """The daemon with ``--backend kernel`` (a carrier flap is exactly two StatusChanged there)."""
    restart_dnsmasq(lab, records())
    recorder = lab.recorder()
    try:
        lab.daemon(args=harness_args("--backend", "kernel"))
        recorder.sync(interfaces=(harness.MANAGER_IFACE,))
        recorder.wait_props({"Backend": "kernel"}, "Backend kernel", interface=harness.MANAGER_IFACE)
    finally:
        recorder.close()
    return lab


def test_reachctl_watch_lines_carry_the_reason(nm_lab, clients):
    """A name that does not resolve: the watch line says why, as query does."""
    lab = start_daemon(nm_lab)
    expected = json_lines(reachctl(lab, "query", "--json", MISSING).stdout)[0]["error"]
    assert expected
    for mode in ("--daemon", "--no-daemon"):
        watcher = clients(lab, [BIN / "reachctl", mode, "watch", MISSING], f"reachctl-watch{mode}")
        line = watcher.next_line("the first answer")
        while " status=-1 " in line:  # the lookup in flight
            line = watcher.next_line("the lookup's answer")
        assert f"{MISSING}: Not Reachable status=0 interface=- type=- reason=lookup-failed error=" in line, line
        assert line.endswith(" error=" + json.dumps(expected, ensure_ascii=False)), (line, expected)
        watcher.stop()


def test_reachctl_watch_sees_a_flap_as_two_lines(nm_lab, clients):
    lab = start_kernel_daemon(nm_lab)
    recorder = lab.recorder()
    try:
        recorder.sync()
        watcher = clients(lab, [BIN / "reachctl", "watch"], "reachctl-watch")
        first = watcher.next_line("the current state")
        assert first.endswith(f"internet: Reachable status=2 interface={harness.NM_IFNAME} type=ethernet"), first
        # While nothing changes, nothing wakes it (it once woke every second: Swift's global
        # executor on Linux, libdispatch's pool, starts a monitor timer with its first job).
        assert Path(f"/proc/{watcher.popen.pid}/comm").read_text().strip() == "reachctl"
        woken = harness.idle_wakeups(watcher.popen.pid, 2.0)
        if woken and all(count == 1 for count in woken.values()):
            # One wake-up of a thread in 2 s, and then no more, is libdispatch's pool settling
            # after the first line (seen under load: a worker's timed wait, once); a poller
            # wakes again in the next window (and a 1 s poller twice in the first).
            woken = harness.idle_wakeups(watcher.popen.pid, 2.0)
        assert woken == {}, f"reachctl watch woke while nothing changed (thread: wake-ups): {woken}"
        recorder.barrier()
        mark = recorder.mark()
        lab.set_carrier(False)
        assert "internet: Not Reachable status=0" in watcher.next_line("the carrier loss")
        lab.set_carrier(True)
        assert "internet: Reachable status=2" in watcher.next_line("the carrier's return")
        recorder.wait_status(2, REACHABLE, "the daemon's answer after the flap")
        recorder.barrier()
        rest = watcher.stop(signal.SIGINT)
        assert rest == [], f"exactly two lines after the first; also got {rest}"
        assert recorder.status_changes(mark) == [(0, 0), (2, REACHABLE)]
    finally:
        recorder.close()


# -- the library -------------------------------------------------------------------------------------------


# The first line a listener prints for a host on the lab's uplink: its status at startListening,
# with the flags read in the listener (the internet's until the host's own answer has come).
AT_START = ("status reachable-ethernetOrWiFi flags 2", "status reachable-ethernetOrWiFi flags 20002")


def test_library_listener_release_and_daemon_return(nm_lab, clients):
    lab = start_kernel_daemon(nm_lab)
    host_path = path_of("host", SOMEHOST[0])
    recorder = lab.recorder()
    try:
        recorder.sync()
        app = clients(lab, [BIN / "reachability-example", "--daemon", SOMEHOST[0]], "example")
        assert app.next_line("the mode") == "mode daemon"
        # Called at startListening with the flags the manager has (Alamofire 5): the host's,
        # read without a lookup, are the internet's (2); its own answer (20002) then has the
        # same status and is not told again.
        assert app.next_line("the current status") in AT_START, app.lines
        assert host_path in host_objects(lab)

        lab.set_carrier(False)
        assert app.next_line("the carrier loss") == "status notReachable flags 0"
        lab.set_carrier(True)
        assert app.next_line("the carrier's return") == "status reachable-ethernetOrWiFi flags 20002"
        # Just after the carrier's return the lab's name server is not reachable for a moment
        # (NetworkManager rewrites resolv.conf once it has reactivated the connection): the
        # daemon's lookups of the name made meanwhile fail ("Temporary failure in name
        # resolution"). The held target may so be not reachable for a moment (honest answers,
        # each told once); a new watch's first answer is its first lookup's, so the test waits
        # until the name resolves again. Then the held target is reachable again with no call
        # from anybody: the daemon retries a temporary failure, and the rewritten resolv.conf
        # is a change.
        harness.wait_until(lambda: resolvable(lab, SOMEHOST[0]), CHANGE_TIMEOUT,
                           f"{SOMEHOST[0]} resolvable again after the carrier's return", poll=0.2)
        harness.wait_until(lambda: lab.client.get(harness.SERVICE, host_path, harness.TARGET_IFACE, "Status") == 2,
                           CHANGE_TIMEOUT, f"the held {SOMEHOST[0]} reachable again by itself", poll=0.1)

        app.send("stop")
        window = []
        while (line := app.next_line("stopListening")) != "stopped":
            window.append(line)
        assert set(window) <= {"status notReachable flags 0", "status reachable-ethernetOrWiFi flags 20002"}, window
        assert all(a != b for a, b in zip(window, window[1:])), f"a status told twice in a row: {window}"
        harness.wait_until(lambda: host_path not in host_objects(lab), CHANGE_TIMEOUT,
                           "the host target released after stopListening", lambda: str(host_objects(lab)))
        app.send("start")
        assert app.next_line("the status after startListening again") in AT_START, app.lines

        # The daemon leaves: unknown; it comes back: the target is watched again and updates resume.
        daemon = lab.daemons[-1]
        daemon.stop()
        assert app.next_line("the daemon gone") == "status unknown flags -"
        lab.daemon(args=harness_args("--backend", "kernel"))
        assert app.next_line("the daemon back") == "status reachable-ethernetOrWiFi flags 20002"
        harness.wait_until(lambda: host_path in host_objects(lab), CHANGE_TIMEOUT, "the host watched again",
                           lambda: str(host_objects(lab)))

        # The process exits without Release: the daemon lets go of what it held.
        assert app.stop(signal.SIGKILL) == []
        harness.wait_until(lambda: host_objects(lab) == [], CHANGE_TIMEOUT, "no target after the client exit",
                           lambda: str(host_objects(lab)))
        assert app.lines.count("stopped") == 1
    finally:
        recorder.close()


def test_a_name_listener_hears_what_status_says_before_the_name_is_answered(nm_lab, clients):
    """Alamofire's manager for a name whose lookup has no answer yet (the name server stopped):
    ``status`` and ``flags`` read the internet's meanwhile (as Apple's and Alamofire's do), so the
    listener is told each change of them, within 3 s of a carrier flap, long before the lookup
    could end (the resolver waits 5 s for a server). Once ``status`` changed and the listener
    heard nothing until the name's own first answer."""
    lab = start_kernel_daemon(nm_lab)
    pid = lab.dnsmasq.process.pid
    os.kill(pid, signal.SIGSTOP)
    try:
        app = clients(lab, [BIN / "reachability-example", "--daemon", SOMEHOST[0]], "example")
        assert app.next_line("the mode") == "mode daemon"
        assert app.next_line("the current status") == "status reachable-ethernetOrWiFi flags 2", app.lines
        lab.set_carrier(False)
        assert app.next_line("the carrier's loss, the name not answered", timeout=3) == "status notReachable flags 0"
        lab.set_carrier(True)
        assert app.next_line("the carrier's return, the name not answered", timeout=3) == \
            "status reachable-ethernetOrWiFi flags 2", app.lines
    finally:
        os.kill(pid, signal.SIGCONT)


def test_library_in_process_gives_the_daemons_answers(nm_lab, clients):
    lab = start_daemon(nm_lab)
    for target in (SOMEHOST[0], ROUTED[0], "127.0.0.1", MISSING, None):
        answers = []
        for mode in ("--daemon", "--no-daemon"):
            app = clients(lab, [BIN / "reachability-example", mode] + ([target] if target else []),
                          f"example-{mode}")
            app.next_line("the mode")
            answers.append(app.next_line(f"the first status of {target or 'the internet'} ({mode})"))
            app.send("exit")
        if target in (SOMEHOST[0], ROUTED[0], MISSING):
            # A name's first call is its status at startListening (Alamofire 5), from the flags
            # read without a lookup; the flags the listener then reads may already be its own.
            answers = [answer.split(" flags ")[0] for answer in answers]
        assert answers[0] == answers[1], f"{target}: daemon {answers[0]!r}, in-process {answers[1]!r}"


def test_library_rejects_bad_input_with_a_typed_error(nm_lab):
    lab = start_daemon(nm_lab)
    result = subprocess.run(in_lab(lab, [BIN / "reachability-example", "bad_host!"]), capture_output=True,
                            text=True, env=client_env(lab), timeout=harness.START_TIMEOUT)
    assert result.returncode == 2
    assert 'invalid target: host name "bad_host!": label 1' in result.stderr, result.stderr


# -- generated documentation -------------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_committed_completions_match_the_parser(shell):
    generated = reachctl(None, "--generate-completion-script", shell)
    committed = (harness.REPO / "docs" / "completions" / f"reachctl.{shell}").read_text()
    assert generated.returncode == 0 and generated.stdout == committed, \
        "docs/completions is stale: run docs/generate.sh"


def test_man_page_covers_every_command_and_option():
    page = (harness.REPO / "docs" / "man" / "reachctl.1").read_text()
    for word in ("status", "query", "watch", "wait", "list", "Fl -json", "Fl -no-daemon", "EXIT STATUS",
                 ".Sh FILES", '.Sh "SEE ALSO"', "Xr reachabilityd 8"):
        assert word in page, f"{word} missing: run docs/generate.sh"
    # One EXIT STATUS section, reachctl's own: the plugin's ".Ex -std" says >0 is an error, but 1 is
    # "not reachable".
    assert page.count('.Sh "EXIT STATUS"') == 1 and ".Ex -std" not in page, "run docs/generate.sh"
