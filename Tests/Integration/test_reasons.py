"""Reason: one word for why the internet is not reachable, from a real cause in the kernel lab.

The kernel lab of test_kernel_backend.py (namespace A, ``--backend kernel``, reachable through
``kveth0``). Each case makes one real kernel change with ``ip`` and expects the internet target's
``Reason``, a sentence in ``Error``, the Path object's ``Reason``, and ``reachctl`` (run in A
against the lab's bus) showing the word in ``--json`` and in its text. Reachable again: every
reason is empty. ``lookup-failed`` and ``portal`` are checked where their causes live
(test_targets.py's NXDOMAIN, test_internet_nm.py's portal); ``link-down`` cannot come from the
kernel (it flushes a link's routes when the link goes down) and ``connecting``/``needs-auth``
need NetworkManager activating: the engine's unit tests cover them.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

import harness
from harness import MANAGER_IFACE, ROOT_PATH, SERVICE, TARGET_IFACE
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4, KERNEL_CONNECTED, KERNEL_OFFLINE, UPLINK, UPLINK_METRIC, UPLINK_PEER, UPLINK_V4,
    kernel_lab_without_carrier, online)

PATH_PATH = ROOT_PATH + "/path"
PATH_IFACE = SERVICE + ".Path"
BIN = harness.daemon_binary().parent


def no_route(lab):
    lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)


def rejected(kind):
    def make(lab):
        lab.ip_a("route", "replace", kind, "default")
    return make


def no_carrier(lab):
    lab.set_peer(UPLINK_PEER, False)


def no_source_address(lab):
    lab.ip_a("addr", "del", f"{UPLINK_V4}/24", "dev", UPLINK)
    lab.ip_a("route", "add", "default", "dev", UPLINK)


def no_underlay(lab):
    lab.add_vpn_tun()
    lab.ip_a("route", "del", "default", "via", GATEWAY_V4, "dev", UPLINK)


CASES = [
    ("no-route", no_route, "no route"),
    ("rejected", rejected("unreachable"), "unreachable"),
    ("rejected", rejected("prohibit"), "prohibit"),
    ("rejected", rejected("blackhole"), "blackhole"),
    ("no-carrier", no_carrier, f"no carrier on {UPLINK}"),
    ("no-source-address", no_source_address, UPLINK),
    ("no-underlay", no_underlay, "tun0"),
]


def reachctl(lab, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
    env.pop("DBUS_SESSION_BUS_ADDRESS", None)
    argv = harness.Namespaces.exec_argv(lab.ns_a) + [str(BIN / "reachctl"), "--daemon", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=harness.START_TIMEOUT, env=env, check=False)


@pytest.mark.parametrize("reason, cause, words", CASES, ids=[f"{c[0]}-{c[2].split()[0]}" for c in CASES])
def test_reason_from_a_real_cause(online, reason, cause, words):
    lab, recorder = online.lab, online.recorder
    assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
    assert lab.client.get(SERVICE, PATH_PATH, PATH_IFACE, "Reason") == ""
    mark = recorder.mark()
    cause(lab)
    props = recorder.wait_props(dict(KERNEL_OFFLINE, Reason=reason), f"Reason {reason}", mark=mark)
    assert words in props["Error"], harness.fmt_props(props)
    online.sync()
    assert lab.client.get(SERVICE, PATH_PATH, PATH_IFACE, "Reason") == reason

    flags, status, details = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", ("",))
    assert (flags, status, details["reason"]) == (0, 0, reason), details

    shown = reachctl(lab, "--json")
    assert shown.returncode == 1, shown.stderr
    record = json.loads(shown.stdout.splitlines()[0])
    assert (record["reason"], record["reachable"]) == (reason, False), record
    text = reachctl(lab).stdout
    assert f"({reason})" in text and "Reason:" in text, text


def test_reachable_has_no_reason(online):
    lab = online.lab
    props = lab.client.get_all(SERVICE, ROOT_PATH, TARGET_IFACE)
    assert (props["Reason"], props["Error"]) == ("", ""), harness.fmt_props(props)
    record = json.loads(reachctl(lab, "--json").stdout.splitlines()[0])
    assert record["reason"] == "" and record["reachable"], record


def test_notice_once_per_change(online):
    """kveth0 loses carrier and gets it back, twice, with Refresh() calls in between that change
    nothing: the log has exactly one notice line per change of the internet's answer, naming the
    link and the cause, and one per change of the path object."""
    lab, recorder = online.lab, online.recorder
    assert lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchPath") == (PATH_PATH,)
    online.sync()
    start = len(online.daemon.log_text())
    for _ in range(2):
        mark = recorder.mark()
        lab.set_peer(UPLINK_PEER, False)
        recorder.wait_answer(dict(KERNEL_OFFLINE, Reason="no-carrier"), "no carrier", mark=mark)
        online.sync()
        lab.set_peer(UPLINK_PEER, True)
        recorder.wait_answer(KERNEL_CONNECTED, "carrier back", mark=mark)
        online.sync()
    log = online.daemon.log_text()[start:]
    down = f"<5>internet: not reachable (no carrier on {UPLINK})"
    up = f"<5>internet: reachable via {UPLINK}"
    assert log.count(down) == 2 and log.count(up) == 2, log
    assert log.count("<5>internet: ") == log.count(down) + log.count(up), log
    assert log.count("<5>path: no usable interface (no-carrier)") == 2, log
    assert log.count(f"<5>path: usable: {UPLINK} (IPv4)") == 2, log
    # The debug line of the evaluation names the target and the cause.
    assert "announced 1 changes in" in log and f"; internet: not reachable (no carrier on {UPLINK})" in log, log


def test_a_link_local_address_without_its_link_is_not_reachable(online):
    """fe80::1 without a scope: the kernel shows a route to it (fe80::/64 on the uplink), but no
    socket can connect to it (``EINVAL``: which link?), so Query says not reachable, no-route,
    with the scoped spelling in its sentence; with its link (``fe80::1%kveth0``) it is evaluated
    through that link. Once it was reported reachable through an interface."""
    lab = online.lab
    route = subprocess.run(harness.Namespaces.exec_argv(lab.ns_a) + ["ip", "-6", "route", "get", "fe80::1"],
                           capture_output=True, text=True, check=False)
    assert route.returncode == 0 and "dev" in route.stdout, f"the kernel's route to fe80::1: {route}"
    flags, status, details = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", ("fe80::1",))
    assert (flags, status, details["reason"]) == (0, 0, "no-route"), details
    assert "fe80::1%INTERFACE" in details["error"], details
    flags, status, details = lab.client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", (f"fe80::1%{UPLINK}",))
    assert "fe80::1%INTERFACE" not in details.get("error", ""), details
