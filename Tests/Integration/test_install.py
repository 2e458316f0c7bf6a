"""``./install.sh``, the one install command, and its result run as installed.

* Into a staging root (``DESTDIR``, prefix /usr): every file where a
  distribution puts it, the activation file and the unit naming
  /usr/libexec/reachabilityd, and both binaries free of the Swift runtime's
  shared libraries (static by default), within their size budgets.
* Into a stage as the prefix itself: a real dbus-daemon of type ``system``
  (Debian's default system policy, plus the stage's ``system.d`` and
  ``system-services`` directories) loads the staged policy; the first call
  activates the staged daemon through the staged activation file (there is
  no systemd here, so the bus runs its ``Exec=`` line, which install.sh wrote
  with the prefix); the staged ``reachctl`` answers through it, as ``nobody``
  too, and ``reachctl doctor`` says it works. The staged GIO module, its
  cache refreshed with ``gio-querymodules`` as install.sh does, is the
  default GNetworkMonitor of a GLib program given that directory, and its
  first read activates the staged daemon.

The first build is a release build with the static Swift runtime (minutes).
"""

import json
import os
import subprocess
from pathlib import Path

import pytest

import harness
from conftest import require

REPO = harness.REPO
SERVICE = harness.SERVICE
INSTALL_TIMEOUT = 3600
# Budgets for the installed (stripped, static) binaries; see README, "Installing".
MAX_REACHCTL = 25 * 1000 * 1000
MAX_DAEMON = 15 * 1000 * 1000

EXPECTED_FILES = {
    "bin/reachctl": 0o755,
    "libexec/reachabilityd": 0o755,
    "share/man/man1/reachctl.1": 0o644,
    "share/man/man8/reachabilityd.8": 0o644,
    f"share/man/man5/{SERVICE}.5": 0o644,
    f"share/dbus-1/interfaces/{SERVICE}.xml": 0o644,
    "lib/systemd/system/reachabilityd-metrics-textfile.service": 0o644,
    "share/bash-completion/completions/reachctl": 0o644,
    "share/zsh/vendor-completions/_reachctl": 0o644,
    "share/fish/vendor_completions.d/reachctl.fish": 0o644,
    f"share/dbus-1/system.d/{SERVICE}.conf": 0o644,
    f"share/dbus-1/system-services/{SERVICE}.service": 0o644,
    "lib/systemd/system/reachabilityd.service": 0o644,
    "lib/systemd/system/reachability-wait@.service": 0o644,
    "lib/systemd/system/reachability-online.target": 0o644,
    "lib/systemd/system/reachability-unmetered.target": 0o644,
    "lib/systemd/system/reachabilityd-units.service": 0o644,
    "lib/sysusers.d/reachabilityd.conf": 0o644,
}

SYSTEM_POLICY = harness.SYSTEM_POLICY


def gio_module_path() -> str:
    """The GIO module's path relative to the prefix /usr (pkg-config's giomoduledir)."""
    directory = subprocess.run(["pkg-config", "--variable=giomoduledir", "gio-2.0"], capture_output=True, text=True,
                               check=True).stdout.strip()
    return os.path.relpath(directory, "/usr") + "/libgioreachabilityd.so"


EXPECTED_FILES[gio_module_path()] = 0o644


def install(*args, env=None):
    result = subprocess.run([str(REPO / "install.sh"), *args], cwd=REPO, capture_output=True, text=True,
                            timeout=INSTALL_TIMEOUT, env=dict(os.environ, **(env or {})), check=False)
    assert result.returncode == 0, f"install.sh failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def installed_files(root: Path) -> dict:
    return {str(p.relative_to(root)): p.stat().st_mode & 0o7777 for p in root.rglob("*") if p.is_file()}


def ini_value(path: Path, key: str) -> str:
    [line] = [line for line in path.read_text().splitlines() if line.startswith(key + "=")]
    return line.split("=", 1)[1]


@pytest.fixture(scope="module")
def stage():
    """install.sh with the stage as its prefix (files only: no user, no bus reload)."""
    require(root=False, networkmanager=False, daemon=False)
    directory = harness.short_tmpdir("reach-stage-")
    # The service's files; the C API's (libreachability-sc) are test_c_api.py's.
    install("--prefix", f"{directory}/usr", "--files-only", "--no-c-api")
    yield directory / "usr"
    if not os.environ.get("REACH_TEST_KEEP"):
        subprocess.run(["rm", "-rf", "--one-file-system", str(directory)], check=False)


def test_install_into_destdir_puts_every_file_in_place(stage, tmp_path):  # pylint: disable=redefined-outer-name,W0613
    """DESTDIR and the default prefix, as a package build runs it (the build is
    the stage's, already done)."""
    result = install("--no-c-api", env={"DESTDIR": str(tmp_path)})
    assert "installed (files only)" in result.stdout
    root = tmp_path / "usr"
    assert installed_files(root) == EXPECTED_FILES
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.iterdir()) == ["usr"]
    activation = root / f"share/dbus-1/system-services/{SERVICE}.service"
    assert ini_value(activation, "Exec") == "/usr/libexec/reachabilityd --system"
    assert ini_value(root / "lib/systemd/system/reachabilityd.service", "ExecStart") == \
        "/usr/libexec/reachabilityd --system"
    for installed, source in (("share/man/man1/reachctl.1", "docs/man/reachctl.1"),
                              (f"share/dbus-1/system.d/{SERVICE}.conf", f"dbus/{SERVICE}.conf"),
                              ("share/zsh/vendor-completions/_reachctl", "docs/completions/reachctl.zsh")):
        assert (root / installed).read_bytes() == (REPO / source).read_bytes(), installed


@pytest.mark.parametrize("binary, budget", [("bin/reachctl", MAX_REACHCTL), ("libexec/reachabilityd", MAX_DAEMON)])
def test_installed_binaries_need_no_swift_toolchain(stage, binary, budget):  # pylint: disable=redefined-outer-name
    path = stage / binary
    libraries = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True).stdout
    assert "libswift" not in libraries and "libFoundation" not in libraries, libraries
    size = path.stat().st_size
    print(f"{binary}: {size / 1e6:.1f} MB")
    assert size <= budget, f"{binary} is {size / 1e6:.1f} MB, over its {budget / 1e6:.0f} MB budget"
    version = subprocess.run([str(stage / "bin/reachctl"), "--version"], capture_output=True, text=True,
                             env={"PATH": "/usr/bin:/bin"}, check=False)
    assert version.returncode == 0 and version.stdout.strip(), version


@pytest.fixture
def staged_bus(stage, monkeypatch):  # pylint: disable=redefined-outer-name
    """A system bus with the stage's policy and activation file, and no daemon yet."""
    require(root=True, networkmanager=False, daemon=False)
    share = stage / "share" / "dbus-1"
    directory = harness.short_tmpdir("reach-staged-bus-")
    bus = harness.PrivateBus(directory, "system", policy=SYSTEM_POLICY, extra_config=(
        f"  <includedir>{share}/system.d</includedir>\n  <servicedir>{share}/system-services</servicedir>"))
    # What the bus hands to what it activates: the daemon's --system means this bus.
    monkeypatch.setenv("DBUS_SYSTEM_BUS_ADDRESS", f"unix:path={bus.socket}")
    bus.start()
    client = bus.client()
    started = []
    yield bus, client, started
    for pid in started:  # started by the bus, stopped by its PID
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            pass
    client.close()
    bus.stop()
    if not os.environ.get("REACH_TEST_KEEP"):
        subprocess.run(["rm", "-rf", str(directory)], check=False)


def staged_reachctl(stage, bus, *args, user=None):  # pylint: disable=redefined-outer-name
    argv = [str(stage / "bin" / "reachctl"), *args]
    if user:
        argv = [harness.need_tool("setpriv"), f"--reuid={user}", "--regid=nogroup", "--clear-groups", "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": bus.address})


def test_staged_service_is_activated_by_the_bus_and_answers(stage, staged_bus):  # noqa: W0621
    bus, client, started = staged_bus
    assert client.name_owner(SERVICE) is None
    activatable = client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME, "ListActivatableNames")[0]
    assert SERVICE in activatable

    doctor = staged_reachctl(stage, bus, "doctor")
    owner_pid = client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME, "GetConnectionUnixProcessID",
                            "s", (SERVICE,))[0] if client.name_owner(SERVICE) else None
    if owner_pid:
        started.append(owner_pid)
    assert doctor.returncode == 0, f"{doctor.stdout}\n{doctor.stderr}\n{harness.tail(bus.log)}"
    assert f"policy file      {stage}/share/dbus-1/system.d/{SERVICE}.conf" in doctor.stdout, doctor.stdout
    assert f"activation file  {stage}/share/dbus-1/system-services/{SERVICE}.service" in doctor.stdout
    assert "activatable      yes" in doctor.stdout
    assert "(started by this check)" in doctor.stdout
    assert doctor.stdout.endswith("reachabilityd works.\n"), doctor.stdout
    # The bus ran the staged daemon, as the staged activation file says.
    assert os.readlink(f"/proc/{owner_pid}/exe") == str(stage / "libexec" / "reachabilityd")

    # The staged policy lets an unprivileged user through; the answer is the daemon's.
    query = staged_reachctl(stage, bus, "--json", "--daemon", "query", "127.0.0.1", user="nobody")
    assert query.returncode == 0, query.stderr
    [answer] = [json.loads(line) for line in query.stdout.splitlines()]
    assert (answer["mode"], answer["flags"]) == (
        "daemon", harness.REACHABLE | harness.IS_LOCAL_ADDRESS | harness.IS_DIRECT), answer
    listed = staged_reachctl(stage, bus, "list")
    assert listed.returncode == 0 and listed.stdout, listed


def test_a_bus_without_the_policy_is_explained(tmp_path):
    """The daemon owns its name (root may), but the bus has not loaded the
    policy, so it refuses every call: reachctl and doctor say so in words."""
    require(root=True, networkmanager=False)
    bus = harness.PrivateBus(harness.short_tmpdir("reach-no-policy-"), "system", policy=SYSTEM_POLICY,
                             extra_config=f'  <policy user="root"><allow own="{SERVICE}"/></policy>')
    bus.start()
    client = bus.client()
    daemon = harness.Daemon(bus.address, tmp_path / "reachabilityd.log", args=["--system", "--backend", "kernel"])
    try:
        daemon.start(client)
        env = {"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": bus.address}
        reachctl = harness.daemon_binary().parent / "reachctl"
        query = subprocess.run([str(reachctl), "--daemon", "query", "127.0.0.1"], capture_output=True, text=True,
                               env=env, timeout=60, check=False)
        assert query.returncode == 2
        assert query.stderr.startswith("reachctl: the system bus refused the call to reachabilityd: its policy is "
                                       "not installed or not loaded (reachctl doctor says why)"), query.stderr
        doctor = subprocess.run([str(reachctl), "doctor"], capture_output=True, text=True, env=env, timeout=60,
                                check=False)
        assert doctor.returncode == 2
        assert "answers          no: org.freedesktop.DBus.Error.AccessDenied" in doctor.stdout, doctor.stdout
        assert "reachabilityd does not work: the bus refused the call: its policy" in doctor.stdout, doctor.stdout
    finally:
        daemon.stop()
        client.close()
        bus.stop()
        subprocess.run(["rm", "-rf", str(bus.directory)], check=False)


def test_staged_gio_module_is_glibs_network_monitor(stage, staged_bus):  # noqa: W0621
    """gio-querymodules lists the staged module for gio-network-monitor; a GLib program in
    Python that knows nothing of us, given that module directory, gets our monitor, and the
    module's first read starts the staged daemon."""
    bus, client, started = staged_bus
    modules = stage / Path(gio_module_path()).parent
    tool = subprocess.run(["pkg-config", "--variable=gio_querymodules", "gio-2.0"], capture_output=True, text=True,
                          check=True).stdout.strip()
    refresh = subprocess.run([tool, str(modules)], capture_output=True, text=True, check=False)
    assert refresh.returncode == 0, refresh.stderr
    cache = (modules / "giomodule.cache").read_text()
    assert "libgioreachabilityd.so: gio-network-monitor" in cache, cache
    assert client.name_owner(SERVICE) is None
    program = subprocess.run(["/usr/bin/python3", str(REPO / "gio" / "tests" / "monitor-test.py"), "127.0.0.1"],
                             capture_output=True, text=True, timeout=60, check=False,
                             env={"PATH": "/usr/bin:/bin", "DBUS_SYSTEM_BUS_ADDRESS": bus.address,
                                  "GIO_MODULE_DIR": str(modules)})
    if client.name_owner(SERVICE):
        started.append(client.call(harness.DBUS_NAME, harness.DBUS_PATH, harness.DBUS_NAME,
                                   "GetConnectionUnixProcessID", "s", (SERVICE,))[0])
    assert program.returncode == 0, program.stdout + program.stderr
    lines = program.stdout.splitlines()
    assert lines[0].split()[:2] == ["ready", "ReachabilitydNetworkMonitor"], program.stdout + program.stderr
    assert "reach sync 127.0.0.1 ok" in lines, program.stdout
    assert started, "the module's first read did not start the staged daemon"
