"""The daemon's log, as journald, a log file and a terminal receive it (docs/logs.md, "Logs").

* Journal: the daemon's standard error is a file whose device and inode the
  test passes in ``JOURNAL_STREAM``, as systemd does for a unit whose output
  goes to the journal; the daemon must then write the journal's native
  protocol to the socket ``REACHABILITYD_JOURNAL_SOCKET`` names. The reader
  is a datagram socket of the test's that parses the protocol as
  systemd-journald does (``KEY=value`` lines, and ``KEY`` + 64-bit length +
  bytes for a value with a newline), and the test checks priorities,
  ``MESSAGE_ID`` and the ``REACH_*`` fields of the events it causes: the
  backend chosen, a client over its limit (once per client), a level set
  through LogControl1 (after which debug records arrive). Nothing goes to
  standard error meanwhile.
* A file without ``JOURNAL_STREAM``: every line starts with ``<N>``.
* A terminal (a pty): plain text, ``reachabilityd: …``, no ``<N>``.
"""

import os
import pty
import select
import signal
import socket
import struct
import subprocess
import time

import pytest

import harness
from harness import MANAGER_IFACE, PROPERTIES_IFACE, ROOT_PATH, SERVICE

LOG_CONTROL = "org.freedesktop.LogControl1"
LOG_CONTROL_PATH = "/org/freedesktop/LogControl1"
# The fixed MESSAGE_IDs (docs/logs.md, "Logs").
BACKEND_SWITCHED = "fa00c6ee61ec4390a2c2f5f794c7df0e"
NETWORKMANAGER_LOST = "3b72a8faf230487db934fc4db8fc3f27"
NETWORKMANAGER_BACK = "70409e70b8b248a0985ae7ad23f62f20"
CLIENT_OVER_LIMIT = "a7e0729a5d0c4c9abf6dd56c9a99bea0"
INTERNET_CHANGED = "c8cfc4f5835a477292a078ce93c1b050"
PATH_CHANGED = "d950621a64b24d8b85a3bbdefe3ebb26"


def parse_entry(data: bytes) -> dict:
    """One datagram of the journal's native protocol → ``{field: value}`` (as journald reads it)."""
    fields, i = {}, 0
    while i < len(data):
        end = data.index(b"\n", i)
        line = data[i:end]
        if b"=" in line:
            key, value = line.split(b"=", 1)
            i = end + 1
        else:
            key = line
            (size,) = struct.unpack("<Q", data[end + 1:end + 9])
            value = data[end + 9:end + 9 + size]
            assert data[end + 9 + size:end + 10 + size] == b"\n", f"binary field {key!r} not ended by a newline"
            i = end + 10 + size
        name = key.decode()
        assert name and all(c.isupper() or c.isdigit() or c == "_" for c in name) and not name.startswith("_"), \
            f"not a field name a client may send: {name!r}"
        fields[name] = value.decode()
    return fields


class JournalReader:
    """A datagram socket standing in for /run/systemd/journal/socket."""

    def __init__(self, path):
        self.path = str(path)
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(self.path)
        os.chmod(self.path, 0o666)  # the daemon may run as another user
        self.entries = []

    def wait_for(self, predicate, what: str, describe, timeout: float = harness.CHANGE_TIMEOUT) -> dict:
        """The first entry (received so far or later) that ``predicate`` accepts."""
        for entry in self.entries:
            if predicate(entry):
                return entry
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no journal entry {what} within {timeout} s; received:\n"
                                     + "\n".join(map(str, self.entries)) + "\n" + describe())
            ready, _, _ = select.select([self.socket], [], [], left)
            if ready:
                entry = parse_entry(self.socket.recv(1 << 20))
                self.entries.append(entry)
                if predicate(entry):
                    return entry

    def close(self):
        self.socket.close()
        os.unlink(self.path)


class RawDaemon:
    """reachabilityd started by the test with the standard error and environment it needs."""

    def __init__(self, lab, args, stderr, env):
        environment = dict(os.environ)
        environment.pop("JOURNAL_STREAM", None)
        environment.pop("DBUS_SESSION_BUS_ADDRESS", None)
        environment.update(env)
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = lab.bus.address
        self.process = subprocess.Popen([str(harness.daemon_binary()), "--system"] + args,
                                        stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr, env=environment,
                                        start_new_session=True)
        self.lab = lab

    def wait_ready(self, describe):
        return self.lab.client.wait_for_name(SERVICE, harness.START_TIMEOUT,
                                             alive=lambda: self.process.poll() is None, describe=describe)

    def stop(self):
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(harness.STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait(harness.STOP_TIMEOUT)
        return self.process.returncode


def test_journal_native_protocol(plain_lab, tmp_path):
    """JOURNAL_STREAM names standard error: every record goes to the journal socket, with its
    priority, identifier, MESSAGE_ID and REACH_* fields; standard error stays empty."""
    reader = JournalReader(tmp_path / "journal.socket")
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "wb") as stderr:
        status = os.fstat(stderr.fileno())
        daemon = RawDaemon(plain_lab, ["--backend", "auto", "--max-targets-per-client", "1"], stderr, {
            "JOURNAL_STREAM": f"{status.st_dev}:{status.st_ino}",
            "REACHABILITYD_JOURNAL_SOCKET": reader.path,
        })

    def describe():
        return "standard error:\n" + stderr_path.read_text(errors="replace")

    try:
        daemon.wait_ready(describe)
        serving = reader.wait_for(lambda e: e.get("MESSAGE", "").startswith("serving "), "saying it serves",
                                  describe)
        assert serving["PRIORITY"] == "6" and serving["SYSLOG_IDENTIFIER"] == "reachabilityd", serving
        assert serving["SYSLOG_FACILITY"] == "3" and "MESSAGE_ID" not in serving, serving
        # No NetworkManager on this bus: auto chooses the kernel.
        backend = reader.wait_for(lambda e: e.get("MESSAGE_ID") == BACKEND_SWITCHED, "for the backend", describe)
        assert backend["PRIORITY"] == "6" and backend["REACH_BACKEND"] == "kernel", backend
        assert backend["REACH_BACKEND_MODE"] == "auto", backend
        # The internet's first answer: one notice, in words, with its reason and interface.
        internet = reader.wait_for(lambda e: e.get("MESSAGE_ID") == INTERNET_CHANGED, "for the internet's answer",
                                   describe)
        assert internet["PRIORITY"] == "5" and internet["MESSAGE"].startswith("internet: "), internet
        assert "REACH_REASON" in internet and "REACH_INTERFACE" in internet, internet
        assert (internet["REACH_REASON"] == "") == internet["MESSAGE"].startswith("internet: reachable"), internet

        # A client over its limit: logged once (with its unique name and the target it asked for).
        client = plain_lab.client
        me = client.conn.get_unique_name()
        client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.1",))
        for address in ("::1", "127.0.0.2"):
            failure = client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", (address,))
            assert failure is not None and failure.name == SERVICE + ".Error.TooManyTargets", failure
        over = reader.wait_for(lambda e: e.get("MESSAGE_ID") == CLIENT_OVER_LIMIT, "for the client's limit",
                               describe)
        assert over["PRIORITY"] == "5", over
        assert over["REACH_CLIENT"] == me and over["REACH_TARGET"] == "::1", over
        assert me in over["MESSAGE"] and "limit" in over["MESSAGE"], over

        # Root sets the level through LogControl1: a notice says so, and debug records follow.
        client.call(SERVICE, LOG_CONTROL_PATH, PROPERTIES_IFACE, "Set", "ssv",
                    (LOG_CONTROL, "LogLevel", harness.GLib.Variant("s", "debug")))
        level = reader.wait_for(lambda e: e.get("MESSAGE", "").startswith("log level set to debug"),
                                "for the new level", describe)
        assert level["PRIORITY"] == "5", level
        # Records arrive in order from one socket: the second refusal was not logged.
        overs = [e for e in reader.entries if e.get("MESSAGE_ID") == CLIENT_OVER_LIMIT]
        assert len(overs) == 1, overs
        # Nothing changed on the network meanwhile: the internet's notice came once.
        assert len([e for e in reader.entries if e.get("MESSAGE_ID") == INTERNET_CHANGED]) == 1, reader.entries
        assert client.call(SERVICE, LOG_CONTROL_PATH, PROPERTIES_IFACE, "Get", "ss",
                           (LOG_CONTROL, "LogTarget")) == ("journal",)
        # Holding the path object evaluates the paths, which the debug level reports.
        client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath")
        debug = reader.wait_for(lambda e: e.get("PRIORITY") == "7", "at priority debug", describe)
        assert debug["SYSLOG_IDENTIFIER"] == "reachabilityd" and "path evaluated" in debug["MESSAGE"], debug
    finally:
        status = daemon.stop()
        reader.close()
    assert status == 0, describe()
    leaked = [line for line in stderr_path.read_text(errors="replace").splitlines() if line.strip()]
    assert not leaked, f"written to standard error while the journal was there: {leaked}"


def test_priority_prefixes_without_journal(plain_lab):
    """Standard error is a file and JOURNAL_STREAM does not name it: ``<N>`` on every line."""
    daemon = plain_lab.daemon(args=["--system", "--backend", "kernel", "--verbose"])
    plain_lab.client.call(SERVICE, ROOT_PATH, "io.github.reachabilityd.Reachability1.Target", "Refresh")
    harness.wait_until(lambda: "<6>backend: kernel" in daemon.log_text(), harness.CHANGE_TIMEOUT,
                       "the backend line", daemon.log_text, poll=0.05)
    # The Refresh is answered before its evaluation's debug line is written: wait for that line
    # (bounded) rather than read the log once.
    harness.wait_until(lambda: "\n<7>evaluated " in daemon.log_text(), harness.CHANGE_TIMEOUT,
                       "--verbose: the evaluation's debug line", daemon.log_text, poll=0.05)
    lines = [line for line in daemon.log_text().splitlines() if line and not line.startswith("===== ")]
    assert lines, daemon.log_text()
    unprefixed = [line for line in lines if not (line[:1] == "<" and line[1:2].isdigit() and line[2:3] == ">")]
    assert not unprefixed, f"lines without a priority prefix: {unprefixed}"
    assert any(line.startswith("<6>serving ") for line in lines), lines
    assert any(line.startswith("<7>") for line in lines), "--verbose: no debug line"


def test_plain_text_on_a_terminal(plain_lab):
    """Standard error is a terminal: ``reachabilityd: …`` lines, no priority prefix."""
    master, slave = pty.openpty()
    daemon = RawDaemon(plain_lab, ["--backend", "kernel"], slave, {})
    os.close(slave)
    seen = b""

    def describe():
        return "terminal output:\n" + seen.decode(errors="replace")

    try:
        daemon.wait_ready(describe)
        deadline = time.monotonic() + harness.CHANGE_TIMEOUT
        # The name is taken once the backend has answered: "serving" comes after "backend".
        while not (b"backend: kernel" in seen and b"serving " in seen) and time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], max(0.0, deadline - time.monotonic()))
            if ready:
                seen += os.read(master, 4096)
    finally:
        daemon.stop()
        os.close(master)
    text = seen.decode(errors="replace").replace("\r\n", "\n")
    lines = [line for line in text.splitlines() if line.strip()]
    assert any(line.startswith("reachabilityd: serving ") for line in lines), describe()
    assert any(line.startswith("reachabilityd: backend: kernel") for line in lines), describe()
    assert not [line for line in lines if line.startswith("<")], describe()
