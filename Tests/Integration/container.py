"""A real systemd for the integration tests: a container booted from an
overlay of this machine's own root.

The machine running the tests may not run systemd itself (a CI runner's
PID 1 is often something else), but everything it has installed -- systemd,
dbus-daemon, NetworkManager, the Swift toolchain -- is on its root file
system. :class:`Container` mounts a tmpfs, an overlay with ``/`` as its lower
layer and the tmpfs as its upper layer, and boots it with
``systemd-nspawn --boot`` (private network, nothing registered with a host
systemd). Every change made inside goes to the tmpfs and is thrown away.

* ``start()`` boots it and waits (bounded) until systemd says ``running``
  or ``degraded``.
* ``run(...)`` runs a command inside with ``nsenter`` into every namespace of
  the container's PID 1, with a clean environment.
* ``reboot()`` powers it off and boots it again on the same overlay (what
  was installed stays): how dbus-broker becomes the system bus.
* ``close()`` always ends it: ``systemctl poweroff``, then SIGKILL of
  ``systemd-nspawn`` by its PID if it has not gone within a deadline, then
  the mounts are unmounted (lazily if busy) and the directory removed. It is
  also registered with ``atexit``, so an interrupted run cleans up too.

Needs root, ``systemd-nspawn`` (Debian package systemd-container), ``nsenter``
(util-linux) and overlayfs. :func:`requirements` lists what is missing.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterable, Optional, Sequence

import harness

BOOT_TIMEOUT = 60.0
POWEROFF_TIMEOUT = 30.0
ENVIRONMENT = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8", "HOME=/root", "SYSTEMD_PAGER=",
               "SYSTEMD_COLORS=0", "TERM=dumb"]

_OPEN: list = []


@atexit.register
def _close_open() -> None:
    for container in list(_OPEN):
        with contextlib.suppress(Exception):
            container.close()


def requirements() -> list:
    """What this machine lacks to boot a container (an empty list when nothing)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root")
    for name, package in (("systemd-nspawn", "systemd-container"), ("nsenter", "util-linux"),
                          ("systemctl", "systemd")):
        if harness.tool(name) is None:
            missing.append(f"the {name} command (Debian package {package})")
    with contextlib.suppress(OSError):
        if "overlay" not in Path("/proc/filesystems").read_text():
            subprocess.run(["modprobe", "overlay"], capture_output=True, check=False)
    return missing


class ContainerError(AssertionError):
    """The container could not be booted or a command in it failed; the message has the output."""


class Container:
    """One booted systemd container on an overlay of ``/`` (see the module's text)."""

    def __init__(self, binds: Iterable[Path] = (), name: str = "reachct") -> None:
        self.binds = [Path(b).resolve() for b in binds]
        self.name = name
        self.base: Optional[Path] = None
        self.nspawn: Optional[subprocess.Popen] = None
        self.leader: Optional[int] = None
        self._mounted: list = []
        self._boots = 0

    # --- life cycle ----------------------------------------------------------

    def start(self) -> "Container":
        _OPEN.append(self)
        self.base = Path(tempfile.mkdtemp(prefix="reach-container-"))
        overlay, root = self.base / "ovl", self.base / "root"
        overlay.mkdir()
        root.mkdir()
        self._mount(["-t", "tmpfs", "-o", "size=4G,mode=755", "reachovl", str(overlay)], overlay)
        (overlay / "upper").mkdir()
        (overlay / "work").mkdir()
        self._mount(["-t", "overlay", "reachroot", "-o",
                     f"lowerdir=/,upperdir={overlay}/upper,workdir={overlay}/work", str(root)], root)
        # The machine's policy-rc.d (a container image's) would stop maintainer scripts from
        # starting anything: inside, packages behave as on an installed system.
        with contextlib.suppress(FileNotFoundError):
            (root / "usr/sbin/policy-rc.d").unlink()
        # A machine id of its own: journald and dbus want one.
        (root / "etc/machine-id").write_text("")
        self._boot()
        return self

    def _mount(self, arguments: Sequence[str], target: Path) -> None:
        done = subprocess.run(["mount", *arguments], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise harness.HarnessError(f"mount {' '.join(arguments)} failed: {done.stderr.strip()}")
        self._mounted.append(target)

    def _boot(self) -> None:
        assert self.base is not None
        self._boots += 1
        log = open(self.base / f"nspawn-{self._boots}.log", "wb")  # pylint: disable=consider-using-with
        command = [harness.need_tool("systemd-nspawn"), "-D", str(self.base / "root"), "--boot",
                   "--private-network", "--register=no", "--keep-unit", "--console=pipe",
                   "-M", self.name, *[f"--bind={b}" for b in self.binds]]
        self.nspawn = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,  # pylint: disable=consider-using-with
                                       stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + BOOT_TIMEOUT
        self.leader = None
        while time.monotonic() < deadline:
            if self.nspawn.poll() is not None:
                raise ContainerError(f"systemd-nspawn exited with {self.nspawn.returncode}:\n{self.nspawn_log()}")
            if self.leader is None:
                self.leader = self._child_systemd()
            if self.leader is not None:
                state = self.run(["systemctl", "is-system-running"], check=False, timeout=10).stdout.strip()
                if state in ("running", "degraded"):
                    return
            time.sleep(0.2)
        raise ContainerError(f"the container did not reach running within {BOOT_TIMEOUT:.0f} s:\n"
                             f"{self.nspawn_log()}")

    def _child_systemd(self) -> Optional[int]:
        assert self.nspawn is not None
        done = subprocess.run(["pgrep", "-P", str(self.nspawn.pid), "-x", "systemd"],
                              capture_output=True, text=True, check=False)
        pids = done.stdout.split()
        return int(pids[0]) if pids else None

    def _poweroff(self, immediate: bool = False) -> None:
        if self.nspawn is None:
            return
        if self.nspawn.poll() is None and self.leader is not None:
            # SIGRTMIN+4 is systemd's "start poweroff.target": the shutdown `systemctl poweroff`
            # asks for, without its call over D-Bus and logind's check for inhibitors. For a
            # container thrown away, SIGRTMIN+14 ("immediately power off"): its systemd ends at
            # once, and the kernel ends every process of its PID namespace with it. An orderly
            # shutdown waited 10 s for any process a test ran inside with popen and stopped:
            # stopped, it stays a zombie whose parent (nsenter) is outside the container, which
            # the container's systemd cannot reap.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.leader, signal.SIGRTMIN + (14 if immediate else 4))
        try:
            self.nspawn.wait(timeout=POWEROFF_TIMEOUT)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.nspawn.pid, signal.SIGKILL)
            self.nspawn.wait(timeout=10)
        self.nspawn = None
        self.leader = None

    def reboot(self) -> None:
        """Power off and boot again on the same overlay (what was installed stays)."""
        self._poweroff()
        self._boot()

    def close(self) -> None:
        try:
            self._poweroff(immediate=True)
        finally:
            for target in reversed(self._mounted):
                done = subprocess.run(["umount", str(target)], capture_output=True, check=False)
                if done.returncode != 0:
                    subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)
            self._mounted.clear()
            if self.base is not None:
                for entry in sorted(self.base.rglob("*"), reverse=True):
                    with contextlib.suppress(OSError):
                        entry.rmdir() if entry.is_dir() and not entry.is_symlink() else entry.unlink()
                with contextlib.suppress(OSError):
                    self.base.rmdir()
            if self in _OPEN:
                _OPEN.remove(self)

    # --- inside --------------------------------------------------------------

    def command(self, argv: Sequence[str], user: Optional[str] = None) -> list:
        """The host command line that runs ``argv`` inside (as ``user`` when given)."""
        if self.leader is None:
            raise ContainerError("the container is not running")
        prefix = ["nsenter", "-t", str(self.leader), "-a", "--", "env", "-i", *ENVIRONMENT]
        if user is not None:
            prefix += ["setpriv", f"--reuid={user}", f"--regid={user}", "--init-groups", "--"]
        return [*prefix, *argv]

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float = 60,
            user: Optional[str] = None, input: Optional[str] = None) -> subprocess.CompletedProcess:  # pylint: disable=redefined-builtin
        """Runs a command inside and waits for it (bounded); with ``check``, a failure raises
        with the command's output."""
        try:
            done = subprocess.run(self.command(argv, user), capture_output=True, text=True, check=False,
                                  timeout=timeout, input=input)
        except subprocess.TimeoutExpired as error:
            raise ContainerError(f"{shlex.join(argv)} did not finish within {timeout} s;"
                                 f" output so far:\n{error.stdout or ''}{error.stderr or ''}") from None
        if check and done.returncode != 0:
            raise ContainerError(f"{shlex.join(argv)} exited with {done.returncode}:\n"
                                 f"{done.stdout}{done.stderr}")
        return done

    def sh(self, script: str, **options) -> subprocess.CompletedProcess:
        """Runs a shell script inside."""
        return self.run(["sh", "-ec", script], **options)

    def popen(self, argv: Sequence[str], user: Optional[str] = None, **options) -> subprocess.Popen:
        """Starts a command inside without waiting; stop it with :meth:`stop`."""
        return subprocess.Popen(self.command(argv, user), start_new_session=True, **options)  # pylint: disable=consider-using-with

    @staticmethod
    def stop(process: subprocess.Popen) -> None:
        """Stops a process started by :meth:`popen`, by its PID: first the command inside, so
        that nsenter (outside the container) reaps it and ends; then whatever of its session is
        left. Ended together, nsenter could go first, and the command's zombie was handed to this
        machine's PID 1 (which may reap late): the container's PID namespace, and so its
        shutdown, waited for it (10 s here)."""
        if process.poll() is None:
            children = Path(f"/proc/{process.pid}/task/{process.pid}/children")
            with contextlib.suppress(OSError):
                for child in children.read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(child), signal.SIGTERM)
            try:
                process.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)

    def path(self, inside: str) -> Path:
        """A path inside the container, as seen from the host (through the overlay)."""
        assert self.base is not None
        return self.base / "root" / inside.lstrip("/")

    # --- what a failure report shows ----------------------------------------

    def nspawn_log(self) -> str:
        if self.base is None:
            return ""
        return "\n".join(p.read_text(errors="replace")[-4000:] for p in sorted(self.base.glob("nspawn-*.log")))

    def logs(self) -> list:
        journal = ""
        if self.leader is not None and self.nspawn is not None and self.nspawn.poll() is None:
            with contextlib.suppress(Exception):
                journal = self.run(["journalctl", "-b", "--no-pager", "-n", "150", "-o", "short-monotonic"],
                                   check=False, timeout=20).stdout
        return [("container journal (last 150 lines)", journal), ("systemd-nspawn", self.nspawn_log())]


def download_dbus_broker(directory: Path) -> Path:
    """Debian's dbus-broker package, fetched on the host once (the container has no network)."""
    directory.mkdir(parents=True, exist_ok=True)
    found = sorted(directory.glob("dbus-broker_*.deb"))
    if found:
        return found[-1]
    done = subprocess.run(["apt-get", "download", "dbus-broker"], cwd=directory, capture_output=True,
                          text=True, check=False, timeout=300)
    found = sorted(directory.glob("dbus-broker_*.deb"))
    if done.returncode != 0 or not found:
        raise harness.HarnessError(f"apt-get download dbus-broker failed ({done.returncode}):\n"
                                   f"{done.stdout}{done.stderr}")
    return found[-1]


def install_build(box: Container, binaries: Path, units: Iterable[str] = ()) -> None:
    """The build under test installed in the container as install.sh lays it out (prefix
    /usr), without a release build: the daemon and reachctl from ``binaries`` (the debug build
    runs there: the container's root is this machine's, toolchain included), the bus's policy
    and activation file, the user, the man pages, and the units of ``data/`` named in ``units``
    beside reachabilityd.service. Then systemd and the bus reload."""
    repo = harness.REPO
    service = harness.SERVICE
    files = {
        "/usr/libexec/reachabilityd": (binaries / "reachabilityd", 0o755),
        "/usr/bin/reachctl": (binaries / "reachctl", 0o755),
        f"/usr/share/dbus-1/system.d/{service}.conf": (repo / "dbus" / f"{service}.conf", 0o644),
        f"/usr/share/dbus-1/system-services/{service}.service": (repo / "dbus" / f"{service}.service", 0o644),
        "/usr/lib/sysusers.d/reachabilityd.conf": (repo / "data" / "reachabilityd.sysusers.conf", 0o644),
        **{f"/usr/lib/systemd/system/{unit}": (repo / "data" / unit, 0o644)
           for unit in ("reachabilityd.service", *units)},
        # The units' Documentation= (systemd-analyze verify looks for the pages).
        **{f"/usr/share/man/man{page.suffix[1:]}/{page.name}": (page, 0o644)
           for page in (repo / "docs" / "man").glob("*.[1-8]")},
    }
    for inside, (source, mode) in files.items():
        target = box.path(inside)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
        target.chmod(mode)
    box.run(["systemd-sysusers", "/usr/lib/sysusers.d/reachabilityd.conf"])
    box.run(["systemctl", "daemon-reload"])
    box.run(["busctl", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
             "ReloadConfig"])
