"""An introspection-driven D-Bus fuzzer for reachabilityd, in the manner of dfuzzer.

It reads the service's object tree by introspection, then sends method calls
built from a dictionary -- every path, interface, member and property name
the introspection data holds, the standard interfaces, unknown and empty
names, target strings that are valid, invalid and odd -- with argument lists
that are right, one short, one long, of the wrong types, and random (random
signatures from a small type grammar). Random strings alone would almost never
name ``org.freedesktop.DBus.Peer`` in a ``GetAll``; the dictionary does.

Every call must be answered -- with a reply or a named D-Bus error -- and the
service must still answer ``Ping`` at the end. Calls are pipelined (a window of
outstanding calls), so the figure printed is the service's rate, not Python's
round trips.

As a program, for long runs against a daemon on any bus:

    python3 Tests/Integration/busfuzz.py --address unix:path=/run/dbus/system_bus_socket \\
        --calls 1000000 --seed 7

It prints one summary line and exits 1 if a call went unanswered or the
service stopped answering. Only the service's own name is called.
"""

from __future__ import annotations

import argparse
import collections
import random
import string
import sys
import time
import xml.etree.ElementTree as ElementTree

from gi.repository import Gio, GLib

SERVICE = "io.github.reachabilityd.Reachability1"
ROOT = "/io/github/reachabilityd/Reachability1"
# systemd's log control object (outside ROOT, so walked on its own).
LOG_CONTROL = "/org/freedesktop/LogControl1"
STANDARD = ("org.freedesktop.DBus.Properties", "org.freedesktop.DBus.Introspectable",
            "org.freedesktop.DBus.Peer", "org.freedesktop.DBus.ObjectManager")
# Names no table has: the dispatcher must say so, not guess.
UNKNOWN_INTERFACES = ("", SERVICE + ".Nope", "org.freedesktop.DBus", "a.b")
UNKNOWN_MEMBERS = ("Nope", "Get_", "GetAllX", "Introspect2")
# Target strings: ones that resolve without leaving the machine, numeric and scoped
# literals, and input the validation must refuse. No name here is looked up outside.
TARGETS = ("", "localhost", "127.0.0.1", "::1", "fe80::1%lo", "192.0.2.1.", "2130706433", "0177.0.0.1",
           "1.2.3", "nosuch.test", "UPPER.TEST", "a..b", "-a.test", "a" * 64 + ".test", "x" * 300,
           "b\u00fccher.test", "http://example.test/", "host.test:80", "[::1]", "%", "1.2.3.4/24",
           "192.0.2.10,198.51.100.7", ",::1", "127.0.0.1,")
# LogControl1 values: every level, and the targets that stay inside the test (journal, kmsg
# and syslog would write into this machine's own logs; the daemon's own tests set those).
LOG_VALUES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug", "console", "null", "auto",
              "Debug", "verbose", "journal-or-kmsg")
SAMPLES = {"y": lambda r: GLib.Variant("y", r.randrange(256)), "b": lambda r: GLib.Variant("b", r.random() < .5),
           "n": lambda r: GLib.Variant("n", r.randrange(-2**15, 2**15)),
           "q": lambda r: GLib.Variant("q", r.randrange(2**16)),
           "i": lambda r: GLib.Variant("i", r.randrange(-2**31, 2**31)),
           "u": lambda r: GLib.Variant("u", r.randrange(2**32)),
           "x": lambda r: GLib.Variant("x", r.randrange(-2**63, 2**63)),
           "t": lambda r: GLib.Variant("t", r.randrange(2**64)), "d": lambda r: GLib.Variant("d", r.random()),
           "g": lambda r: GLib.Variant("g", r.choice(["", "s", "a{sv}", "(ii)"]))}
BASIC = "ybnqiuxtdsog"


class Surface:
    """What introspection says: paths, and per interface its members' input signatures and properties."""

    def __init__(self, connection: Gio.DBusConnection, service: str = SERVICE, root: str = ROOT):
        self.paths = []
        self.methods = collections.defaultdict(dict)   # interface -> {member: input signature}
        self.properties = collections.defaultdict(set)  # interface -> {property}
        self._walk(connection, service, root)
        if service == SERVICE:
            self._walk(connection, service, LOG_CONTROL)
        parts = root.strip("/").split("/")
        self.paths += ["/" + "/".join(parts[:i]) for i in range(len(parts))]  # nodes on the way, and "/"
        self.paths += [root + "/host/nosuch", root + "/address/_31", root + "/pair/_2c_31", root + "/x/y/z"]

    def _walk(self, connection, service, path):
        reply = connection.call_sync(service, path, "org.freedesktop.DBus.Introspectable", "Introspect", None,
                                     GLib.VariantType("(s)"), Gio.DBusCallFlags.NO_AUTO_START, 10000, None)
        node = ElementTree.fromstring(reply.unpack()[0])
        if node.findall("interface"):
            self.paths.append(path)
        for interface in node.findall("interface"):
            name = interface.get("name")
            for method in interface.findall("method"):
                self.methods[name][method.get("name")] = "".join(
                    a.get("type") for a in method.findall("arg") if a.get("direction", "in") == "in")
            for prop in interface.findall("property"):
                self.properties[name].add(prop.get("name"))
        for child in node.findall("node"):
            self._walk(connection, service, path.rstrip("/") + "/" + child.get("name"))

    @property
    def interfaces(self):
        return sorted(set(self.methods) | set(STANDARD)) + list(UNKNOWN_INTERFACES)

    @property
    def members(self):
        return sorted({m for ms in self.methods.values() for m in ms}) + list(UNKNOWN_MEMBERS)

    @property
    def strings(self):
        names = set(self.interfaces) | {p for ps in self.properties.values() for p in ps} | set(self.members)
        return sorted(names) + list(TARGETS) + list(LOG_VALUES)

    def signature(self, member: str) -> str:
        for members in self.methods.values():
            if member in members:
                return members[member]
        return ""


class Fuzzer:
    def __init__(self, connection: Gio.DBusConnection, surface: Surface, seed: int, service: str = SERVICE):
        self.connection = connection
        self.surface = surface
        self.random = random.Random(seed)
        self.service = service
        self.errors = collections.Counter()
        self.replies = collections.Counter()   # (interface, member) answered with a reply
        self.unanswered = []

    # -- values --

    def value(self, signature: str) -> GLib.Variant:
        return GLib.Variant(signature, self.native(signature))

    def native(self, signature: str, depth: int = 0):
        """A Python value for ``signature`` as GLib.Variant takes it (a variant's content is a Variant)."""
        r = self.random
        if signature == "s":
            return r.choice(self.surface.strings) if r.random() < .9 else self._noise()
        if signature == "o":
            return r.choice(self.surface.paths)
        if signature == "v":
            inner = r.choice(["u", "s", "b", "as", "a{sv}"] if depth < 3 else ["u", "s"])
            return GLib.Variant(inner, self.native(inner, depth + 1))
        if signature in SAMPLES:
            return SAMPLES[signature](r).unpack()
        if signature.startswith("a{"):
            key, value = signature[2], signature[3:-1]
            return {self.native(key, depth + 1): self.native(value, depth + 1) for _ in range(r.randrange(3))}
        if signature.startswith("a"):
            return [self.native(signature[1:], depth + 1) for _ in range(r.randrange(3))]
        if signature.startswith("("):
            return tuple(self.native(t, depth + 1) for t in split_all(signature[1:-1]))
        raise ValueError(signature)

    def _noise(self) -> str:
        alphabet = string.ascii_letters + string.digits + ".-_:%/[]@ \u00e9\u4e2d"
        return "".join(self.random.choice(alphabet) for _ in range(self.random.randrange(0, 80)))

    def random_signature(self, depth: int = 0) -> str:
        r = self.random
        roll = r.random()
        if depth > 2 or roll < .6:
            return r.choice(BASIC + "v")
        if roll < .75:
            return "a" + self.random_signature(depth + 1)
        if roll < .85:
            return "a{" + r.choice("sou") + self.random_signature(depth + 1) + "}"
        return "(" + "".join(self.random_signature(depth + 1) for _ in range(r.randrange(1, 4))) + ")"

    def arguments(self, member: str) -> str:
        """The argument signature to send: the declared one, or one off from it."""
        declared = self.surface.signature(member)
        roll = self.random.random()
        if roll < .45:
            return declared
        if roll < .6:
            return declared[:-1] if declared else "s"                         # one short
        if roll < .7:
            return declared + self.random.choice(BASIC)                        # one long
        if roll < .85:
            return "".join("u" if c == "s" else "s" for c in split_all(declared)) or "u"   # wrong types
        return "".join(self.random_signature() for _ in range(self.random.randrange(0, 4)))

    # -- calls --

    def message(self) -> Gio.DBusMessage:
        r = self.random
        member = r.choice(self.surface.members)
        owners = [i for i, ms in self.surface.methods.items() if member in ms]
        interface = r.choice(owners) if owners and r.random() < .7 else r.choice(self.surface.interfaces)
        path = r.choice(self.surface.paths)
        message = Gio.DBusMessage.new_method_call(self.service, path, interface or None, member)
        signature = self.arguments(member)
        if signature:
            values = [self.value(t) for t in split_all(signature)]
            # The Properties methods' first string is an interface name: mostly one that exists, so
            # that the calls get past it to the names that matter, however large the dictionary grows.
            if interface == "org.freedesktop.DBus.Properties" and values[0].get_type_string() == "s" \
                    and r.random() < .7:
                values[0] = GLib.Variant("s", r.choice(sorted(self.surface.methods) + sorted(self.surface.properties)))
            message.set_body(GLib.Variant.new_tuple(*values))
        return message

    def run(self, calls: int, window: int = 32, timeout_ms: int = 10000) -> float:
        """Sends ``calls`` calls, ``window`` at a time; returns the seconds taken."""
        context = GLib.MainContext.default()
        outstanding = {"n": 0}
        started = time.monotonic()

        def done(connection, result, what):
            outstanding["n"] -= 1
            try:
                reply = connection.send_message_with_reply_finish(result)
            except GLib.Error as error:
                self.unanswered.append(f"{what}: {error.message}")
                return
            if reply.get_message_type() == Gio.DBusMessageType.ERROR:
                self.errors[reply.get_error_name()] += 1
            else:
                self.replies[what] += 1

        sent = 0
        while sent < calls or outstanding["n"]:
            while sent < calls and outstanding["n"] < window:
                message = self.message()
                what = (message.get_interface() or "", message.get_member())
                self.connection.send_message_with_reply(message, Gio.DBusSendMessageFlags.NONE, timeout_ms, None,
                                                        done, what)
                outstanding["n"] += 1
                sent += 1
            context.iteration(True)
        return time.monotonic() - started

    def alive(self) -> bool:
        try:
            self.connection.call_sync(self.service, ROOT, "org.freedesktop.DBus.Peer", "Ping", None, None,
                                      Gio.DBusCallFlags.NO_AUTO_START, 10000, None)
            self.connection.call_sync(self.service, ROOT, "org.freedesktop.DBus.Properties", "GetAll",
                                      GLib.Variant("(s)", (SERVICE + ".Target",)), None,
                                      Gio.DBusCallFlags.NO_AUTO_START, 10000, None)
            return True
        except GLib.Error:
            return False

    def summary(self, calls: int, seconds: float) -> str:
        covered = len(self.replies)
        declared = sum(len(ms) for ms in self.surface.methods.values())
        return (f"busfuzz: {calls} calls in {seconds:.2f} s ({calls / seconds:.0f} calls/s), "
                f"{sum(self.errors.values())} errors of {len(self.errors)} names, "
                f"{sum(self.replies.values())} replies covering {covered} (interface, member) pairs "
                f"of {declared} declared, {len(self.surface.paths)} paths, {len(self.unanswered)} unanswered")


def split_all(signature: str) -> list:
    """Complete types of a signature: 'sa{sv}(ii)' -> ['s', 'a{sv}', '(ii)']."""
    types, i = [], 0
    while i < len(signature):
        j = _end(signature, i)
        types.append(signature[i:j])
        i = j
    return types


def _end(signature: str, i: int) -> int:
    c = signature[i]
    if c == "a":
        return _end(signature, i + 1)
    if c in "({":
        close, depth, j = {"(": ")", "{": "}"}[c], 0, i
        while True:
            if signature[j] in "({":
                depth += 1
            elif signature[j] in ")}":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
    return i + 1


def connect(address: str) -> Gio.DBusConnection:
    return Gio.DBusConnection.new_for_address_sync(
        address, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION,
        None, None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", help="the bus (default: the system bus)")
    parser.add_argument("--calls", type=int, default=100000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--window", type=int, default=32)
    options = parser.parse_args()
    connection = connect(options.address) if options.address else Gio.bus_get_sync(Gio.BusType.SYSTEM, None)
    fuzzer = Fuzzer(connection, Surface(connection), options.seed)
    seconds = fuzzer.run(options.calls, options.window)
    print(fuzzer.summary(options.calls, seconds))
    for what in fuzzer.unanswered[:10]:
        print("  unanswered:", what)
    alive = fuzzer.alive()
    if not alive:
        print("busfuzz: the service no longer answers")
    return 0 if alive and not fuzzer.unanswered else 1


if __name__ == "__main__":
    sys.exit(main())
