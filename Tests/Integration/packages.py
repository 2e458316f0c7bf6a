"""The Debian packages under test, built once per run, as a distribution builds them: from the
source package (``dpkg-source -b`` of the checkout, its Swift dependencies vendored by
``debian/vendor-swift-deps``), unpacked and built with ``dpkg-buildpackage`` in a network
namespace of its own (``unshare -n``: only a loopback that is down) and without this machine's
git configuration (no ``url.insteadOf`` that could lead to a local copy of the dependencies'
repositories). One build serves every test of the package, and is itself the test that the
source package builds offline (``test_systemd.py``); ``$REACH_TEST_DEB`` names a ready .deb
instead (the other packages are then taken from beside it). lintian runs on the result.

The conftest's session fixtures (``deb``, ``gio_deb``, ``library_debs``) call :func:`built`.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

import harness

REPO = harness.REPO
OUT = REPO / ".build" / "deb"
# A package build from scratch (the release build of the daemon and of the C library) takes
# about 4 minutes on 2 cores; a build still running after this is stuck, and says where.
BUILD_TIMEOUT = 1500
LIBRARY_PACKAGES = ("libreachability-sc1", "libreachability-sc-dev")
GIO_PACKAGE = "reachabilityd-gio-module"
TOOLS = ("dpkg-source", "dpkg-buildpackage", "dh", "lintian", "unshare", "swift", "git")


@dataclass
class SourceBuild:
    """What the build from the source package left: where, its log, the source tarball's
    listing, the pins of vendor/."""
    directory: Path
    log: str
    listing: list
    pins: list
    lintian: str


_BUILT: list = []


def build_logged(argv: list, cwd: Path, env: dict, log: Path, timeout: float = BUILD_TIMEOUT) -> str:
    """Runs a build with its output going to ``log`` as it is written, and returns it; fails with
    the log's tail when the build fails, or outlasts ``timeout`` (its whole session is then
    killed): a stuck build names where it stopped instead of taking the run's time."""
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            pytest.fail(f"{' '.join(map(str, argv[:6]))}: not done within {timeout} s; the end of {log}:\n"
                        f"{harness.tail(log, 60)}")
    text = log.read_text(errors="replace")
    assert process.returncode == 0, f"{' '.join(map(str, argv[:6]))} failed ({process.returncode}):\n{text[-6000:]}"
    return text


def built() -> SourceBuild:
    """The packages built from the source package, offline (once per run)."""
    if _BUILT:
        return _BUILT[0]
    from conftest import need  # pylint: disable=import-outside-toplevel
    need([f"the {name} command" for name in TOOLS if harness.tool(name) is None]
         + ([] if os.geteuid() == 0 else ["root (unshare -n)"]))
    work = OUT / "source"
    shutil.rmtree(work, ignore_errors=True)
    tree = work / "reachabilityd"
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                             capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        if (REPO / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, tree / name)
    vendored = subprocess.run(["debian/vendor-swift-deps"], cwd=tree, capture_output=True, text=True,
                              timeout=900, check=False)
    assert vendored.returncode == 0, vendored.stdout + vendored.stderr
    made = subprocess.run(["dpkg-source", "-b", "reachabilityd"], cwd=work, capture_output=True, text=True,
                          timeout=300, check=False)
    assert made.returncode == 0, made.stdout + made.stderr
    [dsc] = list(work.glob("reachabilityd_*.dsc"))
    [tarball] = list(work.glob("reachabilityd_*.tar.*"))
    listing = subprocess.run(["tar", "-tf", str(tarball)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    shutil.rmtree(tree)
    subprocess.run(["dpkg-source", "-x", dsc.name, "extracted"], cwd=work, capture_output=True, check=True)
    home = work / "home"
    home.mkdir()
    swift_dir = str(Path(harness.tool("swift")).resolve().parent)
    environment = ["env", "-i", f"HOME={home}", "GIT_CONFIG_NOSYSTEM=1", "LANG=C.UTF-8",
                   f"PATH={swift_dir}:/usr/bin:/bin:/usr/sbin:/sbin", f"REACHABILITYD_DEB_DIR={work}"]
    gitconfig = subprocess.run(["unshare", "-n", *environment, "git", "config", "--get-regexp", "^url\\."],
                               capture_output=True, text=True, check=False)
    assert not gitconfig.stdout.strip(), f"git still rewrites URLs: {gitconfig.stdout}"
    log = build_logged(["unshare", "-n", *environment, "dpkg-buildpackage", "-us", "-uc", "-b"],
                       work / "extracted", dict(os.environ), work / "build.log")
    [changes] = list(work.glob("reachabilityd_*.changes"))
    lintian = subprocess.run(["lintian", "--pedantic", "--display-info", "--display-experimental", str(changes)],
                             capture_output=True, text=True, timeout=600, check=False)
    (work / "lintian.txt").write_text(lintian.stdout + lintian.stderr)
    pins = (work / "extracted" / "vendor" / "pins").read_text().split("\n")
    _BUILT.append(SourceBuild(work, log, listing, pins, lintian.stdout + lintian.stderr))
    return _BUILT[0]


def deb_path() -> Path:
    """The reachabilityd .deb: ``$REACH_TEST_DEB``, or the one built from the source package."""
    if os.environ.get("REACH_TEST_DEB"):
        return Path(os.environ["REACH_TEST_DEB"]).resolve()
    [package] = list(built().directory.glob("reachabilityd_*.deb"))
    return package


def beside(deb: Path, name: str) -> Path:
    """The one .deb of package ``name`` built with ``deb`` (in its directory)."""
    debs = sorted(deb.parent.glob(f"{name}_*.deb"))
    assert len(debs) == 1, f"expected one {name}_*.deb beside {deb.name} in {deb.parent}: {debs}"
    return debs[0]
