"""The daemon's D-Bus surface on the root object and the path object, as busctl and gdbus see it.

The daemon runs on a private system bus with no NetworkManager on it, which
is also the "NetworkManager not running" state: Backend "none", Status -1
(unknown), Flags 0. The members expected are read from the interface XML in
dbus/ (the contract), so the test follows the contract as it grows.
"""

import re
import subprocess

import pytest

import harness
from harness import (INTROSPECTABLE_IFACE, MANAGER_IFACE, OBJECT_MANAGER_IFACE, PEER_IFACE, PROPERTIES_IFACE,
                     ROOT_PATH, SERVICE, TARGET_IFACE)

CONTRACT = harness.contract_members()
PATH_IFACE = SERVICE + ".Path"
PATH_PATH = ROOT_PATH + "/path"
LOG_CONTROL_IFACE = "org.freedesktop.LogControl1"
LOG_CONTROL_PATH = "/org/freedesktop/LogControl1"
# Which contract interfaces each object implements (the path object while a client holds it).
METRICS_IFACE = SERVICE + ".Metrics"
OBJECT_INTERFACES = {ROOT_PATH: (MANAGER_IFACE, TARGET_IFACE, METRICS_IFACE), PATH_PATH: (PATH_IFACE,),
                     LOG_CONTROL_PATH: (LOG_CONTROL_IFACE,)}

# The standard interfaces every object of the daemon implements (the root
# object adds ObjectManager), with the members the D-Bus specification gives them.
STANDARD = {
    PROPERTIES_IFACE: {
        "methods": {"Get": ("ss", "v"), "GetAll": ("s", "a{sv}"), "Set": ("ssv", "")},
        "signals": {"PropertiesChanged": "sa{sv}as"},
    },
    INTROSPECTABLE_IFACE: {"methods": {"Introspect": ("", "s")}, "signals": {}},
    PEER_IFACE: {"methods": {"Ping": ("", ""), "GetMachineId": ("", "s")}, "signals": {}},
    OBJECT_MANAGER_IFACE: {
        "methods": {"GetManagedObjects": ("", "a{oa{sa{sv}}}")},
        "signals": {"InterfacesAdded": "oa{sa{sv}}", "InterfacesRemoved": "oas"},
    },
}

UNKNOWN_IFACE = SERVICE + ".NoSuchInterface"
UNKNOWN_PATH = ROOT_PATH + "/no_such_object"

# The answer without NetworkManager (the "NetworkManager not running" state).
NO_BACKEND = {
    "Kind": "internet",
    "Name": "",
    "Flags": 0,
    "Status": -1,
    "Reachable": False,
    "ReachableViaWiFi": False,
    "ReachableViaWWAN": False,
    "ReachableViaEthernet": False,
    "ConnectionRequired": False,
    "InterfaceType": "",
    "Interface": "",
    "Addresses": [],
    "Reason": "",
    "Error": "",
}


@pytest.fixture
def daemon(plain_lab):
    # NetworkManager only: without it the answer is "unknown" whatever the machine's routes
    # (the default, auto, falls back to the kernel; see test_kernel_backend.py).
    return plain_lab.daemon(args=["--system", "--backend", "networkmanager"])


@pytest.fixture
def client(plain_lab, daemon):  # pylint: disable=unused-argument
    return plain_lab.client


def run_tool(argv):
    result = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    assert result.returncode == 0, f"{' '.join(argv)} failed ({result.returncode}):\n{result.stderr}"
    return result.stdout


def parse_busctl(text):
    """``busctl introspect`` → ``{interface: {member: (type, signature, result, flags)}}``."""
    interfaces, current = {}, None
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[0] == "NAME":
            continue
        if fields[1] == "interface":
            current = interfaces.setdefault(fields[0], {})
        elif fields[0].startswith(".") and current is not None:
            name, kind, signature = fields[0][1:], fields[1], fields[2]
            current[name] = (kind, "" if signature == "-" else signature,
                             "" if fields[3] == "-" else fields[3], fields[-1])
    return interfaces


def parse_gdbus(text):
    """``gdbus introspect`` → ``{interface: {"methods": {name: (in, out)}, "signals": {name: sig},
    "properties": {name: (type, access, EmitsChangedSignal)}}}``."""
    interfaces, current, section, pending, annotation = {}, None, None, "", None
    for raw in text.splitlines():
        line = raw.strip()
        match = re.match(r"interface (\S+) \{", line)
        if match:
            current = interfaces.setdefault(match.group(1), {"methods": {}, "signals": {}, "properties": {}})
            continue
        if line in ("methods:", "signals:", "properties:"):
            section = line[:-1]
            continue
        if current is None or section is None or not line or line.startswith("}"):
            continue
        if line.startswith("@"):
            found = re.match(r'@org\.freedesktop\.DBus\.Property\.EmitsChangedSignal\("(\w+)"\)', line)
            annotation = found.group(1) if found else annotation
            continue
        if section == "properties":
            found = re.match(r"(readonly|readwrite|writeonly) (\S+) (\w+)", line)
            if found:
                current["properties"][found.group(3)] = (found.group(2), found.group(1), annotation)
            annotation = None
            continue
        pending += " " + line
        if not pending.rstrip().endswith(");"):
            continue
        found = re.match(r"\s*(\w+)\((.*)\);", pending)
        pending, annotation = "", None
        if not found:
            continue
        name, args = found.group(1), [a.split() for a in found.group(2).split(",") if a.strip()]
        if section == "methods":
            ins = "".join(a[1] for a in args if a[0] == "in")
            outs = "".join(a[1] for a in args if a[0] == "out")
            current["methods"][name] = (ins, outs)
        else:
            current["signals"][name] = "".join(a[0] for a in args)
    return interfaces


def expected_interfaces(path=ROOT_PATH):
    """The object's contract interfaces plus the standard ones (ObjectManager on the root only),
    as ``{iface: {"methods", "signals", "properties"}}``."""
    expected = {name: CONTRACT[name] for name in OBJECT_INTERFACES[path]}
    for name, members in STANDARD.items():
        if name != OBJECT_MANAGER_IFACE or path == ROOT_PATH:
            expected[name] = {"methods": members["methods"], "signals": members["signals"], "properties": {}}
    return expected


@pytest.fixture(params=[ROOT_PATH, PATH_PATH, LOG_CONTROL_PATH], ids=["root", "path", "log-control"])
def introspected(request, plain_lab, daemon):  # pylint: disable=unused-argument
    """An object to introspect; the path object held by a client for the test's duration."""
    if request.param == PATH_PATH:
        holder = plain_lab.client
        assert holder.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
    return request.param


def test_contract_declares_the_root_interfaces():
    """The XML the tests read is the contract the root object serves (a sanity check of the test input)."""
    assert set(CONTRACT) == {iface for ifaces in OBJECT_INTERFACES.values() for iface in ifaces}, sorted(CONTRACT)
    assert "Refresh" in CONTRACT[TARGET_IFACE]["methods"]
    assert "StatusChanged" in CONTRACT[TARGET_IFACE]["signals"]
    assert {"Flags", "Status", "Backend"} <= set(CONTRACT[TARGET_IFACE]["properties"]) | set(
        CONTRACT[MANAGER_IFACE]["properties"])


def test_busctl_introspect_shows_every_member(plain_lab, introspected):
    """``busctl introspect``: every interface, method, signal and property of
    the contract (with its signature and change flag) and the standard
    interfaces."""
    text = run_tool([harness.need_tool("busctl"), f"--address={plain_lab.bus.address}", "--no-pager",
                     "introspect", SERVICE, introspected])
    shown = parse_busctl(text)
    problems = [f"{iface} shown, not expected" for iface in set(shown) - set(expected_interfaces(introspected))]
    for iface, members in expected_interfaces(introspected).items():
        if iface not in shown:
            problems.append(f"interface {iface} missing")
            continue
        for name, (ins, outs) in members["methods"].items():
            got = shown[iface].get(name)
            if got is None or got[0] != "method" or (got[1], got[2]) != (ins, outs):
                problems.append(f"method {iface}.{name}({ins}) -> ({outs}): busctl shows {got}")
        for name, signature in members["signals"].items():
            got = shown[iface].get(name)
            if got is None or got[0] != "signal" or got[1] != signature:
                problems.append(f"signal {iface}.{name}({signature}): busctl shows {got}")
        for name, (ptype, access, emits) in members["properties"].items():
            got = shown[iface].get(name)
            want_flag = {"true": "emits-change", "const": "const", "invalidates": "emits-invalidation",
                         None: "emits-change"}.get(emits, "-")
            if got is None or got[0] != "property" or got[1] != ptype:
                problems.append(f"property {iface}.{name} ({ptype}): busctl shows {got}")
            elif access == "read" and "writable" in got[3]:
                problems.append(f"property {iface}.{name} is read-only in the contract, busctl shows {got[3]}")
            elif access == "readwrite" and "writable" not in got[3]:
                problems.append(f"property {iface}.{name} is writable in the contract, busctl shows {got[3]}")
            elif want_flag not in ([flag for flag in got[3].split(",") if flag != "writable"] or ["-"]):
                problems.append(f"property {iface}.{name}: EmitsChangedSignal={emits} should show {want_flag}, "
                                f"busctl shows {got[3]}")
    assert not problems, "\n".join(problems) + "\n\nbusctl output:\n" + text


def test_gdbus_introspect_shows_every_member(plain_lab, introspected):
    """``gdbus introspect``: the same, with argument directions, property types and read-only access."""
    text = run_tool([harness.need_tool("gdbus"), "introspect", "--address", plain_lab.bus.address,
                     "--dest", SERVICE, "--object-path", introspected])
    shown = parse_gdbus(text)
    problems = [f"{iface} shown, not expected" for iface in set(shown) - set(expected_interfaces(introspected))]
    for iface, members in expected_interfaces(introspected).items():
        got_iface = shown.get(iface)
        if got_iface is None:
            problems.append(f"interface {iface} missing")
            continue
        for name, signature in members["methods"].items():
            if got_iface["methods"].get(name) != signature:
                problems.append(f"method {iface}.{name} {signature}: gdbus shows {got_iface['methods'].get(name)}")
        for name, signature in members["signals"].items():
            if got_iface["signals"].get(name) != signature:
                problems.append(f"signal {iface}.{name}({signature}): gdbus shows {got_iface['signals'].get(name)}")
        for name, (ptype, access, emits) in members["properties"].items():
            want = (ptype, {"read": "readonly", "write": "writeonly", "readwrite": "readwrite"}[access], emits)
            if got_iface["properties"].get(name) != want:
                problems.append(f"property {iface}.{name} {want}: gdbus shows {got_iface['properties'].get(name)}")
        extra = set(got_iface["properties"]) - set(members["properties"])
        if extra:
            problems.append(f"{iface} has properties the contract does not declare: {sorted(extra)}")
    assert not problems, "\n".join(problems) + "\n\ngdbus output:\n" + text


def test_properties_have_the_contract_types(client):
    """GetAll of each interface returns exactly the contract's properties, each with its D-Bus type."""
    assert client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
    for path, iface in ((ROOT_PATH, MANAGER_IFACE), (ROOT_PATH, TARGET_IFACE), (PATH_PATH, PATH_IFACE),
                        (LOG_CONTROL_PATH, LOG_CONTROL_IFACE)):
        typed = client.get_all_typed(SERVICE, path, iface)
        want = {name: ptype for name, (ptype, _, _) in CONTRACT[iface]["properties"].items()}
        got = {name: ptype for name, (ptype, _) in typed.items()}
        assert got == want, f"{iface}: GetAll types {got}, the contract says {want}"


def test_without_networkmanager_the_answer_is_unknown(plain_lab, client):
    """No NetworkManager on the system bus: Backend "none", Status -1, Flags 0,
    and Refresh() gives the same answer; the path object lists nothing and its
    LinkQuality is "unknown"."""
    manager = client.get_all(SERVICE, ROOT_PATH, MANAGER_IFACE)
    assert manager["Backend"] == "none", manager
    assert re.match(r"^\d+\.\d+", manager["Version"]), manager
    target = client.get_all(SERVICE, ROOT_PATH, TARGET_IFACE)
    wrong = {k: target.get(k) for k, v in NO_BACKEND.items() if target.get(k) != v}
    assert not wrong, f"expected {harness.fmt_props(NO_BACKEND)}\ndiffering: {harness.fmt_props(wrong)}"
    assert client.call(SERVICE, ROOT_PATH, TARGET_IFACE, "Refresh") == (0, -1)
    # The path object knows nothing either: no interface, no flag, no link quality.
    assert client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
    path = client.get_all(SERVICE, PATH_PATH, PATH_IFACE)
    assert path == {"Interfaces": [], "Flags": 0, "DnsConfigured": False, "Expensive": False, "Constrained": False,
                    "LinkQuality": "unknown", "Reason": "", "NetworkIdentity": ""}, path
    # The answer is stable: no signal says otherwise after a Refresh.
    recorder = plain_lab.recorder()
    try:
        mark = recorder.mark()
        assert client.call(SERVICE, ROOT_PATH, TARGET_IFACE, "Refresh") == (0, -1)
        client.call(SERVICE, ROOT_PATH, PEER_IFACE, "Ping")  # a round trip after any signal
        harness.pump()
        assert recorder.status_changes(mark) == [], recorder.describe(mark)
    finally:
        recorder.close()


def test_object_manager_lists_only_children(client):
    """GetManagedObjects lists objects below the root only (none are watched yet)."""
    (objects,) = client.call(SERVICE, ROOT_PATH, OBJECT_MANAGER_IFACE, "GetManagedObjects")
    assert all(path.startswith(ROOT_PATH + "/") for path in objects), sorted(objects)


def test_peer(client):
    client.call(SERVICE, ROOT_PATH, PEER_IFACE, "Ping")
    (machine_id,) = client.call(SERVICE, ROOT_PATH, PEER_IFACE, "GetMachineId")
    assert re.fullmatch(r"[0-9a-f]{32}", machine_id), machine_id


def variant(type_string, value):
    """A GLib.Variant built when the call is made (gi may be missing at collection time)."""
    return lambda: harness.GLib.Variant(type_string, value)


def arguments(args):
    return tuple(a() if callable(a) else a for a in args)


# (description, (path, interface, method, signature, args), expected D-Bus error)
BAD_CALLS = [
    ("Set of a read-only Target property",
     (ROOT_PATH, PROPERTIES_IFACE, "Set", "ssv", (TARGET_IFACE, "Flags", variant("u", 5))),
     "PropertyReadOnly"),
    ("Set of a read-only Manager property",
     (ROOT_PATH, PROPERTIES_IFACE, "Set", "ssv", (MANAGER_IFACE, "Backend", variant("s", "x"))),
     "PropertyReadOnly"),
    ("Set of the read-only SyslogIdentifier",
     (LOG_CONTROL_PATH, PROPERTIES_IFACE, "Set", "ssv", (LOG_CONTROL_IFACE, "SyslogIdentifier", variant("s", "x"))),
     "PropertyReadOnly"),
    ("Set of LogLevel to a level that does not exist",
     (LOG_CONTROL_PATH, PROPERTIES_IFACE, "Set", "ssv", (LOG_CONTROL_IFACE, "LogLevel", variant("s", "loud"))),
     "InvalidArgs"),
    ("Set of LogLevel with a number",
     (LOG_CONTROL_PATH, PROPERTIES_IFACE, "Set", "ssv", (LOG_CONTROL_IFACE, "LogLevel", variant("u", 7))),
     "InvalidArgs"),
    ("Set of LogTarget to a target that does not exist",
     (LOG_CONTROL_PATH, PROPERTIES_IFACE, "Set", "ssv", (LOG_CONTROL_IFACE, "LogTarget", variant("s", "printer"))),
     "InvalidArgs"),
    ("Get of an unknown property",
     (ROOT_PATH, PROPERTIES_IFACE, "Get", "ss", (TARGET_IFACE, "NoSuchProperty")), "UnknownProperty"),
    ("Set of an unknown property",
     (ROOT_PATH, PROPERTIES_IFACE, "Set", "ssv", (TARGET_IFACE, "NoSuchProperty", variant("s", ""))),
     "UnknownProperty"),
    ("Get on an unknown interface",
     (ROOT_PATH, PROPERTIES_IFACE, "Get", "ss", (UNKNOWN_IFACE, "Flags")), "UnknownInterface"),
    ("GetAll of an unknown interface",
     (ROOT_PATH, PROPERTIES_IFACE, "GetAll", "s", (UNKNOWN_IFACE,)), "UnknownInterface"),
    ("a method of an unknown interface",
     (ROOT_PATH, UNKNOWN_IFACE, "Refresh", "", ()), "UnknownInterface"),
    ("an unknown method of the Target interface",
     (ROOT_PATH, TARGET_IFACE, "NoSuchMethod", "", ()), "UnknownMethod"),
    ("an unknown method of the Properties interface",
     (ROOT_PATH, PROPERTIES_IFACE, "NoSuchMethod", "", ()), "UnknownMethod"),
    ("a method on an unknown object path",
     (UNKNOWN_PATH, TARGET_IFACE, "Refresh", "", ()), "UnknownObject"),
    ("Get on an unknown object path",
     (UNKNOWN_PATH, PROPERTIES_IFACE, "Get", "ss", (TARGET_IFACE, "Flags")), "UnknownObject"),
    ("Get with one int argument",
     (ROOT_PATH, PROPERTIES_IFACE, "Get", "i", (1,)), "InvalidArgs"),
    ("GetAll without an argument",
     (ROOT_PATH, PROPERTIES_IFACE, "GetAll", "", ()), "InvalidArgs"),
    ("Refresh with an argument",
     (ROOT_PATH, TARGET_IFACE, "Refresh", "s", ("now",)), "InvalidArgs"),
    ("WatchAddressPair with one argument",
     (ROOT_PATH, MANAGER_IFACE, "WatchAddressPair", "s", ("192.0.2.10",)), "InvalidArgs"),
]


def still_answers(client, daemon):
    assert daemon.running, f"the daemon exited (status {daemon.returncode})"
    client.call(SERVICE, ROOT_PATH, PEER_IFACE, "Ping")
    assert client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Kind") == "internet"


@pytest.mark.parametrize("description, call, error", BAD_CALLS, ids=[c[0] for c in BAD_CALLS])
def test_bad_input_gets_the_standard_error(client, daemon, description, call, error):
    """Each wrong call gets its standard org.freedesktop.DBus.Error, with a message, and harms nothing."""
    path, iface, method, signature, args = call
    failure = client.call_error(SERVICE, path, iface, method, signature, arguments(args))
    assert failure is not None, f"{description}: the call succeeded"
    assert failure.name == "org.freedesktop.DBus.Error." + error, f"{description}: got {failure}"
    assert failure.message.strip(), f"{description}: {failure.name} without a message"
    still_answers(client, daemon)


def test_daemon_survives_all_bad_input(client, daemon):
    """All the wrong calls in a row; the daemon still answers Ping and Get afterwards."""
    for description, call, error in BAD_CALLS:
        path, iface, method, signature, args = call
        failure = client.call_error(SERVICE, path, iface, method, signature, arguments(args))
        assert failure is not None and failure.name.endswith("." + error), f"{description}: {failure}"
    still_answers(client, daemon)
    assert client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Flags") == 0


def test_second_instance_refuses_to_start(plain_lab, daemon):  # pylint: disable=unused-argument
    """Without --replace a second daemon exits non-zero with a message, and the first keeps the name."""
    owner = plain_lab.client.name_owner(SERVICE)
    second = plain_lab.daemon(start=False, name="second")
    second.start(wait=False)
    try:
        second.process.popen.wait(harness.START_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail("a second reachabilityd kept running while the name was taken:\n" + second.log_text())
    assert second.returncode != 0, second.log_text()
    log = second.log_text().split("\n", 1)[1]  # past the harness's "starting" line
    assert log.strip(), "the second instance exited without saying why"
    assert plain_lab.client.name_owner(SERVICE) == owner
    still_answers(plain_lab.client, daemon)


def test_replace_takes_the_name_over(plain_lab, daemon):
    """``--replace``: a second daemon takes the name over and the first one exits cleanly."""
    first_owner = plain_lab.client.name_owner(SERVICE)
    second = plain_lab.daemon(start=False, name="replacement", args=["--system", "--replace", "--verbose"])
    second.start(wait=False)
    harness.wait_until(lambda: plain_lab.client.name_owner(SERVICE) not in (None, first_owner) or not second.running,
                       harness.START_TIMEOUT, "the replacement to own the name",
                       lambda: f"replacement log:\n{second.log_text()}", poll=0.05)
    assert second.running, f"the replacement exited ({second.returncode}):\n{second.log_text()}"
    try:
        daemon.process.popen.wait(harness.STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail("the replaced daemon kept running after losing the name:\n" + daemon.log_text())
    assert daemon.returncode == 0, daemon.log_text()
    assert plain_lab.client.get(SERVICE, ROOT_PATH, TARGET_IFACE, "Kind") == "internet"


def test_sigterm_exits_cleanly_and_releases_the_name(plain_lab, daemon):
    """SIGTERM: exit status 0, promptly, and the bus name is gone."""
    status = daemon.stop(timeout=harness.STOP_TIMEOUT)
    assert status == 0, f"exit status {status} after SIGTERM:\n{daemon.log_text()}"
    assert plain_lab.client.name_owner(SERVICE) is None
