"""Sleep (docs/design.md, "Sleep"): the daemon follows logind's ``PrepareForSleep`` on the system bus;
on resume it reads everything again before it answers — links, addresses, routes, neighbours,
and every held name looked up again — and raises ``Path.Invalidated("resumed")``.

The lab of ``tenants.py`` (kernel backend), with a stand-in logind on the lab's bus
(python-dbusmock's ``logind`` template: there is no real logind on a private bus), which the
test makes emit ``PrepareForSleep(true)`` and ``(false)``. Across the "sleep" a held name's DNS
answer moves (its TTL is an hour, so nothing else would look it up again soon): after the
resume the name follows at once. What changes while asleep (another name server) is not
told on its own: the resume is one ``Invalidated("resumed")``. A ``PrepareForSleep`` from
anybody but logind's owner changes nothing.
"""

import os
import subprocess
import sys

import pytest

import conftest
import harness
import tenants
from harness import IS_DIRECT, REACHABLE, SERVICE
from tenants import FAST_ZONE
from test_name_lookups import watch
from test_network_identity import PATH_IFACE, invalidations, watch_path

LOGIND = "org.freedesktop.login1"
LOGIND_PATH = "/org/freedesktop/login1"
LOGIND_MANAGER = "org.freedesktop.login1.Manager"
# The stand-in may own logind's name on the lab's bus, and root may call it.
LOGIND_POLICY = f"""  <policy user="root">
    <allow own="{LOGIND}"/>
    <allow send_destination="{LOGIND}"/>
  </policy>
"""


@pytest.fixture
def sleep_lab(request):
    conftest.require(networkmanager=False)
    try:
        import dbusmock  # noqa: F401 pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        message = f"needs python3-dbusmock for {sys.executable}"
        if conftest.CI:
            pytest.fail(message + " (CI is set)", pytrace=False)
        pytest.skip(message)
    lab = tenants.TenantLab()
    lab.bus.extra_config += LOGIND_POLICY
    conftest._lab(request, lab)  # pylint: disable=protected-access
    return lab


class Logind:
    """python-dbusmock's logind on the lab's bus (its own process, stopped by PID)."""

    def __init__(self, lab):
        self.lab = lab
        env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
        self.log = lab.directory / "logind.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(  # pylint: disable=consider-using-with
                [sys.executable, "-m", "dbusmock", "--system", "--template", "logind"],
                stdout=out, stderr=subprocess.STDOUT, env=env)
        lab.client.wait_for_name(LOGIND)

    def prepare_for_sleep(self, start: bool) -> None:
        self.lab.client.call(LOGIND, LOGIND_PATH, "org.freedesktop.DBus.Mock", "EmitSignal", "sssav",
                             (LOGIND_MANAGER, "PrepareForSleep", "b", [harness.GLib.Variant("b", start)]))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(5)


def test_after_a_resume_everything_is_read_again(sleep_lab):
    lab = sleep_lab
    name = "sleepy." + FAST_ZONE
    lab.namespaces.ip(lab.netns, "route", "add", "unreachable", "198.51.100.0/24")
    lab.dns.records = {name: ("192.0.2.10", 3600)}
    logind = Logind(lab)
    try:
        daemon = lab.start_daemon()
        held = watch(lab, name)
        held.wait_status(2, REACHABLE | IS_DIRECT, f"{name} at 192.0.2.10")
        path = watch_path(lab)
        mark = path.mark()

        # Asleep, the network moved under us: its answer is another now.
        logind.prepare_for_sleep(True)
        harness.wait_until(lambda: "going to sleep" in daemon.log_text(), harness.CHANGE_TIMEOUT,
                           "the daemon heard PrepareForSleep(true)", poll=0.05)
        # The network changes while asleep (another name server: dns-changed any other time): part
        # of the sleep, told with it. (Its evaluation looks the held name up again: before its
        # answer moves, so that the move is followed at the resume.)
        evaluated = daemon.log_text().count("path evaluated in ")
        looked_up = daemon.log_text().count("all lookups done")
        lab.resolver.write_text("# written by the test\nnameserver 127.0.0.1\nnameserver 192.0.2.53\n")
        harness.wait_until(lambda: daemon.log_text().count("path evaluated in ") > evaluated
                           and daemon.log_text().count("all lookups done") > looked_up, harness.CHANGE_TIMEOUT,
                           "the path evaluated and the name looked up again after the name servers changed",
                           daemon.log_text, poll=0.05)
        lab.dns.records = {name: ("198.51.100.7", 3600)}

        # A resume from anybody but logind is nothing; logind's is everything read again.
        asked = lab.dns.count(name_contains=name)
        lab.client.conn.emit_signal(None, LOGIND_PATH, LOGIND_MANAGER, "PrepareForSleep",
                                    harness.GLib.Variant("(b)", (False,)))
        logind.prepare_for_sleep(True)  # after the spoof, on the same way in: a barrier
        harness.wait_until(lambda: daemon.log_text().count("going to sleep") == 2, harness.CHANGE_TIMEOUT,
                           "the second PrepareForSleep(true)", poll=0.05)
        assert "resumed from sleep" not in daemon.log_text(), "a spoofed PrepareForSleep was believed"
        assert lab.dns.count(name_contains=name) == asked, "a spoofed resume looked names up"

        assert invalidations(path, mark) == [], path.history(mark)

        logind.prepare_for_sleep(False)
        held.wait_props({"Addresses": ["198.51.100.7"], "Status": 0}, f"{name} follows its new answer on resume")
        assert "resumed from sleep (logind); evaluating everything again" in daemon.log_text()
        # Told once, although the internet's flags did not change.
        harness.wait_until(lambda: invalidations(path, mark), harness.CHANGE_TIMEOUT, "Invalidated(resumed)",
                           lambda: path.history(mark))
        assert invalidations(path, mark) == ["resumed"], path.history(mark)
        assert path.state[PATH_IFACE]["Flags"] & REACHABLE
    finally:
        logind.stop()
