"""Nobody on the machine can crash, stop or mislead the service or its clients.

* The surface matrix: generated from the daemon's own introspection, every
  object kind x every interface name x every method name x {right arguments,
  one too many, wrong types} gets a reply or a named error, and the daemon
  still answers afterwards.
* The bus fuzzer (busfuzz.py), bounded here; see README for long runs. What
  the fuzzer made the daemon allocate is given back: its RSS after the run is
  within ``FUZZ_RSS_KB`` of before.
* Forged bus-driver signals sent to the daemon (NameLost, NameOwnerChanged),
  by root on an open bus (the daemon's own checks) and by ``nobody`` under
  the shipped policy: ignored.
* Forged service signals sent straight to ``reachctl watch`` and to the
  library by ``nobody``: ignored; the next line they print is the real
  change.
* Clients on ordinary conditions: ``reachctl … | head -1`` and a ``watch``
  whose reader left end quietly; managers created, listened to and dropped by
  the thousand, in-process and through the daemon, while the network
  changes: no crash.
"""

import os
import pwd
import signal
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import busfuzz
import harness
from conftest import _lab, require
from harness import (CHANGE_TIMEOUT, MANAGER_IFACE, OBJECT_MANAGER_IFACE, PEER_IFACE, PROPERTIES_IFACE, ROOT_PATH,
                     SERVICE, TARGET_IFACE, BusClient, DBusCallError, Gio, GLib)
from test_clients import BIN, Client, clients, in_lab, start_kernel_daemon  # noqa: F401 (fixture)
from test_targets import path_of

sys.path.insert(0, str(harness.REPO / "Benchmarks"))
from measure import rss_kb  # noqa: E402  pylint: disable=wrong-import-position

POLICY = harness.REPO / "dbus" / (SERVICE + ".conf")
ERROR_PREFIXES = ("org.freedesktop.DBus.Error.", SERVICE + ".Error.")
FUZZ_CALLS = int(os.environ.get("REACH_FUZZ_CALLS", "4000"))
# What the daemon may keep after the fuzzer (measured: +0.4 MiB after 4,000 calls, +1.4 MiB after
# 100,000 with 32 or 256 in flight, anonymous memory back to 2.2-2.4 MiB; the heap is trimmed when
# queues drain, and a large message is its own mapping, unmapped when freed).
FUZZ_RSS_KB = 8 * 1024
CHURN = int(os.environ.get("REACH_CHURN", "2000"))


@pytest.fixture
def policy_lab(request):
    """The NetworkManager lab, its bus loading the shipped policy on top of the open one."""
    require()
    lab = harness.NMLab()
    lab.bus.extra_config = f"<include>{POLICY}</include>"
    return _lab(request, lab)


def alive(lab, daemon):
    assert daemon.running, f"the daemon exited ({daemon.returncode}):\n{daemon.log_text()[-3000:]}"
    lab.client.call(SERVICE, ROOT_PATH, PEER_IFACE, "Ping")
    return lab.client.call(SERVICE, ROOT_PATH, PROPERTIES_IFACE, "Get", "ss", (TARGET_IFACE, "Status"))[0]


# -- the surface matrix ------------------------------------------------------------------------------------------


def introspected(client, path):
    """{interface: {method: input signature}} of one object, from its live introspection."""
    xml = client.call(SERVICE, path, "org.freedesktop.DBus.Introspectable", "Introspect")[0]
    return {i.get("name"): {m.get("name"): "".join(a.get("type") for a in m.findall("arg")
                                                   if a.get("direction", "in") == "in")
                            for m in i.findall("method")}
            for i in ElementTree.fromstring(xml).findall("interface")}


def raw_call(client, path, interface, member, signature, args):
    """A method call as it is written, an empty interface included; returns the reply body or raises."""
    message = Gio.DBusMessage.new_method_call(SERVICE, path, interface or None, member)
    if signature:
        message.set_body(GLib.Variant(f"({signature})", tuple(args)))
    reply, _serial = client.conn.send_message_with_reply_sync(message, Gio.DBusSendMessageFlags.NONE, 20000, None)
    if reply.get_message_type() == Gio.DBusMessageType.ERROR:
        body = reply.get_body()
        raise DBusCallError(reply.get_error_name(), body.unpack()[0] if body is not None else "")
    return reply.get_body()


def sample(signature, interface, target_path):
    """Right arguments for a member of ``signature``, aimed at ``interface`` for Properties."""
    values = {"s": interface if interface.startswith("org.freedesktop.DBus") or interface.startswith(SERVICE)
              else "localhost",
              "o": target_path, "v": GLib.Variant("u", 1)}
    args = [values[c] for c in signature]
    if signature == "ss":
        args[1] = "Flags"
    return args


def test_every_member_of_every_interface_on_every_object_answers(nm_lab):
    lab = start_kernel_daemon(nm_lab)
    daemon = lab.daemons[-1]
    holder = lab.client
    host = holder.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", ("localhost",))[0]
    address = holder.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.1",))[0]
    paths = holder.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath")[0]
    objects = {"root": ROOT_PATH, "host": host, "address": address, "path": paths,
               "log control": busfuzz.LOG_CONTROL, "none": ROOT_PATH + "/host/nosuch"}
    surface = {}
    for path in (ROOT_PATH, host, address, paths, busfuzz.LOG_CONTROL):
        for interface, methods in introspected(holder, path).items():
            surface.setdefault(interface, {}).update(methods)
    assert set(surface) >= {MANAGER_IFACE, TARGET_IFACE, SERVICE + ".Path", PROPERTIES_IFACE, PEER_IFACE,
                            OBJECT_MANAGER_IFACE, "org.freedesktop.DBus.Introspectable",
                            "org.freedesktop.LogControl1"}, sorted(surface)
    interfaces = sorted(surface) + [SERVICE + ".NoSuchInterface", ""]
    members = sorted({m: s for ms in surface.values() for m, s in ms.items()}.items())

    caller = BusClient(lab.bus.address)
    calls, replies, errors = 0, 0, {}
    try:
        for kind, path in objects.items():
            for interface in interfaces:
                for member, signature in members:
                    right = sample(signature, interface, address)
                    variants = {"right": (signature, right), "one too many": (signature + "s", right + ["x"]),
                                "wrong types": ("u" * max(1, len(signature)), [7] * max(1, len(signature)))}
                    for what, (sig, args) in variants.items():
                        calls += 1
                        try:
                            raw_call(caller, path, interface, member, sig, args)
                            replies += 1
                        except DBusCallError as error:
                            assert error.name.startswith(ERROR_PREFIXES), \
                                f"{kind} {interface}.{member} ({what}): {error.name}: {error}"
                            assert error.name != "org.freedesktop.DBus.Error.NoReply", f"{kind} {member}: no reply"
                            errors[error.name] = errors.get(error.name, 0) + 1
                # The daemon still answers after each interface's block.
                alive(lab, daemon)
                # GetAll of a standard interface an object implements is an empty dict.
                if interface in ("org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Introspectable",
                                 PROPERTIES_IFACE) and kind != "none":
                    assert caller.call(SERVICE, path, PROPERTIES_IFACE, "GetAll", "s", (interface,)) == ({},)
    finally:
        caller.close()
    print(f"surface matrix: {calls} calls on {len(objects)} objects x {len(interfaces)} interfaces x "
          f"{len(members)} members x 3 argument lists: {replies} replies, errors {errors}")
    assert calls == len(objects) * len(interfaces) * len(members) * 3
    assert replies > 0 and errors
    # The objects the holder watched are still there.
    assert {host, address, paths} <= set(holder.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE,
                                                     "GetManagedObjects")[0])


def test_gdbus_introspect_and_busctl_on_every_standard_interface(nm_lab):
    """What a stranger types first: gdbus introspect (which calls GetAll on every interface) and busctl."""
    lab = start_kernel_daemon(nm_lab)
    daemon = lab.daemons[-1]
    child = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.1",))[0]
    paths = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath")[0]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "DBUS_SYSTEM_BUS_ADDRESS": lab.bus.address}
    for path in (ROOT_PATH, child, paths):
        done = subprocess.run(["gdbus", "introspect", "--system", "--dest", SERVICE, "--object-path", path],
                              capture_output=True, text=True, timeout=30, env=env, check=False)
        assert done.returncode == 0, done.stderr
        assert "interface org.freedesktop.DBus.Peer" in done.stdout and "readonly u Flags" in done.stdout
        for interface in ("org.freedesktop.DBus.Peer", "org.freedesktop.DBus.Properties",
                          "org.freedesktop.DBus.Introspectable", "org.freedesktop.DBus.ObjectManager"):
            done = subprocess.run(["busctl", f"--address={lab.bus.address}", "call", SERVICE, path, PROPERTIES_IFACE,
                                   "GetAll", "s", interface], capture_output=True, text=True, timeout=30, check=False)
            if interface.endswith("ObjectManager") and path != ROOT_PATH:
                assert "UnknownInterface" in done.stderr or "interface" in done.stderr, done.stderr
            else:
                assert done.returncode == 0 and done.stdout.strip() == "a{sv} 0", (interface, done.stdout,
                                                                                   done.stderr)
    error = lab.client.call_error(SERVICE, ROOT_PATH, PROPERTIES_IFACE, "Get", "ss",
                                  ("org.freedesktop.DBus.Peer", "Flags"))
    assert error is not None and error.name == "org.freedesktop.DBus.Error.UnknownProperty", error
    alive(lab, daemon)


# -- the fuzzer ----------------------------------------------------------------------------------------------------


def test_bus_fuzzer_finds_nothing(nm_lab):
    lab = start_kernel_daemon(nm_lab)
    daemon = lab.daemons[-1]
    lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", ("localhost",))
    lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.1",))
    connection = busfuzz.connect(lab.bus.address)
    fuzzer = busfuzz.Fuzzer(connection, busfuzz.Surface(connection), seed=int(os.environ.get("REACH_FUZZ_SEED", "1")))
    rss_before = rss_kb(daemon.pid)
    seconds = fuzzer.run(FUZZ_CALLS)
    print(fuzzer.summary(FUZZ_CALLS, seconds))
    assert not fuzzer.unanswered, fuzzer.unanswered[:10]
    alive(lab, daemon)  # a round trip after every reply: whatever trims after a drain has run
    rss_after = rss_kb(daemon.pid)
    print(f"RSS {rss_before} KiB before the fuzzer, {rss_after} KiB after")
    assert rss_after - rss_before <= FUZZ_RSS_KB, \
        f"the daemon kept {rss_after - rss_before} KiB after the fuzzer (bound {FUZZ_RSS_KB} KiB)"
    assert fuzzer.alive() and daemon.running, daemon.log_text()[-3000:]
    # It reached the standard interfaces with the names that matter, and got named errors.
    assert ("org.freedesktop.DBus.Properties", "GetAll") in fuzzer.replies
    assert all(name.startswith(ERROR_PREFIXES) for name in fuzzer.errors), fuzzer.errors
    alive(lab, daemon)


# -- forged bus-driver signals to the daemon -----------------------------------------------------------------

# Sends signals as whoever runs it, each to the destination it names, then makes a
# round trip to each destination (ordered after the signals) so they were handled.
FORGER = r'''
import json, sys
from gi.repository import Gio, GLib
connection = Gio.DBusConnection.new_for_address_sync(
    sys.argv[1], Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
    None, None)
destinations = set()
for s in json.loads(sys.argv[2]):
    body = GLib.Variant.parse(GLib.VariantType(s["signature"]), s["body"], None, None)
    connection.emit_signal(s["destination"], s["path"], s["interface"], s["member"], body)
    destinations.add(s["destination"])
connection.flush_sync(None)
for destination in destinations:
    try:
        connection.call_sync(destination, "/", "org.freedesktop.DBus.Peer", "Ping", None, None,
                             Gio.DBusCallFlags.NO_AUTO_START, 10000, None)
    except GLib.Error as error:
        print("ping:", error.message, file=sys.stderr)
print(connection.get_unique_name())
'''


def forge(lab, user, signals, enter=None):
    """Send ``signals`` as ``user`` (a fresh connection); returns the forger's unique name."""
    script = lab.directory / "forger.py"
    script.write_text(FORGER)
    script.chmod(0o644)
    import json  # pylint: disable=import-outside-toplevel
    argv = ["/usr/bin/python3", str(script), lab.bus.address, json.dumps(signals)]
    entry = pwd.getpwnam(user)
    if entry.pw_uid != os.geteuid():
        argv = [harness.need_tool("setpriv"), f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                "--clear-groups", "--"] + argv
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/", "LANG": "C.UTF-8",
                               "PYTHONDONTWRITEBYTECODE": "1"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def driver_signal(destination, member, signature, *args):
    return {"destination": destination, "path": "/org/freedesktop/DBus", "interface": "org.freedesktop.DBus",
            "member": member, "signature": f"({signature})",
            "body": GLib.Variant(f"({signature})", tuple(args)).print_(True)}


def forged_driver_signals_are_ignored(lab, user):
    daemon = lab.daemons[-1]
    victim = BusClient(lab.bus.address)
    try:
        path = victim.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.1",))[0]
        name = victim.conn.get_unique_name()
        daemon_name = lab.client.name_owner(SERVICE)
        forge(lab, user, [
            driver_signal(daemon_name, "NameLost", "s", SERVICE),
            driver_signal(daemon_name, "NameOwnerChanged", "sss", name, name, ""),
            driver_signal(daemon_name, "NameOwnerChanged", "sss", SERVICE, daemon_name, ""),
            driver_signal(daemon_name, "NameAcquired", "s", "org.example.Other"),
        ])
        alive(lab, daemon)
        assert lab.client.name_owner(SERVICE) == daemon_name
        assert path in lab.client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")[0]
        victim.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (path,))
    finally:
        victim.close()
    # The real driver's word still counts: a client that leaves loses its targets.
    leaver = BusClient(lab.bus.address)
    path = leaver.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddress", "s", ("127.0.0.2",))[0]
    leaver.close()
    harness.wait_until(lambda: path not in lab.client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE,
                                                           "GetManagedObjects")[0],
                       CHANGE_TIMEOUT, "the target of a client that left released", poll=0.1)
    assert daemon.running


def test_forged_driver_signals_change_nothing_on_an_open_bus(plain_lab):
    """Root on a bus that lets anyone send anything: the daemon's own checks."""
    plain_lab.daemon(args=["--system", "--backend", "kernel"])
    forged_driver_signals_are_ignored(plain_lab, "root")


def test_forged_driver_signals_change_nothing_under_the_shipped_policy(policy_lab):
    policy_lab.daemon(args=["--system", "--backend", "kernel"])
    forged_driver_signals_are_ignored(policy_lab, "nobody")


# -- forged service signals to clients -----------------------------------------------------------------------


def unique_name_of(lab, pid):
    names = lab.client.call(harness.DBUS_NAME, harness.DBUS_PATH, "org.freedesktop.DBus", "ListNames")[0]
    for name in names:
        if name.startswith(":"):
            try:
                owner = lab.client.call(harness.DBUS_NAME, harness.DBUS_PATH, "org.freedesktop.DBus",
                                        "GetConnectionUnixProcessID", "s", (name,))[0]
            except DBusCallError:
                continue
            if owner == pid:
                return name
    return None


def service_forgeries(client_name, daemon_name, path):
    spoofed = {"Interface": GLib.Variant("s", "SPOOFED"), "Flags": GLib.Variant("u", 0),
               "Status": GLib.Variant("i", 0), "Reachable": GLib.Variant("b", False)}
    return [
        {"destination": client_name, "path": path, "interface": PROPERTIES_IFACE, "member": "PropertiesChanged",
         "signature": "(sa{sv}as)", "body": GLib.Variant("(sa{sv}as)", (TARGET_IFACE, spoofed, [])).print_(True)},
        {"destination": client_name, "path": path, "interface": TARGET_IFACE, "member": "StatusChanged",
         "signature": "(iu)", "body": GLib.Variant("(iu)", (0, 0)).print_(True)},
        driver_signal(client_name, "NameOwnerChanged", "sss", SERVICE, daemon_name, ""),
    ]


def test_clients_ignore_forged_service_signals(policy_lab, clients):  # pylint: disable=redefined-outer-name
    lab = start_kernel_daemon(policy_lab)
    daemon_name = lab.client.name_owner(SERVICE)
    watcher = clients(lab, [BIN / "reachctl", "watch"], "reachctl-watch")
    first = watcher.next_line("the current state")
    assert "internet: Reachable status=2" in first, first
    app = clients(lab, [BIN / "reachability-example", "--daemon", harness.SOMEHOST[0]], "example")
    assert app.next_line("the mode") == "mode daemon"
    assert app.next_line("the current status").startswith("status reachable")

    for client, path in ((watcher, ROOT_PATH), (app, path_of("host", harness.SOMEHOST[0]))):
        name = harness.wait_until(lambda c=client: unique_name_of(lab, c.popen.pid), CHANGE_TIMEOUT,
                                  f"the bus name of {client.log.name}", poll=0.1)
        forge(lab, "nobody", service_forgeries(name, daemon_name, path))

    # The next thing either prints is the real change, not a forged one.
    lab.set_carrier(False)
    line = watcher.next_line("the carrier loss")
    assert "internet: Not Reachable status=0" in line and "SPOOFED" not in line, line
    assert app.next_line("the carrier loss, for the library") == "status notReachable flags 0"
    lab.set_carrier(True)
    assert "internet: Reachable status=2" in watcher.next_line("the carrier's return")
    assert app.next_line("the carrier's return, for the library").startswith("status reachable")
    assert watcher.stop(signal.SIGINT) == []
    assert not any("SPOOFED" in line or "Unknown" in line for line in watcher.lines), watcher.lines


# -- clients on ordinary conditions ----------------------------------------------------------------------------


def test_reachctl_whose_reader_leaves_ends_quietly(nm_lab):
    lab = start_kernel_daemon(nm_lab)
    env = {"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": lab.bus.address}
    reachctl = BIN / "reachctl"
    for args in (["query", "127.0.0.1", "localhost", "127.0.0.2"], ["query", "--json", "127.0.0.1", "::1"]):
        command = " ".join(map(str, in_lab(lab, [reachctl, *args]))) + " | head -1"
        done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True,
                              timeout=60, env=env, check=False)
        assert done.stdout.count("\n") == 1, done.stdout
        assert done.stderr == "", f"{args}: {done.stderr}"
        assert done.returncode in (0, 141), done.returncode  # SIGPIPE, as coreutils end
    # watch: the reader leaves after the first line; the next change ends watch without a word.
    with open(lab.directory / "watch.err", "wb") as err:
        watch = subprocess.Popen(in_lab(lab, [reachctl, "watch"]), stdout=subprocess.PIPE, stderr=err, env=env)
    first = harness.read_line(watch.stdout, CHANGE_TIMEOUT)
    assert first and "internet:" in first
    watch.stdout.close()
    lab.set_carrier(False)
    try:
        status = watch.wait(timeout=CHANGE_TIMEOUT)
    finally:
        if watch.poll() is None:
            watch.kill()
    lab.set_carrier(True)
    assert status == -signal.SIGPIPE, status
    assert (lab.directory / "watch.err").read_text() == ""


def test_managers_dropped_mid_update_by_the_thousand(nm_lab):
    """create, listen, drop — in-process and through the daemon, concurrently, while the carrier flaps."""
    lab = start_kernel_daemon(nm_lab)
    env = {"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": lab.bus.address}
    runs = []
    for mode in ("--daemon", "--no-daemon"):
        for target in ("localhost", "127.0.0.1"):
            log = lab.directory / f"churn{mode}-{target}.log"
            with open(log, "wb") as out:
                runs.append((mode, target, log, subprocess.Popen(
                    in_lab(lab, [BIN / "reachability-example", mode, "--churn", CHURN, target]),
                    stdout=out, stderr=subprocess.STDOUT, env=env)))
    flaps = 0
    while any(p.poll() is None for *_, p in runs) and flaps < 200:
        lab.set_carrier(flaps % 2 == 1)
        flaps += 1
    lab.set_carrier(True)
    for mode, target, log, process in runs:
        try:
            status = process.wait(timeout=300)
        except subprocess.TimeoutExpired:
            process.kill()
            status = "timeout"
        text = log.read_text(errors="replace")
        assert status == 0, f"{mode} {target}: {status}\n{text[-3000:]}"
        assert f"churned {CHURN}" in text, text[-2000:]
    print(f"{len(runs)} churners x {CHURN} managers, {flaps} carrier changes meanwhile: 0 crashes")
    # Every target the churners held through the daemon is released.
    harness.wait_until(lambda: lab.client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE,
                                               "GetManagedObjects")[0] == {},
                       CHANGE_TIMEOUT, "no target left after the churners", poll=0.1)


def test_reachctl_when_the_daemon_vanishes_mid_call(nm_lab):
    """The daemon is stopped, reachctl's Query reaches it (a bus monitor sees it pass), then the daemon
    is killed: the bus answers the call for it (NoReply), and reachctl says so in a sentence and exits
    2 — no crash, no hang."""
    lab = start_kernel_daemon(nm_lab)
    daemon = lab.daemons[-1]
    env = {"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": lab.bus.address}
    # A monitor sees reachctl's Query pass through the bus to the stopped daemon.
    monitor = Gio.DBusConnection.new_for_address_sync(
        lab.bus.address,
        Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
    queries = []
    def seen(_connection, message, _incoming):
        queries.append(message.get_member())
        return message
    monitor.add_filter(seen)
    monitor.call_sync(harness.DBUS_NAME, harness.DBUS_PATH, "org.freedesktop.DBus.Monitoring", "BecomeMonitor",
                      GLib.Variant("(asu)", ([f"type='method_call',interface='{MANAGER_IFACE}',member='Query'"], 0)),
                      None, Gio.DBusCallFlags.NONE, 10000, None)
    os.kill(daemon.pid, signal.SIGSTOP)
    try:
        with open(lab.directory / "vanish.err", "wb") as err:
            query = subprocess.Popen(in_lab(lab, [BIN / "reachctl", "--daemon", "query", "127.0.0.1"]),
                                     stdout=subprocess.PIPE, stderr=err, env=env)
        harness.wait_until(lambda: "Query" in queries, CHANGE_TIMEOUT, "reachctl's Query on its way", poll=0.02)
    finally:
        os.kill(daemon.pid, signal.SIGKILL)
    out, _ = query.communicate(timeout=CHANGE_TIMEOUT)
    err = (lab.directory / "vanish.err").read_text()
    assert query.returncode == 2, (query.returncode, out, err)
    assert err.startswith("reachctl: ") and err.count("\n") <= 2, err
    assert "Fatal error" not in err and "Backtrac" not in err, err
    assert "Query" in queries
    print("reachctl said:", err.strip())
