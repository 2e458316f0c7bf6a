"""reachabilityd as a distribution ships and runs it: the Debian package,
installed in a container booted with a real systemd (``container.py``), on
dbus-daemon and on dbus-broker as the system bus.

* The packages: built once per run from the source package, offline
  (``packages.py``; ``$REACH_TEST_DEB`` names a ready .deb instead), lintian
  without errors (its output is kept in ``.build/deb/source/lintian.txt``).
* Installed with ``dpkg -i``: nothing enabled, the first call starts the
  service, the man pages are there, ``systemd-analyze security`` at most 1.5
  and ``verify`` clean; ``dpkg -r`` leaves no activatable name and
  ``--purge`` no file.
* The source package (Swift dependencies vendored) builds with
  ``dpkg-buildpackage`` under ``unshare -n``, from vendor/ only and with no
  SwiftPM identity warning; apt's plan for the .deb on a machine without
  NetworkManager holds no NetworkManager.
* Metrics: a unit with ``SupplementaryGroups=adm`` reads them; the shipped
  writer unit writes its file and removes it when it stops; it says
  ``reachability_up 0`` once the daemon is stopped; its restarts are bounded
  and its heartbeat logs nothing.
* Upgrades: installed over itself, the enabled writer and the daemon run
  again, systemd has reloaded, no bus logged an unknown user.
* The service's life (issue "every client holds the current truth"): the
  first call after every stop gets the evaluated answer; ``systemctl stop``
  under a running ``reachctl watch`` and a library listener; ``SIGHUP`` and
  ``systemctl reload``.
* ``reachctl doctor``: the failed service's own words, within 5 s.
* GLib's network monitor: the daemon's package alone changes nothing; the GIO
  module's package (reachabilityd-gio-module), listed in GIO's cache by
  libglib2.0-0's trigger, is what a GLib program that knows nothing of us
  gets with no environment variable; masked, GLib's own monitor; the module's
  package removed, the cache forgets it.
* The package reinstalled, then removed and installed again, under the README's applet and a
  ``reachctl watch``: the applet shows the new daemon's announcement (within 2 s of the
  reinstall; within the clients' 30 s cap after remove and install).
* The units that follow the network, the announcement and the clients that never give up,
  under a real systemd with the build under test: test_systemd_units.py.

The container has only ``lo``; :func:`add_uplink` makes a veth pair inside
with an address and a default route, so that the internet is reachable
(Status 2). Needs root, systemd-container, util-linux, dpkg-dev, debhelper,
lintian and Swift on PATH (to build the package), and network access once
to fetch dbus-broker with ``apt-get download`` and the Swift dependencies.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import container as ct
import harness
import packages
from conftest import need, require

REPO = harness.REPO
SERVICE = harness.SERVICE
OUT = packages.OUT
BUSES = ["dbus-daemon", "dbus-broker"]
LIBRARY_PACKAGES = packages.LIBRARY_PACKAGES
GIO_PACKAGE = packages.GIO_PACKAGE





def boot(request, bus: str, broker_deb_path: Path | None) -> ct.Container:
    """A booted container with ``bus`` as its system bus, closed when the test ends."""
    need(ct.requirements())
    box = ct.Container(binds=[REPO])
    request.addfinalizer(box.close)
    labs = getattr(request.node, "reach_labs", None)
    if labs is None:
        labs = request.node.reach_labs = []
    labs.append(box)
    box.start()
    if bus == "dbus-broker":
        assert broker_deb_path is not None
        box.run(["dpkg", "-i", str(broker_deb_path)], timeout=120)
        box.reboot()
    elif "dbus-daemon" not in box.run(["systemctl", "show", "-P", "ExecStart", "dbus.service"]).stdout:
        # This machine's own bus is dbus-broker (its package makes dbus.service an alias of
        # dbus-broker.service), and the container boots over its root: the alias goes, in the
        # container's overlay only, and dbus.service is dbus-daemon's again.
        box.run(["rm", "-f", "/etc/systemd/system/dbus.service"])
        box.reboot()
    assert bus in box.run(["systemctl", "show", "-P", "ExecStart", "dbus.service"]).stdout
    return box


def install_deb(box: ct.Container, package: Path) -> None:
    box.run(["dpkg", "-i", str(package)], timeout=120)


# The gateway of the container's uplink: nothing answers for it on the far end, so its neighbour
# entry is the test's (permanent); the service would otherwise find it dead (gateway-unreachable).
GATEWAY_NEIGHBOUR = "ip neigh replace 192.0.2.1 lladdr 02:00:5e:00:53:01 dev up0 nud permanent"


def add_uplink(box: ct.Container) -> None:
    """A veth pair inside the container, an address on one end and a default route
    through the other (its gateway's neighbour entry permanent): the internet target's answer
    is Status 2. NetworkManager, when the container runs it (bus activation can start it),
    leaves the pair alone: it would otherwise activate its default connection on up0, waiting
    for DHCP for good, and the answer would be "connecting" (ConnectionRequired) instead."""
    box.sh("mkdir -p /etc/NetworkManager/conf.d && printf '[keyfile]\\nunmanaged-devices="
           "interface-name:up0;interface-name:up1\\n' > /etc/NetworkManager/conf.d/90-test-uplink.conf; "
           "if systemctl -q is-active NetworkManager.service; then nmcli general reload conf; fi; "
           "ip link add up0 type veth peer name up1; ip link set up1 up; ip link set up0 up; "
           "ip addr add 192.0.2.10/24 dev up0; ip route add default via 192.0.2.1 dev up0 onlink; "
           + GATEWAY_NEIGHBOUR)


def reachctl_json(box: ct.Container, *arguments: str, user: str | None = None) -> tuple:
    done = box.run(["reachctl", "--daemon", "--json", *arguments], check=False, user=user, timeout=30)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return done, lines


def unit_property(box: ct.Container, unit: str, name: str) -> str:
    return box.run(["systemctl", "show", "-P", name, unit]).stdout.strip()


def run_journal(box: ct.Container, unit: str) -> str:
    """The journal of the unit's latest run only (its InvocationID), as plain text."""
    invocation = unit_property(box, unit, "InvocationID")
    return box.run(["journalctl", "-b", "--no-pager", "-o", "cat", "_SYSTEMD_INVOCATION_ID=" + invocation]).stdout


class Lines:
    """A process's standard output read line by line with a deadline (no sleeps)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.seen: list = []
        self._buffer = b""

    def wait_for(self, predicate, what: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            while b"\n" in self._buffer:
                line, self._buffer = self._buffer.split(b"\n", 1)
                text = line.decode(errors="replace")
                self.seen.append(text)
                if predicate(text):
                    return text
            left = deadline - time.monotonic()
            if left <= 0:
                raise harness.WaitTimeout(f"{what}: not within {timeout} s; its lines: {self.seen[-20:]}")
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if ready:
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:
                    raise harness.WaitTimeout(f"{what}: the process ended ({self.process.poll()}); "
                                              f"its lines: {self.seen[-20:]}")
                self._buffer += chunk


# --- the package -------------------------------------------------------------------


def test_lintian_reports_no_error(deb):  # pylint: disable=redefined-outer-name,unused-argument
    if os.environ.get("REACH_TEST_DEB"):
        pytest.skip("REACH_TEST_DEB names a package built elsewhere: lintian ran there")
    report = packages.built().lintian
    errors = [line for line in report.splitlines() if line.startswith("E:")]
    assert not errors, "lintian errors:\n" + report
    # Every override in debian/ says why (a comment right above it).
    for overrides in (REPO / "debian").glob("*lintian-overrides"):
        lines = overrides.read_text().splitlines()
        for index, line in enumerate(lines):
            if line.strip() and not line.startswith("#"):
                assert index > 0 and lines[index - 1].startswith("#"), f"{overrides.name}: {line} has no reason"


@pytest.mark.parametrize("bus", BUSES)
def test_package_installs_is_activated_and_removes_cleanly(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)
    add_uplink(box)
    # Installed, not enabled, not started: the bus starts it.
    enabled = box.run(["systemctl", "is-enabled", "reachabilityd.service"], check=False).stdout.strip()
    assert enabled != "enabled", enabled
    assert enabled == "static", f"reachabilityd.service is {enabled!r}, expected static (no [Install])"
    assert unit_property(box, "reachabilityd.service", "ActiveState") == "inactive"
    assert box.run(["getent", "passwd", "reachabilityd"]).stdout.startswith("reachabilityd:")
    # The first call starts it, through the bus and systemd.
    done, answers = reachctl_json(box, "status")
    assert done.returncode in (0, 1) and answers, f"reachctl: {done.returncode}\n{done.stdout}{done.stderr}"
    assert unit_property(box, "reachabilityd.service", "ActiveState") == "active"
    assert unit_property(box, "reachabilityd.service", "MainPID") != "0"
    # Documents where readers look.
    for page in ("reachabilityd", SERVICE, "reachctl"):
        where = box.run(["man", "-w", page], check=False)
        assert where.returncode == 0, f"man {page}: {where.stderr}"
    assert box.path(f"/usr/share/dbus-1/interfaces/{SERVICE}.xml").is_file()
    assert box.path("/usr/share/bash-completion/completions/reachctl").is_file()
    # The documents and the alert rules the writer's unit points to.
    doc = "/usr/share/doc/reachabilityd"
    for name in ("README.md", "install.md", "metrics.md", "copyright", "examples/reachabilityd.rules.yml"):
        assert box.path(f"{doc}/{name}").is_file() or box.path(f"{doc}/{name}.gz").is_file(), f"{doc}/{name}"
    # The unit as installed: verify clean (its Documentation= pages exist), and the exposure.
    verify = box.run(["systemd-analyze", "verify", "reachabilityd.service"], check=False)
    assert verify.returncode == 0 and not verify.stderr.strip(), verify.stderr
    security = box.run(["systemd-analyze", "security", "--no-pager", "reachabilityd.service"]).stdout
    exposure = float(re.search(r"Overall exposure level for reachabilityd.service: ([0-9.]+)", security)[1])
    (OUT / f"security-{bus}.txt").write_text(security)
    assert exposure <= 1.5, security
    # Removed: the name is no longer activatable, the daemon is gone; purged: no file left.
    files = [line.split(None, 5)[-1].lstrip(".") for line in
             subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout.splitlines()
             if not line.startswith("d")]
    box.run(["dpkg", "-r", "reachabilityd"], timeout=120)
    names = box.run(["busctl", "--system", "list", "--activatable", "--no-legend"]).stdout
    assert SERVICE not in names, names
    assert unit_property(box, "reachabilityd.service", "ActiveState") in ("inactive", "")
    box.run(["dpkg", "--purge", "reachabilityd"], timeout=120)
    left = [f for f in files if box.path(f).exists() or box.path(f).is_symlink()]
    assert not left, f"left after --purge: {left}"


def deb_files(package: Path) -> list:
    """The paths a .deb installs (not its directories), as absolute paths."""
    listing = subprocess.run(["dpkg-deb", "-c", str(package)], capture_output=True, text=True, check=True).stdout
    return [line.split(None, 5)[-1].split(" -> ")[0].lstrip(".") for line in listing.splitlines()
            if not line.startswith("d")]


def test_c_api_packages_link_a_program_and_remove_cleanly(request, deb, library_debs):  # pylint: disable=redefined-outer-name
    """libreachability-sc1 and libreachability-sc-dev installed without the daemon: dpkg -L
    shows the library (SONAME libreachability-sc.so.1, run path to its own Swift runtime) in
    the one and the header, the .so link and the .pc in the other; ldconfig knows it; a C
    program built with `pkg-config --cflags --libs reachability-sc` from the installed header
    alone (capi/tests/reachability-test.c) runs its self-checks in-process, with the
    toolchain's directory hidden. Removing -dev leaves the library (and the program runs);
    purging both leaves no file and ldconfig forgets it. The daemon's package does not
    depend on them."""
    depends = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True, text=True,
                             check=True).stdout
    assert "libreachability-sc" not in depends, depends
    assert not [f for f in deb_files(deb) if "reachability-sc" in f or "SystemConfiguration" in f], deb_files(deb)
    library, dev = library_debs["libreachability-sc1"], library_debs["libreachability-sc-dev"]
    box = boot(request, "dbus-daemon", None)
    add_uplink(box)
    box.run(["dpkg", "-i", str(library), str(dev)], timeout=120)
    triplet = box.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"]).stdout.strip()
    libdir = f"/usr/lib/{triplet}"
    held = {name: set(box.run(["dpkg", "-L", name]).stdout.split()) for name in LIBRARY_PACKAGES}
    expected = {
        "libreachability-sc1": [f"{libdir}/libreachability-sc.so.1", f"{libdir}/libreachability-sc.so.1.0.0",
                                *(f"{libdir}/reachability-sc/lib{name}.so" for name in ("swiftCore", "Foundation", "dispatch"))],
        "libreachability-sc-dev": [f"{libdir}/libreachability-sc.so", f"{libdir}/pkgconfig/reachability-sc.pc",
                                   *(f"/usr/include/SystemConfiguration/{name}.h"
                                     for name in ("SystemConfiguration", "SCBase", "SCNetworkReachability"))]}
    for name, paths in expected.items():
        missing = [path for path in paths if path not in held[name]]
        assert not missing, f"dpkg -L {name} lacks {missing}:\n" + "\n".join(sorted(held[name]))
    assert not [p for p in held["libreachability-sc1"] if p.endswith((".h", ".pc", "libreachability-sc.so"))], held
    dynamic = box.run(["readelf", "-d", f"{libdir}/libreachability-sc.so.1"]).stdout
    assert "Library soname: [libreachability-sc.so.1]" in dynamic, dynamic
    assert re.search(r"\((RUNPATH|RPATH)\).*\[\$ORIGIN/reachability-sc\]", dynamic), dynamic
    # dh_makeshlibs' trigger ran ldconfig: the dynamic linker's cache has the library.
    assert "libreachability-sc.so.1 " in box.run(["ldconfig", "-p"]).stdout

    # The toolchain's runtime directory hidden: what runs comes from the package.
    toolchain = Path(harness.tool("swift")).resolve().parents[1] / "lib" / "swift"
    assert (toolchain / "linux" / "libswiftCore.so").exists(), f"no Swift runtime in {toolchain}"
    box.run(["mount", "-t", "tmpfs", "tmpfs", str(toolchain)])
    source = REPO / "capi" / "tests" / "reachability-test.c"
    box.sh(f"cc -Wall -Wextra -Werror -o /root/reachability-test {source} $(pkg-config --cflags --libs reachability-sc)",
           timeout=180)
    loads = box.run(["ldd", "/root/reachability-test"]).stdout
    assert "not found" not in loads and f"{libdir}/reachability-sc/libswiftCore.so" in loads, loads

    def basics() -> str:
        done = box.run(["/root/reachability-test", "basics"], check=False, timeout=60)
        assert done.returncode == 0 and "basics ok" in done.stdout, f"{done.returncode}:\n{done.stdout}{done.stderr}"
        return done.stdout

    # In-process (the daemon is not installed): the uplink's default route makes the internet reachable.
    assert "flags internet flags=0x2" in basics().splitlines()

    box.run(["dpkg", "-r", "libreachability-sc-dev"], timeout=120)
    for path in expected["libreachability-sc-dev"]:
        assert not box.path(path).exists(), f"{path} left after dpkg -r libreachability-sc-dev"
    for path in expected["libreachability-sc1"]:
        assert box.path(path).exists(), f"{path} gone with libreachability-sc-dev"
    basics()
    box.run(["dpkg", "--purge", *LIBRARY_PACKAGES], timeout=120)
    left = [f for package in (library, dev) for f in deb_files(package)
            if box.path(f).exists() or box.path(f).is_symlink()]
    assert not left, f"left after --purge: {left}"
    assert "libreachability-sc" not in box.run(["ldconfig", "-p"]).stdout


def test_source_package_builds_with_no_network():
    """The source package (debian/vendor-swift-deps puts the Swift dependencies in it)
    builds with dpkg-buildpackage in a network namespace of its own (`unshare -n`: only
    a loopback that is down) and without this machine's git configuration (no url.insteadOf
    that could lead to a local copy of the dependencies' repositories): SwiftPM takes them
    from vendor/ and fetches nothing. It is the build every test of the package installs
    (packages.py); here, what its log and the source tarball say."""
    build = packages.built()
    assert "reachabilityd/vendor/swift-log/Package.swift" in build.listing, "vendor/ is not in the source package"
    assert not [name for name in build.listing if "/.build" in name or "/.git/" in name], \
        "build or git files in the source package"
    log = build.log
    # One location per package identity (swift-prometheus names swift-metrics with ".git").
    identity = [line for line in log.splitlines() if "identity" in line and "warning" in line]
    assert not identity, "\n".join(identity)
    # SwiftPM names where it fetches from: every dependency from vendor/'s repositories.
    fetched = [line for line in log.splitlines() if re.match(r"(Fetching|Cloning|Working copy of) ", line)]
    assert fetched and all("/.build-vendor/" in line for line in fetched), "\n".join(fetched)
    # Each pinned dependency resolved from there (once per build folder: the daemon's and the C
    # library's builds each resolve them), at its pinned version, and nothing else.
    resolved = {re.sub(r"^Working copy of .*/", "", line) for line in fetched if " resolved at " in line}
    wanted = {f"{pin.split()[0]} resolved at {pin.split()[-1]}" for pin in filter(None, build.pins)}
    assert resolved == wanted, fetched
    for name in ("reachabilityd", GIO_PACKAGE, *LIBRARY_PACKAGES):
        assert list(build.directory.glob(f"{name}_*.deb")), f"no {name} package: {log[-3000:]}"


def test_apt_installs_no_networkmanager_with_the_package(request, deb, tmp_path):  # pylint: disable=redefined-outer-name
    """On a machine without NetworkManager (the container's, network-manager purged),
    apt's plan for the package (`apt-get install --simulate`, with apt's default of
    installing Recommends) holds no network-manager. The same plan for a package that
    recommends it does: the check can fail."""
    control = tmp_path / "recommender" / "DEBIAN"
    control.mkdir(parents=True)
    (control / "control").write_text("Package: reachtest-recommender\nVersion: 1\nArchitecture: all\n"
                                      "Maintainer: reachabilityd tests <reachtest@example.org>\n"
                                      "Recommends: network-manager\nDescription: recommends NetworkManager\n")
    recommender = tmp_path / "reachtest-recommender.deb"
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(control.parent), str(recommender)],
                   check=True, capture_output=True)
    box = ct.Container(binds=[REPO, tmp_path])
    request.addfinalizer(box.close)
    need(ct.requirements())
    box.start()
    box.run(["dpkg", "--purge", "--force-depends", "network-manager"], timeout=120)

    def plan(package: Path) -> list:
        done = box.run(["apt-get", "install", "--simulate", "-o", "APT::Install-Recommends=true",
                        str(package)], timeout=120)
        return [line.split()[1] for line in done.stdout.splitlines() if line.startswith("Inst ")]

    ours = plan(deb)
    assert "reachabilityd" in ours, ours
    assert "network-manager" not in ours, f"apt would install NetworkManager with the package: {ours}"
    assert "network-manager" in plan(recommender), "the check cannot tell: a Recommends was not planned"


def test_install_sh_uninstall_removes_every_file(request):
    """install.sh --uninstall, in a stage: every file install.sh put there is gone."""
    require(root=False, networkmanager=False, daemon=False)
    stage = harness.short_tmpdir("reach-uninstall-")
    request.addfinalizer(lambda: shutil.rmtree(stage, ignore_errors=True))
    env = dict(os.environ, DESTDIR=str(stage))
    done = subprocess.run([str(REPO / "install.sh")], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=packages.BUILD_TIMEOUT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    installed = [p for p in stage.rglob("*") if p.is_file()]
    assert len(installed) >= 10, installed
    done = subprocess.run([str(REPO / "install.sh"), "--uninstall"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [p for p in stage.rglob("*") if p.is_file()], done.stdout


# --- metrics: credentials from the bus, the writer unit ------------------------------


@pytest.mark.parametrize("bus", BUSES)
def test_supplementary_adm_reads_metrics_and_writer_unit(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)
    add_uplink(box)
    base = ["systemd-run", "--wait", "--pipe", "--quiet", "-p", "User=reachabilityd-metrics"]
    # Without adm: refused, and the refusal said once.
    refused = box.run([*base, "reachctl", "metrics"], check=False)
    assert refused.returncode != 0, refused.stdout
    text = refused.stdout + refused.stderr
    assert text.count("adm") == 1, text
    # With SupplementaryGroups=adm (not in /etc/group's adm): the bus tells the daemon the groups.
    allowed = box.run([*base, "-p", "SupplementaryGroups=adm", "reachctl", "metrics"], check=False)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert "reachability_target_reachable" in allowed.stdout
    # The writer unit: its file appears, carries the liveness sample, and says so when it stops.
    box.sh("install -d -m 755 /var/lib/prometheus/node-exporter; "
           "setfacl -m u:reachabilityd-metrics:rwx /var/lib/prometheus/node-exporter 2>/dev/null || "
           "chown reachabilityd-metrics /var/lib/prometheus/node-exporter")
    box.run(["systemctl", "start", "reachabilityd-metrics-textfile.service"])
    textfile = box.path("/var/lib/prometheus/node-exporter/reachability.prom")
    harness.wait_until(textfile.exists, 15, "the writer unit's file", poll=0.1)
    harness.wait_until(lambda: "reachctl_textfile_updated_timestamp_seconds" in textfile.read_text(), 15,
                       "the liveness sample in the file", poll=0.1)
    assert "reachability_target_reachable" in textfile.read_text()
    assert "reachctl_textfile_writer_up 1" in textfile.read_text()
    box.run(["systemctl", "stop", "reachabilityd-metrics-textfile.service"])
    stopped = textfile.read_text()
    assert "reachctl_textfile_writer_up 0" in stopped and "reachability_target_reachable" not in stopped, \
        f"the stopped writer's file:\n{stopped}"


WRITER = "reachabilityd-metrics-textfile.service"
TEXTFILE = "/var/lib/prometheus/node-exporter/reachability.prom"


def writer_directory(box: ct.Container) -> None:
    """node_exporter's directory as Debian makes it (root's, 755), given to the writer as
    docs/metrics.md says."""
    box.sh("install -d -m 755 /var/lib/prometheus/node-exporter; "
           "setfacl -m u:reachabilityd-metrics:rwx /var/lib/prometheus/node-exporter 2>/dev/null || "
           "chown reachabilityd-metrics /var/lib/prometheus/node-exporter")


def metric(text: str, name: str) -> dict:
    found = {}
    for line in text.splitlines():
        match = re.match(rf"^{name}(\{{.*\}})? (\S+)$", line)
        if match:
            found[match.group(1) or ""] = float(match.group(2))
    return found


@pytest.mark.parametrize("bus", BUSES)
def test_writer_and_daemon_through_a_reinstall_and_a_stop(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    """The package's users exist before its policy lands (neither bus names an unknown
    user); the enabled writer and the daemon run again after the package is installed
    over itself, systemd has reloaded (no "changed on disk"), and the daemon answers.
    Then the daemon is stopped and the uplink taken down: within 75 s the textfile says
    reachability_up 0 and holds no target (never the last values with a fresh time)."""
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    # The container is this machine's root: users an earlier test or install made are gone
    # first, so that the package's own order is what is tried (dbus-daemon logs `Unknown
    # username "reachabilityd"` when the policy lands first).
    box.sh("for user in reachabilityd reachabilityd-metrics; do "
           "if getent passwd $user >/dev/null; then userdel $user; fi; "
           "if getent group $user >/dev/null; then groupdel $user; fi; done")
    install_deb(box, deb)
    bus_journal = box.run(["journalctl", "-b", "--no-pager", "-o", "cat", "-u", "dbus.service"]).stdout
    unknown = [line for line in bus_journal.splitlines()
               if "reachabilityd" in line and re.search(r"(?i)unknown|invalid|lookup", line)]
    assert not unknown, "the bus read the policy before the users existed:\n" + "\n".join(unknown)
    add_uplink(box)
    writer_directory(box)
    box.run(["systemctl", "enable", "--now", WRITER])
    textfile = box.path(TEXTFILE)

    def up() -> dict:
        try:
            return metric(textfile.read_text(), "reachability_up")
        except OSError:
            return {}

    harness.wait_until(lambda: up() == {"": 1}, 20, "the writer's file with reachability_up 1", poll=0.1)
    writer_pid = unit_property(box, WRITER, "MainPID")

    install_deb(box, deb)
    assert unit_property(box, WRITER, "ActiveState") == "active", box.run(
        ["systemctl", "status", "--no-pager", WRITER], check=False).stdout
    assert unit_property(box, WRITER, "MainPID") not in ("0", writer_pid), "the writer was not restarted"
    for unit in (WRITER, "reachabilityd.service"):
        assert unit_property(box, unit, "NeedDaemonReload") == "no", unit
        status = box.run(["systemctl", "status", "--no-pager", unit], check=False)
        assert "changed on disk" not in status.stdout + status.stderr, status.stdout + status.stderr
    done, answers = reachctl_json(box, "status")
    assert done.returncode == 0 and answers and answers[0].get("status") == 2, done.stdout + done.stderr
    harness.wait_until(lambda: up() == {"": 1}, 20, "the restarted writer's file", poll=0.1)

    box.run(["systemctl", "stop", "reachabilityd.service"])
    box.run(["ip", "link", "set", "up0", "down"])
    stopped = time.monotonic()
    harness.wait_until(lambda: not textfile.exists() or up() == {"": 0}, 75,
                       "the textfile to say the daemon is down", poll=0.2,
                       describe=lambda: textfile.read_text() if textfile.exists() else "(no file)")
    took = time.monotonic() - stopped
    if textfile.exists():
        text = textfile.read_text()
        assert not metric(text, "reachability_target_reachable"), text
    assert unit_property(box, "reachabilityd.service", "ActiveState") == "inactive", "the writer started the daemon"
    print(f"{bus}: the textfile said the daemon is down {took:.1f} s after the stop")


def test_writer_restarts_are_bounded_and_quiet(request, deb):  # pylint: disable=redefined-outer-name
    """The writer's directory missing: 3 starts, then the unit stays failed (not a restart
    every 5 s for good). With its directory there and a 1 s heartbeat: no "Failed to set
    thread priority" on the heartbeat (at most the one line at start)."""
    box = boot(request, "dbus-daemon", None)
    install_deb(box, deb)
    box.run(["systemctl", "start", WRITER], check=False)
    harness.wait_until(lambda: unit_property(box, WRITER, "ActiveState") == "failed", 60,
                       "the writer without its directory to stay failed", poll=0.5)
    # systemd 252 keeps the last run's Result (exit-code) when the start limit stops the
    # restarts; its record of the refusal is the same everywhere.
    journal = box.run(["journalctl", "-b", "--no-pager", "-o", "cat", "-u", WRITER]).stdout
    assert "Start request repeated too quickly" in journal, journal
    # The writer says what is wrong and what to do (the directory is node_exporter's package's).
    assert "/var/lib/prometheus/node-exporter does not exist" in journal and "reachctl(1), FILES" in journal, journal
    assert int(unit_property(box, WRITER, "NRestarts")) <= 3, unit_property(box, WRITER, "NRestarts")

    writer_directory(box)
    box.path(f"/etc/systemd/system/{WRITER}.d").mkdir(parents=True)
    box.path(f"/etc/systemd/system/{WRITER}.d/heartbeat.conf").write_text(
        "[Service]\nExecStart=\nExecStart=/usr/bin/reachctl metrics --textfile ${TEXTFILE} --liveness 1\n")
    box.run(["systemctl", "daemon-reload"])
    box.run(["systemctl", "reset-failed", WRITER])
    box.run(["systemctl", "start", WRITER])
    textfile = box.path(TEXTFILE)
    harness.wait_until(textfile.exists, 20, "the writer's file", poll=0.1)
    first = textfile.stat().st_mtime
    harness.wait_until(lambda: textfile.stat().st_mtime >= first + 4, 15, "four heartbeats", poll=0.2)
    # This run's lines only (the failed starts above logged theirs).
    log = run_journal(box, WRITER)
    lines = [line for line in log.splitlines() if "thread priority" in line]
    assert len(lines) <= 1, f"the writer logs on its heartbeat:\n{log}"


# --- the service's life: every client holds the current truth --------------------


def example_binary() -> Path:
    """The library's example listener (reachability-example), from the build under test."""
    return harness.daemon_binary().parent / "reachability-example"


@pytest.mark.parametrize("bus", BUSES)
def test_first_call_after_every_stop_gets_the_evaluated_answer(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    """The call the bus starts the service for is answered after the first evaluation:
    Status 2 through the container's uplink, 10 of 10."""
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)
    add_uplink(box)
    answers = []
    for _ in range(10):
        box.run(["systemctl", "stop", "reachabilityd.service"])
        assert unit_property(box, "reachabilityd.service", "ActiveState") == "inactive"
        done, lines = reachctl_json(box, "status")
        answers.append((done.returncode, [(a.get("status"), a.get("flags")) for a in lines], done.stderr.strip()))
    wrong = [a for a in answers if a[0] != 0 or a[1] != [(2, 2)]]
    assert not wrong, f"{len(wrong)} of 10 first calls were not answered Status 2, Flags 2: {answers}"


@pytest.mark.parametrize("bus", BUSES)
def test_stopped_service_comes_back_to_watchers(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    """systemctl stop under a running `reachctl watch` and a library listener: both show
    Unknown, then the truth again within 2 s, because the clients start the service again."""
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)
    add_uplink(box)
    example = example_binary()
    need([] if example.exists() else [f"{example} (swift build)"])
    watch = box.popen(["reachctl", "--daemon", "--json", "watch"], stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL)
    listener = box.popen([str(example), "--daemon"], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    request.addfinalizer(lambda: (box.stop(watch), box.stop(listener)))
    watch_lines, listener_lines = Lines(watch), Lines(listener)

    def watch_status(status):
        return lambda line: line.startswith("{") and json.loads(line).get("status") == status

    def listener_status(status):
        word = {2: "reachable-ethernetOrWiFi", -1: "unknown"}[status]
        return lambda line: line.startswith(f"status {word} ")

    watch_lines.wait_for(watch_status(2), "reachctl watch: Status 2", timeout=20)
    listener_lines.wait_for(listener_status(2), "the library listener: status 2", timeout=20)
    for round_ in range(3):
        box.run(["systemctl", "stop", "reachabilityd.service"])
        stopped = time.monotonic()
        watch_lines.wait_for(watch_status(-1), f"round {round_}: reachctl watch shows Unknown", timeout=5)
        listener_lines.wait_for(listener_status(-1), f"round {round_}: the listener shows unknown", timeout=5)
        left = 2.0 - (time.monotonic() - stopped)
        watch_lines.wait_for(watch_status(2), f"round {round_}: reachctl watch: Status 2 within 2 s of the stop",
                             timeout=max(left, 0.01))
        left = 2.0 - (time.monotonic() - stopped)
        listener_lines.wait_for(listener_status(2), f"round {round_}: the listener: status 2 within 2 s of the stop",
                                timeout=max(left, 0.01))
        assert unit_property(box, "reachabilityd.service", "ActiveState") == "active"


@pytest.mark.parametrize("bus", BUSES)
def test_sighup_leaves_a_running_service(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    """kill -HUP, and systemctl reload (ExecReload= sends it): the same process still serves
    (no exit, so no restart either)."""
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)
    add_uplink(box)
    reachctl_json(box, "status")
    pid = unit_property(box, "reachabilityd.service", "MainPID")
    assert pid != "0"
    box.run(["kill", "-HUP", pid])
    reload = box.run(["systemctl", "reload", "reachabilityd.service"], check=False)
    assert reload.returncode == 0, reload.stdout + reload.stderr
    # A call answered after the signal: had the signal ended the process, the bus would
    # have started a new one (or systemd restarted it) with another PID.
    done, lines = reachctl_json(box, "status")
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    assert unit_property(box, "reachabilityd.service", "MainPID") == pid
    assert unit_property(box, "reachabilityd.service", "NRestarts") == "0"
    assert unit_property(box, "reachabilityd.service", "ActiveState") == "active"


# --- doctor: the real cause, bounded --------------------------------------------------


@pytest.mark.parametrize("bus", BUSES)
def test_doctor_names_why_the_start_failed(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    """A masked unit, then a unit whose start fails: doctor says so (the unit's state, the
    service's own last line), in one sentence with one full stop, within 5 s on both buses
    (dbus-daemon is not told that the start failed: doctor hears it from systemd's journal
    instead of waiting for the call's timeout), and never tells to install the activation
    file it found. Records about the unit from others (systemd's own, such as "Failed to kill
    control group", here forged with logger as root) do not push the service's words out."""
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)

    def doctor():
        started = time.monotonic()
        done = box.run(["reachctl", "doctor"], check=False, timeout=60)
        return done, time.monotonic() - started

    box.run(["systemctl", "mask", "reachabilityd.service"])
    done, took = doctor()
    text = done.stdout + done.stderr
    assert done.returncode == 2, text
    assert "reachabilityd.service is masked (systemctl unmask reachabilityd.service)." in text, text
    assert ".." not in text.replace("...", ""), text
    assert "install" not in text.split("activatable", 1)[1], text
    assert took < 5, f"doctor took {took:.1f} s:\n{text}"

    box.run(["systemctl", "unmask", "reachabilityd.service"])
    box.path("/etc/systemd/system/reachabilityd.service.d").mkdir(parents=True)
    box.path("/etc/systemd/system/reachabilityd.service.d/broken.conf").write_text(
        "[Service]\nExecStart=\nExecStart=/bin/sh -c 'echo reachtest: cannot start >&2; exit 3'\nRestart=no\n")
    box.run(["systemctl", "daemon-reload"])
    box.sh("for i in 1 2 3 4 5 6; do printf 'MESSAGE=reachtest noise %s\\nOBJECT_SYSTEMD_UNIT=reachabilityd.service\\n' "
           "$i | logger --journald; done")
    done, took = doctor()
    text = done.stdout + done.stderr
    assert done.returncode == 2, text
    assert "reachabilityd.service failed to start" in text and "exit status 3" in text, text
    assert "reachtest: cannot start" in text, text
    assert "reachtest noise" not in text, text
    assert "install" not in text.split("activatable", 1)[1], text
    assert took < 5, f"doctor took {took:.1f} s:\n{text}"


# --- GLib's GNetworkMonitor: the installed GIO module ---------------------------------


MONITOR_TEST = REPO / "gio" / "tests" / "monitor-test.py"
GIO_MONITOR = "ReachabilitydNetworkMonitor"
GIO_BOUND = 2.0 + 3.0  # the module's start-up bound (gio/monitor.h), and the program's own start


def glib_program(box: ct.Container, *targets: str) -> tuple:
    """gio/tests/monitor-test.py in the container's clean environment (no GIO variable): its lines, and
    how long it took."""
    started = time.monotonic()
    done = box.run(["/usr/bin/python3", str(MONITOR_TEST), *targets], check=False, timeout=60)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, f"monitor-test.py: {done.returncode}\n{done.stdout}{done.stderr}"
    return done.stdout.splitlines(), elapsed


@pytest.mark.parametrize("bus", BUSES)
def test_glib_programs_get_the_installed_gio_module(request, deb, gio_deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    """The daemon's package alone changes no GLib program: GLib's own monitor, and the cache
    names no module of ours. With reachabilityd-gio-module: the trigger lists the module in GIO's
    cache; a GLib program in Python gets our monitor with no environment variable (its first read
    starts the service) and can_reach right both ways. Masked: GLib's own monitor, within the
    bound. The module's package removed: the cache forgets it, GLib's own monitor again, and the
    service stays installed."""
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)
    add_uplink(box)
    box.sh("ip route add unreachable 198.51.100.0/24")
    modules = box.run(["pkg-config", "--variable=giomoduledir", "gio-2.0"]).stdout.strip()
    cache = box.path(f"{modules}/giomodule.cache")
    assert "libgioreachabilityd" not in (cache.read_text() if cache.exists() else ""), cache.read_text()
    lines, _ = glib_program(box)
    assert lines[0].split()[1] != GIO_MONITOR, f"the daemon's package alone changed GLib's monitor: {lines}"

    install_deb(box, gio_deb)
    assert "libgioreachabilityd.so: gio-network-monitor" in cache.read_text(), cache.read_text()
    assert unit_property(box, "reachabilityd.service", "ActiveState") == "inactive"

    lines, _ = glib_program(box, "192.0.2.1", "198.51.100.7")
    assert lines[0].split()[:3] == ["ready", GIO_MONITOR, "1"], lines
    assert "reach sync 192.0.2.1 ok" in lines, lines
    assert any(line.startswith("reach sync 198.51.100.7 error 37 ") for line in lines), lines  # HOST_UNREACHABLE
    assert unit_property(box, "reachabilityd.service", "ActiveState") == "active"

    box.run(["systemctl", "mask", "--now", "reachabilityd.service"])
    lines, elapsed = glib_program(box)
    assert lines[0].split()[1] != GIO_MONITOR, lines
    assert elapsed < GIO_BOUND, f"GLib's own monitor after {elapsed:.2f} s: {lines}"
    box.run(["systemctl", "unmask", "reachabilityd.service"])

    box.run(["dpkg", "-r", GIO_PACKAGE], timeout=120)
    assert "libgioreachabilityd" not in (cache.read_text() if cache.exists() else ""), cache.read_text()
    assert not list(box.path(modules).glob("libgioreachabilityd*")), "the module's file is left"
    lines, _ = glib_program(box)
    assert lines[0].split()[1] != GIO_MONITOR, lines
    assert box.run(["dpkg-query", "-W", "-f=${Status}", "reachabilityd"]).stdout == "install ok installed"


# --- a restarted service announces itself (the package) ----------------------------


def readme_applet(box: ct.Container) -> str:
    """The README's applet, verbatim, where every user can run it; returns its path inside."""
    text = (REPO / "README.md").read_text()
    section = text.split("### A panel applet", 1)[1]
    [snippet] = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    box.path("/usr/local/share/applet.py").write_text(snippet)
    return "/usr/local/share/applet.py"



def test_applet_and_watchers_after_reinstall_and_remove_then_install(request, deb):  # pylint: disable=redefined-outer-name
    """The package reinstalled (its prerm stops the daemon) under the README applet and a
    reachctl watch: the watch starts the new daemon, whose announcement the applet shows
    within 2 s. Then removed (nothing can start the service) and installed again: within
    the cap (30 s) the watch has started it, and the applet shows it."""
    box = boot(request, "dbus-daemon", None)
    install_deb(box, deb)
    add_uplink(box)
    applet = box.popen(["python3", readme_applet(box)], user="reachabilityd-metrics", stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    watch = box.popen(["reachctl", "--daemon", "--json", "watch"], stdout=subprocess.PIPE,
                      stderr=subprocess.DEVNULL)
    request.addfinalizer(lambda: (box.stop(applet), box.stop(watch)))
    applet_lines, watch_lines = Lines(applet), Lines(watch)

    def watch_status(status):
        return lambda line: line.startswith("{") and json.loads(line).get("status") == status

    applet_lines.wait_for(lambda line: line == "online 0x2", "the applet's first line", 20)
    watch_lines.wait_for(watch_status(2), "reachctl watch: Status 2", 20)
    install_deb(box, deb)
    reinstalled = time.monotonic()
    applet_lines.wait_for(lambda line: line == "online 0x2", "the applet after the reinstall", timeout=2.0)
    assert time.monotonic() - reinstalled <= 2.0
    box.run(["dpkg", "-r", "reachabilityd"], timeout=120)
    watch_lines.wait_for(watch_status(-1), "reachctl watch: Unknown once removed", 10)
    install_deb(box, deb)
    installed = time.monotonic()
    applet_lines.wait_for(lambda line: line == "online 0x2", "the applet after remove and install", timeout=30 + 5)
    watch_lines.wait_for(watch_status(2), "reachctl watch: Status 2 again",
                         timeout=max(30 + 5 - (time.monotonic() - installed), 0.01))


# --- issue 47: an upgrade restarts what ran; removal stops and disables every unit --------------


def test_upgrade_restarts_what_ran_and_removal_stops_and_disables_every_unit(request, deb):  # pylint: disable=redefined-outer-name
    """On dbus-daemon, with the writer and reachabilityd-units.service enabled and running, a
    reachability-wait@ instance done and the daemon started by a call:
    * the package installed over itself (an upgrade) restarts exactly the services that ran (each
      a new MainPID), and neither the finished wait@ instance nor a target (their
      ActiveEnterTimestamp unchanged);
    * the writer stopped leaves its stopped file (reachctl_textfile_writer_up 0 and when, nothing
      else); an upgrade then leaves the writer stopped, although it is enabled;
    * dpkg -r: no unit of the package is active or enabled (no link to one under
      /etc/systemd/system), no process runs a program of the package, the writer's file is gone;
      a wait@ instance still waiting is stopped too; --purge: the same, and debhelper's enablement
      state forgotten; installed again, nothing is enabled or running."""
    box = boot(request, "dbus-daemon", None)
    install_deb(box, deb)
    add_uplink(box)
    writer_directory(box)
    units = sorted(Path(path).name for path in deb_files(deb) if path.startswith("/lib/systemd/system/"))
    assert len(units) >= 6, units
    programs = [path for path in deb_files(deb) if path.startswith(("/usr/bin/", "/usr/libexec/"))]
    waiter = "reachability-wait@192.0.2.1.service"  # the uplink's gateway: reached at once
    waiting = "reachability-wait@198.51.100.7.service"  # unreachable: still waiting when removed
    runners = ["reachabilityd.service", "reachabilityd-units.service", WRITER]
    steady = [waiter, "reachability-online.target", "reachability-unmetered.target"]
    textfile = box.path(TEXTFILE)

    def state(unit: str) -> str:
        return unit_property(box, unit, "ActiveState")

    def entered(unit: str) -> str:
        return unit_property(box, unit, "ActiveEnterTimestampMonotonic")

    def writer_file() -> dict:
        try:
            text = textfile.read_text()
        except OSError:
            return {}
        return {name: metric(text, name).get("") for name in
                ("reachability_up", "reachctl_textfile_writer_up", "reachctl_textfile_writer_stopped_timestamp_seconds",
                 "reachctl_textfile_updated_timestamp_seconds") if metric(text, name)}

    box.run(["systemctl", "enable", "--now", WRITER, "reachabilityd-units.service"])
    box.run(["systemctl", "start", waiter], timeout=90)
    done, answers = reachctl_json(box, "status")
    assert done.returncode == 0 and answers, done.stdout + done.stderr
    harness.wait_until(lambda: writer_file().get("reachability_up") == 1, 20, "the writer's file with reachability_up 1",
                       poll=0.1, describe=lambda: str(writer_file()))
    assert all(state(unit) == "active" for unit in runners + [waiter]), {u: state(u) for u in runners + [waiter]}

    pids = {unit: unit_property(box, unit, "MainPID") for unit in runners}
    before = {unit: (state(unit), entered(unit)) for unit in steady}
    install_deb(box, deb)
    for unit in runners:
        assert state(unit) == "active", box.run(["systemctl", "status", "--no-pager", unit], check=False).stdout
        assert unit_property(box, unit, "MainPID") not in ("0", pids[unit]), f"the upgrade did not restart {unit}"
        assert unit_property(box, unit, "NeedDaemonReload") == "no", unit
    after = {unit: (state(unit), entered(unit)) for unit in steady}
    assert after == before, ("a target or the finished wait@ instance was restarted or stopped across the "
                             f"upgrade (debhelper's try-restart, or reachabilityd-units.service's): {before} -> {after}")

    box.run(["systemctl", "stop", WRITER])
    stopped = writer_file()
    assert set(stopped) == {"reachctl_textfile_writer_up", "reachctl_textfile_writer_stopped_timestamp_seconds"}, \
        f"the stopped writer's file: {textfile.read_text() if textfile.exists() else '(none)'}"
    assert stopped["reachctl_textfile_writer_up"] == 0
    assert abs(stopped["reachctl_textfile_writer_stopped_timestamp_seconds"] - time.time()) < 60, stopped
    units_pid = unit_property(box, "reachabilityd-units.service", "MainPID")
    install_deb(box, deb)
    assert state(WRITER) == "inactive", "the upgrade started the writer its administrator had stopped"
    assert writer_file() == stopped, "the upgrade touched the stopped writer's file"
    assert unit_property(box, "reachabilityd-units.service", "MainPID") not in ("0", units_pid)

    box.run(["systemctl", "start", WRITER])
    harness.wait_until(lambda: writer_file().get("reachability_up") == 1, 20, "the restarted writer's file", poll=0.1,
                       describe=lambda: str(writer_file()))

    def nothing_left(step: str) -> None:
        listed = box.run(["systemctl", "list-units", "--all", "--plain", "--no-legend", "--full",
                          "reachability*"]).stdout
        running = [line for line in listed.splitlines()
                   if re.search(r"\s(active|activating|deactivating|reloading)\s", line)]
        assert not running, f"{step}: units still running:\n" + "\n".join(running)
        for unit in [u for u in units if "@" not in u] + [waiter, waiting]:
            assert state(unit) in ("inactive", "failed", ""), f"{step}: {unit} is {state(unit)}"
        links = box.sh("find /etc/systemd/system \\( -name 'reachability*' -o -lname '*reachability*' \\) -print").stdout
        assert not links.strip(), f"{step}: still enabled or pulled in:\n{links}"
        processes = box.run(["ps", "-eo", "args"]).stdout.splitlines()
        theirs = [line for line in processes if any(line.startswith(program) for program in programs)]
        assert not theirs, f"{step}: programs of the package still run:\n" + "\n".join(theirs)
        assert not textfile.exists(), f"{step}: the writer's file is left:\n{textfile.read_text()}"

    box.sh("ip route add unreachable 198.51.100.0/24")
    box.run(["systemctl", "start", "--no-block", waiting])
    harness.wait_until(lambda: state(waiting) == "activating", 20, f"{waiting} waiting", poll=0.1,
                       describe=lambda: state(waiting))
    box.run(["dpkg", "-r", "reachabilityd"], timeout=120)
    nothing_left("dpkg -r")
    box.run(["dpkg", "--purge", "reachabilityd"], timeout=120)
    nothing_left("dpkg --purge")
    state_files = box.sh("find /var/lib/systemd -path '*deb-systemd-helper*' -name '*reachability*' -print").stdout
    assert not state_files.strip(), f"debhelper's enablement state left after --purge:\n{state_files}"
    install_deb(box, deb)
    for unit in ("reachabilityd-units.service", WRITER):
        enabled = box.run(["systemctl", "is-enabled", unit], check=False).stdout.strip()
        assert enabled == "disabled" and state(unit) == "inactive", f"installed again, {unit} is {enabled}, {state(unit)}"


# --- the bus as shipped: the unit's user and policy, on both buses ----------------------

BLOCKING_SCRIPT = """
import json, sys, time
import dbus.bus
SERVICE = "io.github.reachabilityd.Reachability1"
ROOT = "/io/github/reachabilityd/Reachability1"
connections = [dbus.bus.BusConnection("unix:path=/run/dbus/system_bus_socket") for _ in range(8)]
calls, paths = [], []
def timed(what, call):
    start, error, result = time.monotonic(), None, None
    try:
        result = call()
    except Exception as failure:
        error = f"{type(failure).__name__}: {failure}"
    calls.append([what, time.monotonic() - start, error])
    return result
for c, conn in enumerate(connections):
    for i in range(128):
        path = timed("WatchAddress", lambda: conn.call_blocking(
            SERVICE, ROOT, SERVICE + ".Manager", "WatchAddress", "s", (f"198.51.{c}.{i + 1}",), timeout=60))
        if path is not None:
            paths.append((conn, str(path)))
for _ in range(3):
    for conn, path in paths:
        timed("GetAll", lambda: conn.call_blocking(SERVICE, path, "org.freedesktop.DBus.Properties", "GetAll", "s",
                                                   (SERVICE + ".Target",), timeout=60))
print(json.dumps(calls))
"""


@pytest.mark.parametrize("bus", BUSES)
def test_blocking_clients_are_served_at_once_as_shipped(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    """The service as its unit runs it (its own user, the shipped policy) learns which bus it is
    and says so once; a script with no main loop, as an unprivileged user, on 8 connections x
    128 WatchAddress then 3 rounds of GetAll of each target (4,096 blocking calls), is answered
    at once, every call. On dbus-broker the service once could not ask (the stock policy lets
    only root call GetStats), took it for dbus-daemon and held such a caller back for read
    receipts it cannot answer: calls stalled seconds and ended in NoReply; on dbus-daemon the
    refused question was logged by the bus at every start."""
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)
    add_uplink(box)
    box.path("/usr/local/share/blocking.py").write_text(BLOCKING_SCRIPT)
    box.run(["useradd", "--no-create-home", "--user-group", "blocker"])
    done = box.run(["python3", "/usr/local/share/blocking.py"], user="blocker", check=False, timeout=600)
    journal = box.run(["journalctl", "--no-pager", "-o", "cat", "-u", "reachabilityd.service"]).stdout
    assert done.returncode == 0, f"{done.stdout[-2000:]}{done.stderr[-2000:]}\n{journal[-3000:]}"
    calls = json.loads(done.stdout)
    assert len(calls) == 8 * 128 * 4, len(calls)
    failed = [c for c in calls if c[2]]
    slowest = max(c[1] for c in calls)
    print(f"{bus}: {len(calls)} blocking calls, slowest {slowest * 1000:.1f} ms, {len(failed)} failed")
    assert not failed, f"{len(failed)} calls failed, e.g. {failed[:3]}\n{journal[-3000:]}"
    assert slowest < 1.0, f"the slowest call took {slowest:.2f} s\n{journal[-3000:]}"
    said = {"dbus-broker": "the bus is dbus-broker", "dbus-daemon": "the bus is dbus-daemon"}[bus]
    assert journal.count(said) == 1, journal[-3000:]
    assert "does not say which bus" not in journal, journal[-3000:]
    bus_log = box.run(["journalctl", "--no-pager", "-o", "cat", "-u", "dbus.service"]).stdout
    assert "GetStats" not in bus_log, f"the bus refused the service's question:\n{bus_log[-3000:]}"


# --- the largest call a bus passes -------------------------------------------------------

# One call of MIB MiB (a string of that size where Manager.Query takes a target) as this user,
# then a victim's call (GetAll on the root); prints {"error": the huge call's error name,
# "seconds": how long it took, "victim": the victim's seconds}. jeepney builds the message
# whole, as a client of any library would.
HUGE_SCRIPT = """
import json, sys, time
from jeepney import DBusAddress, new_method_call
from jeepney.io.blocking import open_dbus_connection
mib = int(sys.argv[1])
root = DBusAddress("@ROOT@", bus_name="@SERVICE@", interface="@MANAGER@")
conn = open_dbus_connection(bus="SYSTEM")
started = time.monotonic()
reply = conn.send_and_get_reply(new_method_call(root, "Query", "s", ("x" * (mib * 1024 * 1024 - 4096),)),
                                timeout=120)
took = time.monotonic() - started
error = reply.header.fields.get(4) if reply.header.message_type.value == 3 else None
started = time.monotonic()
props = DBusAddress("@ROOT@", bus_name="@SERVICE@", interface="org.freedesktop.DBus.Properties")
conn.send_and_get_reply(new_method_call(props, "GetAll", "s", ("@MANAGER@",)), timeout=30)
print(json.dumps({"error": error, "seconds": took, "victim": time.monotonic() - started}))
"""
# The largest message each bus passes: dbus-daemon's system bus stops at 32 MiB (its
# max_message_size); dbus-broker passes up to the protocol's 128 MiB.
HUGE_SIZES = {"dbus-daemon": (25, 31), "dbus-broker": (25, 60, 120)}
# What the service may hold for one call beyond its idle size: libdbus reads a message whole and
# copies its body out of the read buffer once (twice the message), plus the slack of the reads.
HUGE_SLACK_MIB = 8


def memory_kib(box: ct.Container, pid: str, field: str) -> int:
    status = box.run(["cat", f"/proc/{pid}/status"]).stdout
    return int(re.search(rf"^{field}:\s+(\d+) kB", status, re.M)[1])


@pytest.mark.parametrize("bus", BUSES)
def test_the_largest_call_a_bus_passes_leaves_the_service_running(request, deb, broker_deb, bus):  # pylint: disable=redefined-outer-name
    """An unprivileged user sends one call of 25 MiB and up to the largest the bus passes (120 MiB
    on dbus-broker, which passes 128 MiB), to the service as its unit runs it: each is refused
    (InvalidArgs), the service's peak stays within twice the call and a slack over idle (libdbus
    reads a message whole and copies it once; no limit of libdbus's can refuse it before without
    disconnecting the service from the bus), well under the unit's MemoryMax=, so the same
    process serves on and the next caller is answered within 1 s. Once a 120 MiB call had the
    service killed by its 128 MiB MemoryMax= on dbus-broker."""
    box = boot(request, bus, broker_deb if bus == "dbus-broker" else None)
    install_deb(box, deb)
    add_uplink(box)
    box.path("/usr/local/share/huge.py").write_text(HUGE_SCRIPT.replace("@ROOT@", harness.ROOT_PATH).replace(
        "@SERVICE@", SERVICE).replace("@MANAGER@", harness.MANAGER_IFACE))
    box.run(["useradd", "--no-create-home", "--user-group", "sender"])
    box.run(["systemctl", "start", "reachabilityd.service"], timeout=60)
    pid = unit_property(box, "reachabilityd.service", "MainPID")
    memory_max = int(unit_property(box, "reachabilityd.service", "MemoryMax"))
    idle = memory_kib(box, pid, "VmRSS")
    for mib in HUGE_SIZES[bus]:
        done = box.run(["python3", "/usr/local/share/huge.py", str(mib)], user="sender", check=False, timeout=300)
        journal = box.run(["journalctl", "--no-pager", "-o", "cat", "-u", "reachabilityd.service"]).stdout
        assert done.returncode == 0, f"{mib} MiB: {done.stdout[-2000:]}{done.stderr[-2000:]}\n{journal[-3000:]}"
        answer = json.loads(done.stdout)
        peak = memory_kib(box, pid, "VmHWM")
        print(f"{bus}: a {mib} MiB call refused in {answer['seconds']:.2f} s ({answer['error']}); the service's "
              f"peak {peak // 1024} MiB (idle {idle // 1024} MiB, MemoryMax {memory_max >> 20} MiB); "
              f"the next call {answer['victim'] * 1000:.0f} ms")
        assert answer["error"] == "org.freedesktop.DBus.Error.InvalidArgs", answer
        assert unit_property(box, "reachabilityd.service", "MainPID") == pid, \
            f"the service was restarted by a {mib} MiB call\n{journal[-3000:]}"
        assert unit_property(box, "reachabilityd.service", "NRestarts") == "0", journal[-3000:]
        bound = idle + (2 * mib + HUGE_SLACK_MIB) * 1024
        assert peak <= bound, f"{mib} MiB: the service peaked at {peak} KiB, over {bound} KiB"
        assert answer["victim"] < 1.0, f"the next call after a {mib} MiB call took {answer['victim']:.2f} s"
    # The bound for the largest message the bus may pass is well under the unit's limit.
    largest = 128 if bus == "dbus-broker" else 32
    assert idle * 1024 + (2 * largest + HUGE_SLACK_MIB) * (1 << 20) < memory_max * 0.9, \
        f"MemoryMax={memory_max >> 20} MiB leaves no room for a {largest} MiB message on {bus}"
