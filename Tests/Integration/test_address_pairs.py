"""Address pairs (Manager.WatchAddressPair, Apple's SCNetworkReachabilityCreateWithAddressPair).

The kernel lab of test_kernel_backend.py (namespace A with ``kveth0`` on
192.0.2.0/24, default route via 192.0.2.1, the daemon with ``--backend
kernel``) and its second uplink ``kveth1`` (198.51.100.10/24), made into a
multi-homed host as cloud images are: a source rule sends packets from
kveth1's address to table 102, whose default route goes through kveth1.
Every answer is compared with ``ip route get REMOTE from LOCAL`` (the
kernel's own lookup), and every change is checked to be announced by exactly
one StatusChanged on the pair's object (none when only the Interface moves).
reachctl's ``query --from`` is checked against the same kernel answers.
"""

from __future__ import annotations

import json
import subprocess

import harness
from harness import IS_DIRECT, IS_LOCAL_ADDRESS, MANAGER_IFACE, REACHABLE, ROOT_PATH, SERVICE, TARGET_IFACE
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4, SECOND, SECOND_GATEWAY_V4, SECOND_PEER, SECOND_V4, UPLINK, UPLINK_V4, kernel_lab_without_carrier,
    online)
from test_kernel_paths import second_uplink

REMOTE = "203.0.113.7"
SOURCE_TABLE = "102"
ELSEWHERE = "192.0.2.99"  # on kveth0's network, but not this host's
LOCAL = REACHABLE | IS_LOCAL_ADDRESS | IS_DIRECT


def escape(text: str) -> str:
    """systemd's bus_label_escape, as the contract gives it."""
    return "".join(chr(b) if chr(b).isascii() and (chr(b).isalpha() or (chr(b).isdigit() and i)) else f"_{b:02x}"
                   for i, b in enumerate(text.encode())) or "_"


def kernel_interface(lab, remote: str, local: str) -> str:
    """The outgoing interface ``ip route get REMOTE from LOCAL`` gives ("" when the kernel has no route)."""
    answer = lab.ip_a("route", "get", remote, "from", local, check=False)
    words = (answer.stdout + answer.stderr).split()
    return words[words.index("dev") + 1] if answer.returncode == 0 and "dev" in words else ""


def watch_pair(lab, local: str, remote: str):
    path = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddressPair", "ss", (local, remote))[0]
    recorder = lab.recorder(path)
    recorder.sync(interfaces=(TARGET_IFACE,))
    return path, recorder


def multihomed(lab) -> None:
    second_uplink(lab)
    lab.ip_a("route", "add", "default", "via", SECOND_GATEWAY_V4, "dev", SECOND, "table", SOURCE_TABLE)
    lab.ip_a("rule", "add", "pref", "102", "from", SECOND_V4, "lookup", SOURCE_TABLE)


def test_pairs_follow_the_kernels_lookup_from_the_local_address(online):
    """From kveth1's address: kveth1 (its own table); from kveth0's address, and with no local
    address: kveth0 (main); from an address that is not this host's: no route. Deterministic
    paths, Kind "pair", Name "LOCAL,REMOTE". Table 102's route removed: the packet from kveth1's
    address falls through to main -- kveth0, Flags unchanged, no StatusChanged."""
    lab = online.lab
    multihomed(lab)
    cases = [(SECOND_V4, REMOTE), (UPLINK_V4, REMOTE), ("", REMOTE), (ELSEWHERE, REMOTE)]
    recorders = {}
    try:
        for local, remote in cases:
            path, recorder = watch_pair(lab, local, remote)
            name = f"{local},{remote}"
            assert path == f"{ROOT_PATH}/pair/{escape(name)}", path
            recorders[(local, remote)] = recorder
            props = recorder.props
            assert (props["Kind"], props["Name"]) == ("pair", name), props
            expected = kernel_interface(lab, remote, local or UPLINK_V4) if local != ELSEWHERE else ""
            assert props["Interface"] == expected, (name, recorder.describe())
            assert props["Flags"] == (REACHABLE if expected else 0), (name, recorder.describe())
        assert recorders[(SECOND_V4, REMOTE)].props["Interface"] == SECOND
        assert recorders[(UPLINK_V4, REMOTE)].props["Interface"] == UPLINK
        assert "RTNETLINK" in lab.ip_a("route", "get", REMOTE, "from", ELSEWHERE, check=False).stderr

        again = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddressPair", "ss", (SECOND_V4, REMOTE))[0]
        assert again == f"{ROOT_PATH}/pair/{escape(SECOND_V4 + ',' + REMOTE)}", "one pair, one object"

        moved = recorders[(SECOND_V4, REMOTE)]
        mark = moved.mark()
        lab.ip_a("route", "del", "default", "table", SOURCE_TABLE)
        moved.wait_props({"Interface": UPLINK, "Flags": REACHABLE}, "main's route once table 102 has none", mark=mark)
        assert kernel_interface(lab, REMOTE, SECOND_V4) == UPLINK
        moved.barrier()
        assert moved.status_changes(mark) == [], moved.describe(mark)
        moved.assert_announced(mark)
    finally:
        for recorder in recorders.values():
            recorder.close()


def test_a_local_address_alone(online):
    """Only a local address: reachable, local, direct while it is configured on a link that can carry
    packets, on that link. kveth1 loses carrier: not reachable; back: reachable. The address removed:
    not reachable. One StatusChanged per change."""
    lab = online.lab
    multihomed(lab)
    path, recorder = watch_pair(lab, SECOND_V4, "")
    try:
        assert path == f"{ROOT_PATH}/pair/{escape(SECOND_V4 + ',')}"
        assert (recorder.props["Flags"], recorder.props["Interface"]) == (LOCAL, SECOND), recorder.describe()
        mark = recorder.mark()
        lab.set_peer(SECOND_PEER, False)
        recorder.wait_props({"Flags": 0, "Interface": ""}, "not reachable without carrier", mark=mark)
        lab.set_peer(SECOND_PEER, True)
        recorder.wait_props({"Flags": LOCAL, "Interface": SECOND}, "reachable with carrier back", mark=mark)
        lab.ip_a("addr", "del", f"{SECOND_V4}/24", "dev", SECOND)
        recorder.wait_props({"Flags": 0, "Interface": ""}, "not reachable once the address is gone", mark=mark)
        recorder.barrier()
        assert recorder.status_changes(mark) == [(0, 0), (2, LOCAL), (0, 0)], recorder.describe(mark)
        recorder.assert_announced(mark)
    finally:
        recorder.close()


def test_bad_pairs_are_named_errors(online):
    """Both sides empty, two families, a name where an address goes: InvalidTarget, with a message
    that says which; a pair released is gone (UnknownTarget when released again)."""
    lab = online.lab
    for local, remote, words in (("", "", "needs a local or a remote address"),
                                 ("192.0.2.10", "2001:db8::1", "not of one family"),
                                 ("example.test", "", "local address")):
        error = lab.client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddressPair", "ss", (local, remote))
        assert error is not None and error.name == SERVICE + ".Error.InvalidTarget", error
        assert words in error.message, error.message
    path = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchAddressPair", "ss", (UPLINK_V4, REMOTE))[0]
    lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (path,))
    error = lab.client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (path,))
    assert error is not None and error.name == SERVICE + ".Error.UnknownTarget", error


def test_reachctl_query_from(online):
    """``reachctl query --from LOCAL REMOTE`` in the namespace, through the daemon and in-process:
    the kernel's interface for packets from LOCAL; ``--from LOCAL`` alone: the local answer."""
    lab = online.lab
    multihomed(lab)
    binary = harness.daemon_binary().parent / "reachctl"
    env = {"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": lab.bus.address}
    for mode in ("--daemon", "--no-daemon"):
        for local, remote, interface, flags in ((SECOND_V4, REMOTE, SECOND, REACHABLE),
                                                (UPLINK_V4, REMOTE, UPLINK, REACHABLE),
                                                (SECOND_V4, None, SECOND, LOCAL)):
            argv = harness.Namespaces.exec_argv(lab.ns_a) + [str(binary), "query", "--json", mode, "--from", local]
            answer = subprocess.run(argv + ([remote] if remote else []), capture_output=True, text=True,
                                    timeout=harness.START_TIMEOUT, env=env, check=False)
            assert answer.returncode == 0, (mode, local, remote, answer.stdout, answer.stderr)
            record = json.loads(answer.stdout.splitlines()[-1])
            assert (record["kind"], record["interface"], record["flags"]) == ("pair", interface, flags), record
        assert kernel_interface(lab, REMOTE, SECOND_V4) == SECOND
