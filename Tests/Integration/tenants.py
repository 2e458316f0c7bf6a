"""Hostile tenants: users of the machine who attack the service, and a user who only wants an answer.

Shared by ``test_fairness.py`` (sized for a 2-core CI machine) and
``Benchmarks/abuse.py`` (full size). Everything here runs the daemon as root
on a private system bus with Debian's default system policy and the shipped
policy file, in a network namespace with the kernel backend:

* :class:`TenantLab` -- the namespace (a veth uplink ``ten0``: ``192.0.2.1/24``,
  ``2001:db8:1::1/64``, a default route), the bus, the daemon, and
  :class:`DnsServer`, a DNS server in the namespace that answers names under
  ``fast.test`` at once (``192.0.2.10``, ``2001:db8:1::10``: on the uplink's
  link), never answers names under ``never.test`` and answers anything else
  with NXDOMAIN; it counts every query.
* Programs run as other Unix users (``setpriv``), each its own process with
  its own connections: :class:`Child` starts one of the roles at the bottom of
  this file -- ``probe`` (the victim's latency probe: ``Peer.Ping`` and
  ``Get(Status)`` of the root object, one at a time, 1 s timeout), ``tenant``
  (a user driven call by call, recording every signal it receives),
  ``flood`` (pipelined calls on many GDBus connections), ``nonreader``
  (raw sockets that authenticate, say ``Hello``, write calls and never read)
  and ``churn`` (short-lived clients).
* :class:`Attack` -- what every attack measures: the probe's latencies, the
  daemon's RSS (sampled) and CPU time, and the checks of the fairness goals.

The children import this module and ``harness`` from a copy in the lab's
directory (the checkout may not be readable by ``nobody``).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import pwd
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Optional

import harness

BUS_DRIVER, BUS_DRIVER_PATH = "org.freedesktop.DBus", "/org/freedesktop/DBus"
from harness import (MANAGER_IFACE, OBJECT_MANAGER_IFACE, PEER_IFACE, PROPERTIES_IFACE, ROOT_PATH, SERVICE,
                     TARGET_IFACE, DBusCallError, Gio, GLib, WaitTimeout)



def _ordinary_users(count: int) -> list:
    """Uids of ``count`` unprivileged users of this machine other than ``nobody``. dbus-daemon
    refuses a connection whose uid has no passwd entry (it looks its groups up to apply the
    policy), so the tenants must be users the machine knows; these own nothing on the bus."""
    found = []
    for name in ("www-data", "backup", "list", "irc", "proxy", "games", "man", "lp", "mail", "news", "uucp"):
        with contextlib.suppress(KeyError):
            found.append(pwd.getpwnam(name).pw_uid)
    found = [uid for uid in dict.fromkeys(found) if uid not in (0, NOBODY)]
    return (found + [None] * count)[:count]


NOBODY = 65534
VICTIM, OTHER = _ordinary_users(2)

POLICY_FILE = harness.REPO / "dbus" / (SERVICE + ".conf")
INTROSPECTABLE_IFACE = "org.freedesktop.DBus.Introspectable"
TOO_MANY_TARGETS = SERVICE + ".Error.TooManyTargets"
LIMITS_EXCEEDED = "org.freedesktop.DBus.Error.LimitsExceeded"
# A victim's call refused by dbus-daemon itself, not by the service: the bus's queue to the service
# holds more than it allows one destination (max_outgoing_bytes, max_outgoing_unix_fds). The
# probe labels it so; everything else is labelled by its error name.
BUS_QUEUE_FULL = LIMITS_EXCEEDED + " (the bus: destination has a full message queue)"
UNKNOWN_OBJECT = "org.freedesktop.DBus.Error.UnknownObject"

UPLINK = "ten0"
UPLINK_V4, UPLINK_V6 = "192.0.2.1", "2001:db8:1::1"
GATEWAY_V4 = "192.0.2.254"
GATEWAY_LINK_LAYER = "02:00:5e:00:53:fe"  # the gateway's, a permanent neighbour entry (documentation range)
FAST_ZONE, NEVER_ZONE = "fast.test", "never.test"
FAST_V4, FAST_V6 = "192.0.2.10", "2001:db8:1::10"

# The goals every attack is held to (docs/hardening.md, "Fair to every user" and "Hostile tenants").
CALL_TIMEOUT_S = 1.0
P99_GOAL_MS = 100.0
RSS_PEAK_GOAL_KIB = 32 * 1024
RSS_AFTER_GOAL_KIB = 4 * 1024
RSS_SETTLE_S = 20.0

CLONE_NEWNET = 0x40000000
_LIBC = ctypes.CDLL(None, use_errno=True)


# --- the lab's DNS server ----------------------------------------------------------------------


def _qname(packet: bytes) -> tuple:
    """(name, qtype, end of the question) of a DNS query; raises ValueError when malformed."""
    labels, i = [], 12
    while True:
        length = packet[i]
        if length == 0:
            i += 1
            break
        if length & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(packet[i + 1:i + 1 + length].decode("ascii", "replace"))
        i += 1 + length
    qtype, _qclass = struct.unpack("!HH", packet[i:i + 4])
    return ".".join(labels).lower(), qtype, i + 4


def soa_record(ttl: int) -> bytes:
    """An authority record for a negative answer (RFC 2308): ``test. SOA ns.test. hostmaster.test.``,
    its own TTL and its MINIMUM both ``ttl``: the answer's negative TTL."""
    test = b"\x04test\x00"
    data = b"\x02ns" + test + b"\x0ahostmaster" + test + struct.pack("!IIIII", 1, 1200, 120, 1209600, ttl)
    return test + struct.pack("!HHIH", 6, 1, ttl, len(data)) + data


def dns_answer(packet: bytes, failing: frozenset = frozenset(), table: Optional[dict] = None,
               negative: Optional[dict] = None) -> tuple:
    """(zone, reply or None) for one query: ``fast`` answered, ``never`` dropped, ``other`` NXDOMAIN;
    a name in ``failing`` is answered SERVFAIL (zone ``servfail``: the server cannot answer for now).
    A name in ``table`` (``name: (address, TTL)``) is answered with that A (or, for an IPv6
    address, AAAA) record alone (zone ``fast``), whatever its zone. An NXDOMAIN for a name in
    ``negative`` (``name: TTL``) carries an SOA record with that negative TTL; others carry none."""
    try:
        name, qtype, end = _qname(packet)
    except (IndexError, ValueError, struct.error):
        return "malformed", None
    ident, = struct.unpack("!H", packet[:2])
    question = packet[12:end]
    if name == NEVER_ZONE or name.endswith("." + NEVER_ZONE):
        return "never", None
    records = b""
    count = 0
    rcode = 3  # NXDOMAIN
    if name in failing:
        rcode = 2  # SERVFAIL
    elif table and name in table:
        rcode = 0
        address, ttl = table[name]
        if qtype == 1 and ":" not in address:
            records = struct.pack("!HHHIH", 0xC00C, 1, 1, ttl, 4) + socket.inet_pton(socket.AF_INET, address)
            count = 1
        elif qtype == 28 and ":" in address:
            records = struct.pack("!HHHIH", 0xC00C, 28, 1, ttl, 16) + socket.inet_pton(socket.AF_INET6, address)
            count = 1
    elif name == FAST_ZONE or name.endswith("." + FAST_ZONE):
        rcode = 0
        if qtype == 1:
            records = struct.pack("!HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_pton(socket.AF_INET, FAST_V4)
            count = 1
        elif qtype == 28:
            records = struct.pack("!HHHIH", 0xC00C, 28, 1, 60, 16) + socket.inet_pton(socket.AF_INET6, FAST_V6)
            count = 1
    authority = 0
    if rcode == 3 and negative and name in negative:
        records += soa_record(negative[name])
        authority = 1
    flags = 0x8400 | 0x0100 | rcode  # response, authoritative, recursion desired echoed, rcode
    header = struct.pack("!HHHHHH", ident, flags, 1, count, authority, 0)
    return {0: "fast", 2: "servfail"}.get(rcode, "other"), header + question + records


class DnsServer:
    """The DNS server of a namespace, on its 127.0.0.1:53 (UDP and TCP are not both needed:
    glibc asks over UDP and our answers are small). A thread of this process, its socket
    made in the namespace; ``queries`` holds ``(monotonic time, zone, name)`` of each query.
    The names in ``failing`` (the test changes it) are answered SERVFAIL, those in ``records``
    with the address and TTL it gives; an NXDOMAIN for a name in ``negative`` has its negative TTL.
    A name in ``moves`` (``name: (n, (address, TTL))``) is moved to that record after its
    first ``n`` queries, by the server itself: between two questions nothing else can time."""

    def __init__(self, netns: str):
        self.netns = netns
        self.queries: list = []
        self.failing: frozenset = frozenset()
        self.records: dict = {}
        self.negative: dict = {}
        self.moves: dict = {}
        self.lock = threading.Lock()
        self.sock: Optional[socket.socket] = None
        self.thread: Optional[threading.Thread] = None
        self.stopping = False

    def start(self) -> None:
        with network_namespace(self.netns):
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 53))
        self.sock.settimeout(0.2)
        self.thread = threading.Thread(target=self._serve, name=f"dns {self.netns}", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping:
            try:
                packet, peer = self.sock.recvfrom(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                name = _qname(packet)[0]
            except (IndexError, ValueError, struct.error):
                name = "?"
            if name in self.moves and self.count(name_contains=name) >= self.moves[name][0]:
                self.records = {**self.records, name: self.moves.pop(name)[1]}
            zone, reply = dns_answer(packet, self.failing, dict(self.records), dict(self.negative))
            with self.lock:
                self.queries.append((time.monotonic(), zone, name))
            if reply is not None:
                with contextlib.suppress(OSError):
                    self.sock.sendto(reply, peer)

    def count(self, zone: Optional[str] = None, since: float = 0.0, until: float = float("inf"),
              name_contains: str = "") -> int:
        with self.lock:
            return sum(1 for t, z, n in self.queries
                       if since <= t <= until and (zone is None or z == zone) and name_contains in n)

    def busiest_second(self, zone: str, since: float, until: float, name_contains: str = "") -> int:
        """The most queries of ``zone`` within any one-second window between ``since`` and ``until``."""
        with self.lock:
            times = sorted(t for t, z, n in self.queries if z == zone and since <= t <= until and name_contains in n)
        best, start = 0, 0
        for end, t in enumerate(times):
            while times[start] < t - 1.0:
                start += 1
            best = max(best, end - start + 1)
        return best

    def stop(self) -> None:
        self.stopping = True
        if self.sock is not None:
            self.sock.close()
        if self.thread is not None:
            self.thread.join(2)


@contextlib.contextmanager
def network_namespace(name: str):
    """The calling thread in the named network namespace for the body (sockets made there stay there)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY | os.O_CLOEXEC)
    try:
        if _LIBC.setns(target, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {name}")
        try:
            yield
        finally:
            if _LIBC.setns(own, CLONE_NEWNET) != 0:
                os.write(2, b"cannot return to the test's network namespace\n")
                os._exit(70)
    finally:
        os.close(target)
        os.close(own)


# --- the lab -------------------------------------------------------------------------------------


class ResolverDaemon(harness.Daemon):
    """reachabilityd in the lab's namespace (``ip netns exec`` execs it: the PID is the daemon's),
    with ``/etc/resolv.conf``, ``/etc/hosts`` and ``/etc/nsswitch.conf`` bind-mounted from the lab's
    in the mount namespace ``ip netns exec`` makes for it (the mounts reach nothing else: the
    machine's files are never touched; a test writes the lab's)."""

    def __init__(self, netns: str, resolver: Path, *args, hosts: Optional[Path] = None,
                 nsswitch: Optional[Path] = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.netns = netns
        self.resolver = resolver
        self.files = {"/etc/hosts": hosts, "/etc/nsswitch.conf": nsswitch}

    def argv(self) -> list:
        mounts = "".join(f'mount --bind "{source}" {target} && ' for target, source in self.files.items() if source)
        return harness.Namespaces.exec_argv(self.netns) + [
            "/bin/sh", "-c", mounts + 'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(self.resolver),
            str(self.binary)] + self.args


# Run as /bin/sh -c by ``unshare --mount --propagation private``: dbus-broker-launch logs only to
# the journal's socket, so a private /run/systemd gets a reader of its own there (mounts made in
# this namespace reach nothing else). Arguments: directory, configuration, socket.
BROKER_SCRIPT = r"""
set -e
dir="$1"; config="$2"; sock="$3"
if [ -d /run/systemd ]; then mount -t tmpfs tmpfs /run/systemd; else mount -t tmpfs tmpfs /run; fi
mkdir -p /run/systemd/journal
/usr/bin/python3 -c '
import ctypes, socket, sys
ctypes.CDLL(None).prctl(1, 15)  # PR_SET_PDEATHSIG, SIGTERM: it goes with the launcher (its parent)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("/run/systemd/journal/socket")
with open(sys.argv[1], "ab", buffering=0) as out:
    while True:
        fields = dict(f.split(b"=", 1) for f in s.recv(1 << 20).split(bytes([10])) if b"=" in f)
        out.write(fields.get(b"MESSAGE", b"?") + bytes([10]))
' "$dir/broker-journal.log" &
n=0
while [ ! -S /run/systemd/journal/socket ]; do
    n=$((n + 1)); [ $n -lt 500 ] || { echo "the journal socket did not appear" >&2; exit 1; }; sleep 0.01
done
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$sock"
exec systemd-socket-activate -E DBUS_SYSTEM_BUS_ADDRESS -l "$sock" dbus-broker-launch --scope system \
    --config-file "$config"
"""


class BrokerBus(harness.PrivateBus):
    """dbus-broker instead of dbus-daemon, with the same configuration file, on a machine whose
    PID 1 is not systemd: ``dbus-broker-launch`` gets its listening socket by socket activation
    (``systemd-socket-activate``), a journal socket of its own in a private mount namespace, and
    itself as the system bus it connects back to (it asks systemd to subscribe: that call fails,
    unanswered by anyone, and nothing is activated on these buses anyway)."""

    def start(self, timeout: float = harness.START_TIMEOUT) -> str:
        self.config.write_text(harness.BUS_CONFIG.format(socket=self.socket, policy=self.policy,
                                                         extra=self.extra_config))
        self.process = harness.Process(
            "dbus-broker", [harness.need_tool("unshare"), "--mount", "--propagation", "private", "/bin/sh", "-c",
                            BROKER_SCRIPT, "broker", self.directory, self.config, self.socket], self.log)
        harness.wait_until(lambda: self.socket.exists() or not self.process.running, timeout,
                           "dbus-broker's socket", poll=0.02)
        # The socket is made 0644 by systemd-socket-activate: every user must be able to connect.
        self.socket.chmod(0o666)
        self.address = f"unix:path={self.socket}"
        client = harness.BusClient(self.address)
        client.close()
        return self.address


def broker_available() -> list:
    """What this machine lacks to run dbus-broker without systemd (empty when nothing)."""
    return [f"the {name} command" for name in ("dbus-broker", "dbus-broker-launch", "systemd-socket-activate",
                                              "unshare") if harness.tool(name) is None]


class TenantLab(harness.Lab):
    """A system bus with Debian's default policy and the shipped policy file, a namespace with a
    veth uplink and the DNS server above, and (``start_daemon``) reachabilityd as root there with
    the kernel backend. ``bus_limits`` adds ``<limit>`` elements to the bus's configuration."""

    prefix = "reach-ten-"

    def __init__(self, bus_limits: Optional[dict] = None, broker: bool = False):
        super().__init__()
        if broker:
            self.bus = BrokerBus(self.directory, "system")
        limits = "".join(f'  <limit name="{k}">{v}</limit>\n' for k, v in (bus_limits or {}).items())
        self.bus.policy = harness.SYSTEM_POLICY
        self.bus.extra_config = f"  <include>{POLICY_FILE}</include>\n{limits}"
        self.namespaces = harness.Namespaces()
        self.netns: Optional[str] = None
        self.dns: Optional[DnsServer] = None
        self.daemon_process: Optional[harness.Daemon] = None
        self.children: list = []
        self.resolver = self.directory / "resolv.conf"
        self.hosts = self.directory / "hosts"
        self.nsswitch = self.directory / "nsswitch.conf"
        self.tree = self.directory / "tree"

    def start(self) -> "TenantLab":
        self.start_bus()
        ns = self.namespaces
        self.netns = ns.create("ten")
        # A veth pair whose far end stays in the namespace, unconfigured: an uplink with carrier.
        ns.ip(self.netns, "link", "add", UPLINK, "type", "veth", "peer", "name", UPLINK + "p")
        # No duplicate address detection on the far end either: its link-local address would
        # otherwise become valid a second or two later, an event that re-evaluates everything.
        ns.sysctl(self.netns, f"net.ipv6.conf.{UPLINK}p.accept_dad", "0")
        ns.ip(self.netns, "link", "set", UPLINK + "p", "up")
        ns.sysctl(self.netns, f"net.ipv6.conf.{UPLINK}.accept_dad", "0")
        ns.ip(self.netns, "addr", "add", f"{UPLINK_V4}/24", "dev", UPLINK)
        ns.ip(self.netns, "addr", "add", f"{UPLINK_V6}/64", "dev", UPLINK, "nodad")
        ns.ip(self.netns, "link", "set", UPLINK, "up")
        ns.ip(self.netns, "route", "add", "default", "via", GATEWAY_V4, "dev", UPLINK)
        # Nothing answers for the gateway on the far end: its neighbour entry is the test's
        # (permanent), or the kernel would find it dead (FAILED) once the daemon has it resolved,
        # and the internet not reachable (gateway-unreachable).
        ns.ip(self.netns, "neigh", "replace", GATEWAY_V4, "lladdr", GATEWAY_LINK_LAYER, "dev", UPLINK, "nud", "permanent")
        self.dns = DnsServer(self.netns)
        self.dns.start()
        self.resolver.write_text("# written by the test: the lab's DNS server\nnameserver 127.0.0.1\n")
        self.resolver.chmod(0o644)
        # The daemon's /etc/hosts: the machine's, which the test may add to.
        self.hosts.write_text(Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else "127.0.0.1 localhost\n")
        self.hosts.chmod(0o644)
        # The daemon's /etc/nsswitch.conf: the machine's, whose hosts line a test may change.
        machine = Path("/etc/nsswitch.conf")
        self.nsswitch.write_text(machine.read_text() if machine.exists() else "hosts: files dns\n")
        self.nsswitch.chmod(0o644)
        # The children run as other users, from a copy of the files of the checkout they read
        # (this module, the harness, the contract the harness takes the names from).
        for source in (Path(__file__), Path(harness.__file__), harness.CONTRACT_XML):
            copy = self.tree / source.relative_to(harness.REPO)
            copy.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            shutil.copyfile(source, copy)
            copy.chmod(0o644)
        return self

    def new_daemon(self, log: Path, args: Optional[list]) -> harness.Daemon:
        return ResolverDaemon(self.netns, self.resolver, self.bus.address, log, args=args, hosts=self.hosts,
                              nsswitch=self.nsswitch)

    def start_daemon(self, *extra: str, verbose: bool = False) -> harness.Daemon:
        """reachabilityd (root, kernel backend, ``extra`` arguments), once it owns its name and has
        published its first answer for the internet (Status 2: the uplink has a default route);
        with ``--verbose`` unless REACH_TEST_QUIET is set, and always with ``verbose`` (a test that
        reads its debug lines)."""
        args = ["--system", "--backend", "kernel"] + list(extra)
        if verbose or not os.environ.get("REACH_TEST_QUIET"):
            args.append("--verbose")
        self.daemon_process = self.daemon(args=args)
        harness.wait_until(lambda: self._status() == harness.STATUS_WIFI_ETHERNET, harness.START_TIMEOUT,
                           "the internet target's first answer (Status 2)",
                           lambda: f"  Status is {self._status()}", poll=0.05)
        # The idle figure is that of a daemon that has answered each kind of call once: the first
        # call of a kind allocates, once and for good, what the runtime keeps for its code path.
        for interface, member in (("org.freedesktop.DBus.Introspectable", "Introspect"),
                                  ("org.freedesktop.DBus.ObjectManager", "GetManagedObjects"),
                                  (harness.PEER_IFACE, "Ping")):
            self.client.call(SERVICE, ROOT_PATH, interface, member)
        self.client.call(SERVICE, ROOT_PATH, harness.MANAGER_IFACE, "Query", "s", ("",))
        return self.daemon_process

    def _status(self):
        try:
            return self.client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Status")
        except DBusCallError:
            return None

    def child(self, uid: int, role: str, name: str, **params) -> "Child":
        child = Child(self, uid, role, name, params)
        self.children.append(child)
        return child

    def logs(self) -> list:
        result = super().logs()
        for child in self.children:
            text = harness.tail(child.log, 60)
            if text:
                result.append((f"{child.name} (uid {child.uid}) stderr (tail)", text))
        if self.dns is not None:
            with self.dns.lock:
                zones = {}
                for _t, zone, _n in self.dns.queries:
                    zones[zone] = zones.get(zone, 0) + 1
            result.append(("DNS server", f"queries by zone: {zones}"))
        result.append(("bus log (tail)", harness.tail(self.bus.log, 60)))
        result.append(("dbus-broker journal (tail)", harness.tail(self.directory / "broker-journal.log", 60)))
        return [(title, text) for title, text in result if text]

    def services(self) -> list:
        return list(self.children)

    def release(self) -> None:
        if self.dns is not None:
            self.dns.stop()
        self.namespaces.close()


# --- processes of other users -----------------------------------------------------------------


class Child:
    """A role of this module run as ``uid`` (``setpriv``; root runs it directly), JSON lines on its
    stdin and stdout, its stderr in a log file. Stopped by PID."""

    def __init__(self, lab: TenantLab, uid: int, role: str, name: str, params: dict):
        self.lab = lab
        self.uid = uid
        self.name = name
        self.log = lab.directory / f"{name}.log"
        params = dict(params, address=lab.bus.address)
        here = lab.tree / Path(__file__).resolve().relative_to(harness.REPO).parent
        code = (f"import sys; sys.path.insert(0, {str(here)!r}); import tenants; "
                f"tenants.child_main()")
        argv = ["/usr/bin/python3", "-c", code, role, json.dumps(params)]
        if uid != 0:
            argv = [harness.need_tool("setpriv"), f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"] + argv
        env = {"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
        with open(self.log, "ab") as log:
            self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                          env=env, bufsize=0, start_new_session=True)
        self._buffer = b""

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def read(self, what: str, timeout: float) -> dict:
        """The next JSON line the child prints, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        fd = self.popen.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            ready = select.select([fd], [], [], max(0.0, remaining))[0] if remaining > 0 else []
            chunk = os.read(fd, 1 << 20) if ready else None
            if not chunk:
                state = "exited with status %s" % self.popen.poll() if chunk == b"" else f"no answer in {timeout:.0f} s"
                raise WaitTimeout(f"{self.name} (uid {self.uid}): waiting for {what}: {state}\n"
                                  f"its stderr:\n{harness.tail(self.log, 40)}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def send(self, message: dict) -> None:
        self.popen.stdin.write((json.dumps(message) + "\n").encode())

    def stop(self, timeout: float = 10.0) -> Optional[dict]:
        """Ask it to finish (stdin closed); returns its last JSON line, if it printed one then."""
        last = None
        if self.running:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()
            with contextlib.suppress(WaitTimeout, ValueError):
                last = self.read("its final report", timeout)
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout)
        with contextlib.suppress(OSError):
            self.popen.stdout.close()
        return last

    def kill(self) -> None:
        """Gone at once, as a crashed client goes (SIGKILL by PID); waits for the exit."""
        if self.popen.poll() is None:
            os.kill(self.popen.pid, signal.SIGKILL)
        self.popen.wait(10)


class Tenant(Child):
    """A user's program driven call by call (the ``tenant`` role): one GDBus connection, every
    signal it receives recorded."""

    def __init__(self, lab: TenantLab, uid: int, name: str):
        super().__init__(lab, uid, "tenant", name, {})
        self.unique_name = self.read("its connection", harness.START_TIMEOUT)["ready"]

    def _do(self, op: dict, timeout: float = 30.0):
        self.send(op)
        answer = self.read(f"{op['op']} {op.get('member', '')}", timeout)
        if "error" in answer:
            raise DBusCallError(answer["error"], answer.get("message", ""))
        return answer.get("ok")

    def call(self, path: str, interface: str, member: str, signature: str = "", args: tuple = (),
             timeout: float = 10.0):
        """A method call of the service; the reply as a list, or :class:`DBusCallError`."""
        return self._do({"op": "call", "path": path, "interface": interface, "member": member,
                         "signature": signature, "args": list(args), "timeout": timeout}, timeout + 5)

    def call_error(self, *args, **kwargs) -> Optional[str]:
        """The error name a call gets (None when it succeeds)."""
        try:
            self.call(*args, **kwargs)
        except DBusCallError as error:
            return error.name
        return None

    def manager(self, member: str, signature: str = "", args: tuple = (), timeout: float = 10.0):
        return self.call(ROOT_PATH, MANAGER_IFACE, member, signature, args, timeout)

    def managed_objects(self) -> dict:
        return self.call(ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0]

    def introspect(self, path: str) -> str:
        return self.call(path, INTROSPECTABLE_IFACE, "Introspect")[0]

    def signals(self) -> list:
        """Every signal received so far: ``[{"sender", "path", "interface", "member", "args"}]``."""
        return self._do({"op": "signals"})

    def wait_signal(self, path: str, member: str, timeout: float = 15.0, args0=None) -> dict:
        """Wait (bounded) for a signal ``member`` on ``path`` (its first argument ``args0`` if given)."""
        return self._do({"op": "wait_signal", "path": path, "member": member, "args0": args0,
                         "timeout": timeout}, timeout + 5)

    def barrier(self) -> None:
        """A Ping round trip to the service, then every signal it sent before answering is recorded."""
        self.call(ROOT_PATH, PEER_IFACE, "Ping")


# --- what every attack measures ---------------------------------------------------------------


def rss_kib(pid: int) -> int:
    """The anonymous resident memory of a process (RssAnon: its heap and stacks), in KiB (0 when
    it is gone). Not VmRSS: that also counts the pages of the binary and its libraries, which grow
    by a few MiB as an attack makes the daemon run code it had not run yet (a debug build's
    introspection and error paths), are shared and clean, and are never "given back"."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list, p: float) -> float:
    """Nearest-rank percentile (0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class RssSampler:
    """Samples a process's VmRSS every ``interval`` seconds on a thread; ``peak`` is the highest."""

    def __init__(self, pid: int, interval: float = 0.02):
        self.pid = pid
        self.interval = interval
        self.peak = rss_kib(pid)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_kib(self.pid))
            self.samples += 1

    def __enter__(self) -> "RssSampler":
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._stop.set()
        self._thread.join(2)
        self.peak = max(self.peak, rss_kib(self.pid))


class Probe:
    """The victim's latency probe (the ``probe`` role as ``uid``): Ping and Get(Status) of the root
    object in turn, one at a time, each with a 1 s timeout, ``interval`` seconds apart. With ``bus``,
    GetId and GetNameOwner of the bus driver instead: what the bus alone makes a caller wait."""

    def __init__(self, lab: TenantLab, uid: Optional[int] = None, name: str = "probe", interval: float = 0.01,
                 bus: bool = False):
        self.child = lab.child(VICTIM if uid is None else uid, "probe", name, interval=interval, timeout=CALL_TIMEOUT_S,
                               bus=bus)
        self.child.read("the probe's first answer", harness.START_TIMEOUT)
        self.samples: list = []

    def stop(self) -> list:
        """Stop the probe; ``[[start time, call, ms, error or None]]`` (monotonic start times)."""
        report = self.child.stop(timeout=30)
        if report is None or "samples" not in report:
            raise AssertionError(f"the probe gave no report:\n{harness.tail(self.child.log, 40)}")
        self.samples = report["samples"]
        return self.samples


def latency_summary(samples: list, since: float = 0.0, until: float = float("inf")) -> dict:
    chosen = [s for s in samples if since <= s[0] <= until]
    times = [s[2] for s in chosen if s[3] is None]
    failures = [s for s in chosen if s[3] is not None or s[2] > CALL_TIMEOUT_S * 1000]
    return {"calls": len(chosen), "p50": percentile(times, 50), "p99": percentile(times, 99),
            "max": max((s[2] for s in chosen), default=0.0), "failures": failures}


class Attack:
    """One attack's measurements, as a context manager around it::

        with Attack(lab, "never-reading peers") as attack:
            ...                    # start the attacker, wait for what it does
            attack.attacker_gone() # the attacker has left (optional)
        attack.check()             # the goals, one AssertionError naming every miss

    On entry: the daemon's idle RSS and CPU time, the victim's probe started, RSS sampling.
    On exit: the probe stopped and, after the attacker has gone, RSS allowed ``RSS_SETTLE_S``
    seconds to come back within ``RSS_AFTER_GOAL_KIB`` of idle."""

    def __init__(self, lab: TenantLab, name: str, probe_uid: Optional[int] = None, settle: bool = True,
                 idle_rss: Optional[int] = None, min_calls: int = 20):
        self.lab = lab
        self.name = name
        self.pid = lab.daemon_process.pid
        self.probe_uid = VICTIM if probe_uid is None else probe_uid
        self.settle = settle
        self.given_idle = idle_rss
        self.min_calls = min_calls
        self.idle_rss = 0
        self.rss_after = 0
        self.cpu_start = 0.0
        self.cpu = 0.0
        self.started = 0.0
        self.ended = 0.0
        self.gone_at: Optional[float] = None
        self.samples: list = []
        self.notes: list = []
        self.sampler: Optional[RssSampler] = None
        self.probe: Optional[Probe] = None

    def __enter__(self) -> "Attack":
        self.idle_rss = self.given_idle or rss_kib(self.pid)
        self.cpu_start = cpu_seconds(self.pid)
        self.sampler = RssSampler(self.pid).__enter__()
        self.probe = Probe(self.lab, self.probe_uid, name=f"probe-{len(self.lab.children)}")
        self.started = time.monotonic()
        return self

    def attacker_gone(self) -> None:
        self.gone_at = time.monotonic()

    def __exit__(self, *exc) -> None:
        self.ended = time.monotonic()
        try:
            self.samples = self.probe.stop()
        finally:
            self.sampler.__exit__()
        self.cpu = cpu_seconds(self.pid) - self.cpu_start
        if self.settle and exc[0] is None:
            self.rss_after = self.wait_rss_settled()

    def wait_rss_settled(self) -> int:
        """RSS once within the goal of idle (or when ``RSS_SETTLE_S`` passed): nothing announces
        that memory went back, so it is read every 0.2 s, bounded."""
        deadline = time.monotonic() + RSS_SETTLE_S
        while True:
            now = rss_kib(self.pid)
            if now <= self.idle_rss + RSS_AFTER_GOAL_KIB or time.monotonic() > deadline:
                return now
            time.sleep(0.2)

    @property
    def latency(self) -> dict:
        return latency_summary(self.samples)

    def first_stall(self) -> Optional[float]:
        """Seconds from the start of the attack to the first victim call that failed or took over 1 s."""
        for start, _call, ms, error in self.samples:
            if error is not None or ms > CALL_TIMEOUT_S * 1000:
                return start - self.started
        return None

    def row(self) -> dict:
        lat = self.latency
        return {"attack": self.name, "calls": lat["calls"], "p50": lat["p50"], "p99": lat["p99"], "max": lat["max"],
                "failed": len(lat["failures"]), "rss_idle": self.idle_rss, "rss_peak": self.sampler.peak,
                "rss_after": self.rss_after, "cpu": self.cpu, "stall": self.first_stall()}

    def summary(self) -> str:
        r = self.row()
        stall = "never" if r["stall"] is None else f"after {r['stall']:.1f} s"
        text = (f"{self.name}: victim {r['calls']} calls, p50 {r['p50']:.1f} ms, p99 {r['p99']:.1f} ms, "
                f"max {r['max']:.1f} ms, {r['failed']} failed (first stall: {stall}); daemon RSS idle "
                f"{r['rss_idle'] / 1024:.1f} MiB, peak {r['rss_peak'] / 1024:.1f} MiB, after "
                f"{r['rss_after'] / 1024:.1f} MiB; CPU {r['cpu']:.2f} s")
        return "\n  ".join([text] + self.notes)

    def problems(self, p99_goal: float = P99_GOAL_MS, bus_full_share: float = 0.0) -> list:
        """Every goal missed. ``bus_full_share``: the share of the victim's calls dbus-daemon itself
        may refuse (``BUS_QUEUE_FULL``) while the attacker is there -- where the caller shows that
        no service can prevent it; none after the attacker left, and each one is listed."""
        r, lat = self.row(), self.latency
        found = []
        if not self.lab.daemon_process.running:
            found.append(f"the daemon exited (status {self.lab.daemon_process.returncode})")
        if r["calls"] < self.min_calls:
            found.append(f"the victim's probe made only {r['calls']} calls")
        by_bus = [s for s in lat["failures"] if s[3] == BUS_QUEUE_FULL
                  and (self.gone_at is None or s[0] < self.gone_at)]
        failures = lat["failures"]
        if by_bus and len(by_bus) <= bus_full_share * r["calls"]:
            failures = [s for s in failures if s not in by_bus]
            self.notes.append(f"{len(by_bus)} of the victim's calls refused by the bus itself (destination has "
                              f"a full message queue), at +" + ", +".join(f"{s[0] - self.started:.2f}" for s in by_bus)
                              + " s")
        if failures:
            shown = "; ".join(f"{s[1]} at +{s[0] - self.started:.2f} s: {s[3] or 'took'} ({s[2]:.0f} ms)"
                              for s in failures[:5])
            found.append(f"{len(failures)} of the victim's calls failed or took over "
                         f"{CALL_TIMEOUT_S:.0f} s: {shown}")
        if r["p99"] > p99_goal:
            found.append(f"the victim's p99 is {r['p99']:.1f} ms (goal {p99_goal:.0f} ms)")
        if r["rss_peak"] > r["rss_idle"] + RSS_PEAK_GOAL_KIB:
            found.append(f"the daemon's RSS peaked at {r['rss_peak']} KiB, idle {r['rss_idle']} KiB "
                         f"(goal: at most {RSS_PEAK_GOAL_KIB} KiB more)")
        if self.settle and r["rss_after"] > r["rss_idle"] + RSS_AFTER_GOAL_KIB:
            found.append(f"{RSS_SETTLE_S:.0f} s after the attack the daemon's RSS is {r['rss_after']} KiB, "
                         f"idle {r['rss_idle']} KiB (goal: within {RSS_AFTER_GOAL_KIB} KiB)")
        return found

    def check(self, p99_goal: float = P99_GOAL_MS) -> None:
        found = self.problems(p99_goal)
        assert not found, f"{self.name}: " + "\n  ".join(found) + "\n" + self.summary()


# --- attackers, started from the parent ---------------------------------------------------------


def flood(lab: TenantLab, uid: int, name: str, kind: str, connections: int, calls: int, window: int = 16,
          hold: bool = True, **extra) -> Child:
    """Start the ``flood`` role: ``connections`` GDBus connections each making ``calls`` calls of
    ``kind`` (see ``_flood_call``), ``window`` in flight on each. With ``hold`` it keeps its
    connections (and what they hold) after the last answer, until stopped."""
    return lab.child(uid, "flood", name, kind=kind, connections=connections, calls=calls, window=window,
                     hold=hold, **extra)


def flood_result(child: Child, timeout: float, stall: float = 10.0, connected: bool = False) -> dict:
    """The flood's report once every call was answered: ``{"errors": {name: count}, "seconds": s,
    "complete": True}``. When no call was answered for ``stall`` seconds (or ``timeout`` passed) with
    calls still waiting, the flood is stopped and the report says so: ``"complete": False``,
    ``"unanswered"`` calls, ``"stalled_at"`` seconds."""
    if not connected:
        child.read("the flood's connections", harness.START_TIMEOUT)
    started = time.monotonic()
    last, last_change = None, time.monotonic()
    while True:
        try:
            line = child.read("the flood's progress", 2.0)
        except WaitTimeout:
            if not child.running:
                raise
            line = None
        now = time.monotonic()
        if line is not None and "progress" not in line:
            return dict(line, complete=True)
        if line is not None and (last is None or line["progress"] != last["progress"]):
            last, last_change = line, now
        if now - last_change > stall or now - started > timeout:
            child.kill()
            last = last or {"progress": 0, "pending": None, "errors": {}}
            return {"errors": last["errors"], "seconds": now - started, "complete": False,
                    "unanswered": last["pending"], "stalled_at": last_change - started}


def describe_flood(result: dict) -> str:
    text = f"{result['errors']} in {result['seconds']:.1f} s"
    if not result["complete"]:
        text += (f"; then {result['unanswered']} calls waited with no answer from +{result['stalled_at']:.1f} s "
                 f"until it was stopped")
    return text


def nonreader(lab: TenantLab, uid: int, name: str, connections: int, calls: int, member: str = "Introspect",
              path: str = ROOT_PATH) -> Child:
    return lab.child(uid, "nonreader", name, connections=connections, calls=calls, member=member, path=path)


# === the roles, run in the children ===================================================================


def _connect(address: str):
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    conn = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
    conn.set_exit_on_close(False)
    return conn


def _tally(errors: dict, conn, result, with_fds: bool = False) -> None:
    """Counts a finished asynchronous call in ``errors`` by its error name ("ok" for a reply)."""
    try:
        if with_fds:
            conn.call_with_unix_fd_list_finish(result)
        else:
            conn.call_finish(result)
        name = "ok"
    except GLib.Error as failure:
        name = _error_name(failure)
    errors[name] = errors.get(name, 0) + 1


def _error_name(error) -> str:
    return Gio.DBusError.get_remote_error(error) or f"local:{error.domain}:{error.code}:{error.message}"


def _out(obj) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _stdin_closed(timeout: float) -> bool:
    """Whether the parent closed our stdin (or wrote a line), waiting at most ``timeout``."""
    return bool(select.select([sys.stdin], [], [], timeout)[0])


def _plain(value):
    """A reply's unpacked value as JSON can carry it (bytes as lists)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, bytes):
        return list(value)
    if isinstance(value, GLib.Variant):
        return _plain(value.unpack())
    return value


def role_probe(p: dict) -> None:
    conn = _connect(p["address"])
    timeout_ms = int(p["timeout"] * 1000)
    # The bus driver instead of the service (``bus``): what the bus itself makes a caller wait, the
    # floor under any service's answer.
    destination, path = (BUS_DRIVER, BUS_DRIVER_PATH) if p.get("bus") else (SERVICE, ROOT_PATH)
    if p.get("bus"):  # (the system bus's policy lets nobody Ping the driver)
        calls = [("GetId", BUS_DRIVER, "GetId", None),
                 ("GetNameOwner", BUS_DRIVER, "GetNameOwner", GLib.Variant("(s)", (SERVICE,)))]
    else:
        calls = [("Ping", PEER_IFACE, "Ping", None),
                 ("Get", PROPERTIES_IFACE, "Get", GLib.Variant("(ss)", (TARGET_IFACE, "Status")))]
    samples = []
    conn.call_sync(destination, path, calls[0][1], calls[0][2], None, None, Gio.DBusCallFlags.NO_AUTO_START,
                   10000, None)
    _out({"ready": conn.get_unique_name()})
    i = 0
    while not _stdin_closed(p["interval"]):
        label, interface, member, args = calls[i % 2]
        i += 1
        start = time.monotonic()
        error = None
        try:
            conn.call_sync(destination, path, interface, member, args, None, Gio.DBusCallFlags.NO_AUTO_START,
                           timeout_ms, None)
        except GLib.Error as failure:
            error = _error_name(failure)
            if error == LIMITS_EXCEEDED and "destination has a full message queue" in failure.message:
                error = BUS_QUEUE_FULL
        samples.append([start, label, (time.monotonic() - start) * 1000, error])
    _out({"samples": samples})


def role_tenant(_p: dict) -> None:
    conn = _connect(_p["address"])
    received = []
    context = GLib.MainContext.default()

    def on_signal(_conn, sender, path, interface, member, params):
        received.append({"sender": sender, "path": path, "interface": interface, "member": member,
                         "args": _plain(params.unpack()) if params is not None else []})

    conn.signal_subscribe(None, None, None, None, None, Gio.DBusSignalFlags.NONE, on_signal)
    _out({"ready": conn.get_unique_name()})
    for line in sys.stdin:
        op = json.loads(line)
        while context.pending():
            context.iteration(False)
        try:
            if op["op"] == "call":
                args = GLib.Variant(f"({op['signature']})", tuple(op["args"])) if op["signature"] else None
                reply = conn.call_sync(SERVICE, op["path"], op["interface"], op["member"], args, None,
                                       Gio.DBusCallFlags.NO_AUTO_START, int(op["timeout"] * 1000), None)
                _out({"ok": _plain(reply.unpack()) if reply is not None else []})
            elif op["op"] == "signals":
                _out({"ok": received})
            elif op["op"] == "wait_signal":
                deadline = time.monotonic() + op["timeout"]

                def found():
                    return next((s for s in received if s["path"] == op["path"] and s["member"] == op["member"]
                                 and (op["args0"] is None or (s["args"] and s["args"][0] == op["args0"]))), None)
                while found() is None and time.monotonic() < deadline:
                    source = GLib.timeout_source_new(50)
                    source.set_callback(lambda *_: False)
                    source.attach(context)
                    context.iteration(True)
                    source.destroy()
                hit = found()
                if hit is None:
                    _out({"error": "test.Timeout", "message": f"no {op['member']} on {op['path']} within "
                          f"{op['timeout']} s; received: {received[-20:]}"})
                else:
                    _out({"ok": hit})
        except GLib.Error as failure:
            _out({"error": _error_name(failure), "message": failure.message})
        while context.pending():
            context.iteration(False)


def _flood_call(kind: str, c: int, i: int, p: dict) -> tuple:
    """(path, interface, member, signature, args) of call ``i`` on connection ``c``."""
    tag = p.get("tag", "")
    if kind == "watch_address":
        return ROOT_PATH, MANAGER_IFACE, "WatchAddress", "(s)", (f"2001:db8:{p.get('base', 0) + c:x}::{i + 1:x}",)
    if kind == "watch_host":
        return ROOT_PATH, MANAGER_IFACE, "WatchHost", "(s)", (f"h{tag}{c}-{i}.{p.get('zone', FAST_ZONE)}",)
    if kind == "query":  # (DNS names are compared in lower case: a tag is best lower case)
        return ROOT_PATH, MANAGER_IFACE, "Query", "(s)", (f"q{tag}{c}-{i}.{p.get('zone', NEVER_ZONE)}",)
    if kind == "refresh":
        return p["path"], TARGET_IFACE, "Refresh", "", ()
    if kind == "managed_objects":
        return ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects", "", ()
    if kind == "introspect":
        return p.get("path", ROOT_PATH), INTROSPECTABLE_IFACE, "Introspect", "", ()
    if kind == "get_all":
        return ROOT_PATH, PROPERTIES_IFACE, "GetAll", "(s)", (TARGET_IFACE,)
    if kind == "huge_watch":  # WatchHost (it takes one string) with an array of ``mib`` MiB instead
        return ROOT_PATH, MANAGER_IFACE, "WatchHost", "(ay)", None
    raise ValueError(kind)


def _huge_array(mib: float):
    """An ``(ay)`` argument of ``mib`` MiB (made once, without a Python object per byte)."""
    data = GLib.Variant.new_from_bytes(GLib.VariantType.new("ay"), GLib.Bytes.new(b"x" * int(mib * 1024 * 1024)),
                                       True)
    return GLib.Variant.new_tuple(data)


def role_flood(p: dict) -> None:
    conns = [_connect(p["address"]) for _ in range(p["connections"])]
    _out({"connected": len(conns)})
    loop = GLib.MainLoop()
    errors: dict = {}
    state = {"pending": 0, "sent": [0] * len(conns)}
    started = time.monotonic()
    total = p["calls"]
    duration = p.get("seconds")  # with a duration: keep sending (calls per connection ignored) until then
    # ``fds``: each call carries that many descriptors (of /dev/null) beside its arguments.
    fd_list = Gio.UnixFDList.new_from_array([os.open("/dev/null", os.O_RDONLY) for _ in range(p["fds"])]) \
        if p.get("fds") else None
    huge = _huge_array(p.get("mib", 25)) if p["kind"] == "huge_watch" else None

    def more(c: int) -> bool:
        if duration is not None:
            return time.monotonic() - started < duration
        return state["sent"][c] < total

    def send(c: int) -> None:
        path, interface, member, signature, args = _flood_call(p["kind"], c, state["sent"][c], p)
        state["sent"][c] += 1
        state["pending"] += 1
        body = huge if huge is not None else GLib.Variant(signature, args) if signature else None
        timeout = int(p.get("timeout", 60) * 1000)
        if fd_list is not None:
            conns[c].call_with_unix_fd_list(SERVICE, path, interface, member, body, None,
                                            Gio.DBusCallFlags.NO_AUTO_START, timeout, fd_list, None, done, c)
        else:
            conns[c].call(SERVICE, path, interface, member, body, None, Gio.DBusCallFlags.NO_AUTO_START, timeout,
                          None, done, c)

    def done(conn, result, c):
        _tally(errors, conn, result, fd_list is not None)
        state["pending"] -= 1
        if more(c):
            send(c)
        elif state["pending"] == 0:
            loop.quit()

    def progress():
        _out({"progress": sum(errors.values()), "pending": state["pending"], "errors": errors})
        return True

    for c in range(len(conns)):
        for _ in range(p["window"]):
            if more(c):
                send(c)
    GLib.timeout_add(500, progress)
    if state["pending"]:
        loop.run()
    _out({"errors": errors, "seconds": time.monotonic() - started, "sent": sum(state["sent"])})
    if p.get("hold"):
        _stdin_closed(None)
    for conn in conns:
        with contextlib.suppress(GLib.Error):
            conn.close_sync(None)


def _auth_and_hello(address: str) -> socket.socket:
    """A bus connection made by hand: EXTERNAL authentication, BEGIN, Hello written (not read)."""
    path = address.split("path=", 1)[1].split(",", 1)[0]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    sock.sendall(b"\0AUTH EXTERNAL " + str(os.getuid()).encode().hex().encode() + b"\r\n")
    answer = b""
    while b"\r\n" not in answer:
        chunk = sock.recv(256)
        if not chunk:
            raise OSError("the bus closed the connection during authentication")
        answer += chunk
    if not answer.startswith(b"OK "):
        raise OSError(f"authentication refused: {answer!r}")
    sock.sendall(b"BEGIN\r\n")
    sock.sendall(_blob("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "Hello", 1))
    return sock


def _blob(destination: str, path: str, interface: str, member: str, serial: int) -> bytes:
    message = Gio.DBusMessage.new_method_call(destination, path, interface, member)
    message.set_serial(serial)
    return message.to_blob(Gio.DBusCapabilityFlags.NONE)


def _unread(sock: socket.socket) -> int:
    """Bytes waiting in a socket's receive queue (SIOCINQ)."""
    import fcntl  # pylint: disable=import-outside-toplevel
    import termios  # pylint: disable=import-outside-toplevel
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def role_nonreader(p: dict) -> None:
    """Connections that write ``calls`` calls each and never read a byte after authenticating.
    Prints ``{"sent": calls fully written, ...}``, then on each line of stdin
    ``{"unread": bytes in our receive queues}`` (growing: the bus wrote to us, we do not read);
    exits (closing every socket) when stdin closes."""
    interface = {"Introspect": INTROSPECTABLE_IFACE, "GetManagedObjects": OBJECT_MANAGER_IFACE}[p["member"]]
    socks = [_auth_and_hello(p["address"]) for _ in range(p["connections"])]
    payloads = [b"".join(_blob(SERVICE, p["path"], interface, p["member"], serial + 2) for serial in range(p["calls"]))
                for _ in socks]
    for sock in socks:
        sock.setblocking(False)
    written = [0] * len(socks)
    deadline = time.monotonic() + p.get("write_timeout", 30)
    while time.monotonic() < deadline and any(w < len(d) for w, d in zip(written, payloads)):
        for n, sock in enumerate(socks):
            if written[n] < len(payloads[n]):
                with contextlib.suppress(BlockingIOError):
                    written[n] += sock.send(payloads[n][written[n]:])
        if any(w < len(d) for w, d in zip(written, payloads)):
            select.select([], [s for s, w, d in zip(socks, written, payloads) if w < len(d)], [], 0.1)
    per_call = len(payloads[0]) // max(1, p["calls"])
    _out({"sent": sum(w // per_call for w in written), "bytes": sum(written),
          "complete": all(w == len(d) for w, d in zip(written, payloads))})
    for _line in sys.stdin:
        _out({"unread": sum(_unread(s) for s in socks), "connections": len(socks)})
    for sock in socks:
        sock.close()


def role_churn(p: dict) -> None:
    """``clients`` clients one after another: each connects, WatchHost ``hosts`` names and WatchPath
    (pipelined), then disconnects without Release."""
    errors: dict = {}
    started = time.monotonic()
    loop = GLib.MainLoop()
    for n in range(p["clients"]):
        conn = _connect(p["address"])
        pending = {"n": 0}

        def done(c, result, _data):
            _tally(errors, c, result)
            pending["n"] -= 1
            if pending["n"] == 0:
                loop.quit()

        calls = [("WatchHost", GLib.Variant("(s)", (f"c{(n * p['hosts'] + k) % p['names']}.{FAST_ZONE}",)))
                 for k in range(p["hosts"])] + [("WatchPath", None)]
        for member, args in calls:
            pending["n"] += 1
            conn.call(SERVICE, ROOT_PATH, MANAGER_IFACE, member, args, None, Gio.DBusCallFlags.NO_AUTO_START,
                      30000, None, done, None)
        loop.run()
        conn.close_sync(None)
    _out({"errors": errors, "seconds": time.monotonic() - started})


def _watch_all_dbus_python(conn, queue: list, watched) -> None:
    """``WatchAddress`` for every address of ``queue`` on a dbus-python connection, 8 in flight."""
    def more():
        if queue:
            conn.call_async(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", (queue.pop(),),
                            lambda _path: (watched(), more()),
                            lambda error: (watched(error.get_dbus_name()), more()), timeout=60)
    for _ in range(8):
        more()


def role_follower(p: dict) -> None:
    """An honest client holding many address targets on ``connections`` connections of one
    library (``gdbus``: GDBus, which answers ``Peer.Ping`` from its worker thread;
    ``dbus-python``: dbus-python on a GLib main loop, which answers it when it dispatches), that
    reads everything it is sent and keeps, per connection and target, the last ``Flags`` it was
    told (``InterfacesAdded``, ``PropertiesChanged``, ``StatusChanged``). ``{"op": "view"}``
    prints that view as ``{"ok": {"<connection>:<path>": flags}}``."""
    view: dict = {}
    watching = {"left": sum(len(a) for a in p["addresses"]), "errors": []}
    loop = GLib.MainLoop()
    connections = []  # kept: a connection nobody refers to is closed

    def seen(c, path, flags):
        if "/address/" in path:  # its targets (the root object's internet target is everybody's)
            view[f"{c}:{path}"] = int(flags)

    def on_properties(c, path, interface, changed):
        if interface == TARGET_IFACE and "Flags" in changed:
            seen(c, path, changed["Flags"])

    def on_added(c, path, interfaces):
        if TARGET_IFACE in interfaces:
            seen(c, path, interfaces[TARGET_IFACE]["Flags"])

    def on_removed(c, path, _interfaces):
        view.pop(f"{c}:{path}", None)

    def watched(error=None):
        watching["left"] -= 1
        if error is not None:
            watching["errors"].append(str(error))
        if watching["left"] == 0:
            _out({"ready": len(view), "errors": watching["errors"][:5]})

    if p["library"] == "gdbus":
        for c, addresses in enumerate(p["addresses"]):
            conn = _connect(p["address"])
            connections.append(conn)

            def on_signal(_conn, _sender, path, interface, member, params, c=c):
                args = params.unpack()
                if member == "PropertiesChanged":
                    on_properties(c, path, args[0], args[1])
                elif member == "StatusChanged":
                    seen(c, path, args[1])
                elif member == "InterfacesAdded":
                    on_added(c, args[0], args[1])
                elif member == "InterfacesRemoved":
                    on_removed(c, args[0], args[1])

            conn.signal_subscribe(SERVICE, None, None, None, None, Gio.DBusSignalFlags.NONE, on_signal)
            queue = list(addresses)

            def more(conn=conn, queue=queue):
                if queue:
                    conn.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", GLib.Variant("(s)", (queue.pop(),)),
                              None, Gio.DBusCallFlags.NO_AUTO_START, 60000, None, done, None)

            def done(conn, result, _data, more=more):
                try:
                    conn.call_finish(result)
                    watched()
                except GLib.Error as failure:
                    watched(_error_name(failure))
                more()

            for _ in range(8):
                more()
    else:
        import dbus  # pylint: disable=import-outside-toplevel
        import dbus.bus  # pylint: disable=import-outside-toplevel
        from dbus.mainloop.glib import DBusGMainLoop  # pylint: disable=import-outside-toplevel
        mainloop = DBusGMainLoop()
        for c, addresses in enumerate(p["addresses"]):
            conn = dbus.bus.BusConnection(p["address"], mainloop=mainloop)
            connections.append(conn)
            conn.add_signal_receiver(lambda i, ch, _inv, path=None, c=c: on_properties(c, path, str(i), ch),
                                     "PropertiesChanged", PROPERTIES_IFACE, SERVICE, path_keyword="path")
            conn.add_signal_receiver(lambda _s, f, path=None, c=c: seen(c, path, f),
                                     "StatusChanged", TARGET_IFACE, SERVICE, path_keyword="path")
            conn.add_signal_receiver(lambda path, ifaces, c=c: on_added(c, str(path), ifaces),
                                     "InterfacesAdded", OBJECT_MANAGER_IFACE, SERVICE)
            conn.add_signal_receiver(lambda path, ifaces, c=c: on_removed(c, str(path), ifaces),
                                     "InterfacesRemoved", OBJECT_MANAGER_IFACE, SERVICE)
            _watch_all_dbus_python(conn, list(addresses), watched)

    buffer = [b""]

    def on_stdin(fd, condition):
        chunk = os.read(fd, 65536)
        if not chunk:
            loop.quit()
            return False
        buffer[0] += chunk
        while b"\n" in buffer[0]:
            line, buffer[0] = buffer[0].split(b"\n", 1)
            if json.loads(line)["op"] == "view":
                _out({"ok": view})
        return True

    GLib.io_add_watch(sys.stdin.fileno(), GLib.IO_IN | GLib.IO_HUP, on_stdin)
    loop.run()


def role_blocking(p: dict) -> None:
    """A script with no main loop, making blocking calls one at a time (``dbus-python`` without a
    main loop, or ``jeepney``'s blocking API): it reads everything while it waits for a reply, but
    cannot answer a read receipt. On ``connections`` connections it watches ``names`` host names
    each, then on the first one reads every target's properties (``GetAll``) ``rounds`` times.
    Prints ``{"calls": [[what, seconds, error]]}``."""
    calls = []

    def timed(what, call):
        start = time.monotonic()
        error = None
        result = None
        try:
            result = call()
        except Exception as failure:  # pylint: disable=broad-except
            error = f"{type(failure).__name__}: {failure}"
        calls.append([what, time.monotonic() - start, error])
        return result

    if p["library"] == "dbus-python":
        import dbus.bus  # pylint: disable=import-outside-toplevel
        connections = [dbus.bus.BusConnection(p["address"]) for _ in range(p["connections"])]

        def call(conn, path, interface, member, signature, args):
            return conn.call_blocking(SERVICE, path, interface, member, signature, args, timeout=30)
    else:
        from jeepney import DBusAddress, new_method_call  # pylint: disable=import-outside-toplevel
        from jeepney.io.blocking import open_dbus_connection  # pylint: disable=import-outside-toplevel
        connections = [open_dbus_connection(p["address"]) for _ in range(p["connections"])]

        def call(conn, path, interface, member, signature, args):
            reply = conn.send_and_get_reply(new_method_call(DBusAddress(path, SERVICE, interface), member,
                                                            signature, args), timeout=30)
            if reply.header.message_type.name == "error":
                raise RuntimeError(f"{reply.header.fields} {reply.body}")
            return reply.body[0]

    paths = []
    for c, conn in enumerate(connections):
        for i in range(p["names"]):
            path = timed("WatchHost", lambda: call(conn, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s",
                                                   (f"b{c}-{i}.{FAST_ZONE}",)))
            if c == 0 and path is not None:
                paths.append(str(path))
    for _ in range(p["rounds"]):
        for path in paths:
            timed("GetAll", lambda: call(connections[0], path, PROPERTIES_IFACE, "GetAll", "s", (TARGET_IFACE,)))
    _out({"calls": calls, "paths": paths})
    sys.stdin.read()  # holds its targets until told to finish


ROLES = {"probe": role_probe, "tenant": role_tenant, "flood": role_flood, "nonreader": role_nonreader,
         "churn": role_churn, "follower": role_follower,
         "blocking": role_blocking}


def child_main() -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    role, params = sys.argv[1], json.loads(sys.argv[2])
    ROLES[role](params)
