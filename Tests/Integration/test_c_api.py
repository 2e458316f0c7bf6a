"""The C API (libreachability-sc, <SystemConfiguration/SystemConfiguration.h>) from C and from Python's ctypes.

The library is installed into a scratch prefix by ``capi/install-library.sh`` (the script
``install.sh`` uses), and everything here goes through what that installs: the C test
program ``capi/tests/reachability-test.c`` is compiled with the installed header and
``pkg-config --cflags --libs reachability-sc`` only, with ``-Wall -Wextra -Werror`` under
AddressSanitizer (leaks included), and ``capi/tests/reachability_ctypes.py`` loads the
installed library. Both print the same lines.

- The header compiles alone with gcc and clang, as C99, C11 and C++, and with clang the
  toolchain's own Core Foundation and dispatch headers (``-DSC_USE_SYSTEM_HEADERS``).
- ``basics``: references by address, name and pair, their flags, ``CFRetain``/``CFRelease``
  and ``CFGetTypeID``, the errors Apple's functions give, a counted context balanced.
- ``watch``: in the kernel lab's namespace A beside the daemon (and with no bus: in-process),
  the internet, the gateway by address, the pair uplink address -> gateway and localhost,
  scheduled on a dispatch queue or on the main run loop: a callback when kveth0 loses
  carrier and when it gets it back, on that queue or run loop's thread; after unscheduling,
  every reference released and every retain of the contexts released.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import harness
from harness import CHANGE_TIMEOUT, STOP_TIMEOUT
from test_kernel_backend import (  # pylint: disable=unused-import  # fixtures are found by name
    GATEWAY_V4, UPLINK_PEER, UPLINK_V4, daemon_args, kernel_lab_without_carrier, online)

REPO = Path(__file__).resolve().parents[2]
CAPI = REPO / "capi"
LIBRARY = harness.daemon_binary().parent / "libSystemConfigurationC.so"
LSAN_SUPPRESSIONS = REPO / "Tests" / "sanitizer-suppressions" / "lsan.supp"
NO_BUS = "unix:path=/nonexistent/c-api-test-bus"
REACHABLE, IS_DIRECT = 1 << 1, 1 << 17
BUILD_TIMEOUT = 1800
HEADER_ONLY = '#include <SystemConfiguration/SystemConfiguration.h>\nint main(void) { return SCError(); }\n'


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The C API installed into a scratch prefix; the C test program built against it."""
    # `swift build --build-tests` does not link a dynamic library product: built here, beside
    # the daemon under test (an up-to-date library is only linked, if that).
    configuration = "release" if LIBRARY.parent.name == "release" else "debug"
    built = subprocess.run(["swift", "build", "-c", configuration, "--product", "SystemConfigurationC"], cwd=REPO,
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT)
    assert built.returncode == 0 and LIBRARY.exists(), f"the C API's library does not build:\n{built.stdout[-3000:]}"
    prefix = tmp_path_factory.mktemp("c-api-prefix")
    subprocess.run([str(CAPI / "install-library.sh"), "--library", str(LIBRARY), "--prefix", str(prefix)],
                   check=True, capture_output=True)
    env = dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "reachability-sc"], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    program = prefix / "reachability-test"
    build = subprocess.run(
        ["gcc", "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-Wall", "-Wextra", "-Werror", "-g",
         "-fsanitize=address", "-fno-omit-frame-pointer", str(CAPI / "tests" / "reachability-test.c"), *flags,
         "-lpthread", "-o", str(program)], capture_output=True, text=True)
    assert build.returncode == 0, f"the C test program does not build:\n{build.stderr}"
    return {"prefix": prefix, "env": env, "program": program}


def compile_header(installed, compiler: list, source: str = HEADER_ONLY, extra: tuple = ()) -> None:
    """Compiles ``source`` with the installed header only; fails with the compiler's words."""
    cflags = subprocess.run(["pkg-config", "--cflags", "reachability-sc"], env=installed["env"], check=True,
                            capture_output=True, text=True).stdout.split()
    done = subprocess.run([*compiler, "-Wall", "-Wextra", "-Werror", *cflags, *extra, "-fsyntax-only", "-"],
                          input=source, capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(compiler)}: the header does not compile:\n{done.stderr}"


@pytest.mark.parametrize("compiler", [
    ["gcc", "-x", "c", "-std=c99", "-pedantic"], ["gcc", "-x", "c", "-std=c11"],
    ["g++", "-x", "c++", "-std=c++17"], ["clang", "-x", "c", "-std=c99", "-pedantic"],
    ["clang", "-x", "c", "-std=gnu11"]])
def test_the_header_compiles_alone(installed, compiler):
    if shutil.which(compiler[0]) is None:
        pytest.fail(f"{compiler[0]} is not installed (the Swift toolchain brings clang; gcc is in test-all.sh)")
    compile_header(installed, compiler)


# As code written for Apple's header uses it, with that header alone: Core Foundation's umbrella
# brings <stdlib.h> and <string.h> (and Darwin's <string.h> <strings.h>), so such code calls
# bzero, malloc and free with no include of its own; and it tests the flags' old names.
AS_WRITTEN = """#include <SystemConfiguration/SystemConfiguration.h>
int main(void) {
    struct sockaddr_in zero;
    bzero(&zero, sizeof(zero));
    memset(&zero, 0, sizeof(zero));
    SCNetworkConnectionFlags *old = malloc(sizeof *old);
    if (old == NULL) return 1;
    *old = kSCNetworkFlagsReachable | kSCNetworkFlagsIsDirect;
    int same = (*old & kSCNetworkFlagsReachable) == kSCNetworkReachabilityFlagsReachable
        && (uint32_t)kSCNetworkFlagsConnectionAutomatic == (uint32_t)kSCNetworkReachabilityFlagsConnectionOnTraffic
        && (uint32_t)kSCNetworkFlagsIsLocalAddress == (uint32_t)kSCNetworkReachabilityFlagsIsLocalAddress;
    free(old);
    return same ? 0 : 1;
}
"""


@pytest.mark.parametrize("compiler", [["gcc", "-x", "c", "-std=gnu11"], ["clang", "-x", "c", "-std=gnu11"],
                                      ["g++", "-x", "c++", "-std=gnu++17"]])
def test_code_as_written_for_apples_header(installed, compiler):
    if shutil.which(compiler[0]) is None:
        pytest.fail(f"{compiler[0]} is not installed (the Swift toolchain brings clang; gcc is in test-all.sh)")
    compile_header(installed, compiler, AS_WRITTEN.replace("= malloc", "= (SCNetworkConnectionFlags *)malloc"))


def test_the_header_with_the_toolchains_core_foundation_and_dispatch(installed):
    """clang -fblocks -DSC_USE_SYSTEM_HEADERS: the toolchain's CFRunLoop.h and dispatch.h, with ours."""
    swift_include = subprocess.run(["pkg-config", "--variable=swiftincludedir", "reachability-sc"],
                                   env=installed["env"], check=True, capture_output=True, text=True).stdout.strip()
    assert Path(swift_include, "CoreFoundation", "CFRunLoop.h").exists(), swift_include
    source = ("#include <SystemConfiguration/SystemConfiguration.h>\n"
              "int main(void) { dispatch_queue_t q = dispatch_get_main_queue(); CFRunLoopRef l = CFRunLoopGetMain();"
              " (void)q; (void)l; return SCNetworkReachabilityScheduleWithRunLoop(0, l, kCFRunLoopDefaultMode); }\n")
    compile_header(installed, ["clang", "-x", "c", "-std=gnu11", "-fblocks"], source,
                   ("-DSC_USE_SYSTEM_HEADERS", f"-I{swift_include}"))


def sanitizer_env(env: dict) -> dict:
    return dict(env, ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=23",
                LSAN_OPTIONS=f"suppressions={LSAN_SUPPRESSIONS}:print_suppressions=0")


def program_argv(installed, language: str) -> list:
    if language == "c":
        return [str(installed["program"])]
    return [sys.executable, str(CAPI / "tests" / "reachability_ctypes.py"), str(installed["prefix"] / "lib")]


@pytest.mark.parametrize("language", ["c", "ctypes"])
def test_basics_in_process(installed, language):
    """References by address, name and pair, flags, CFRetain/CFRelease, errors, contexts (no daemon)."""
    env = sanitizer_env(dict(installed["env"], DBUS_SYSTEM_BUS_ADDRESS=NO_BUS))
    done = subprocess.run([*program_argv(installed, language), "basics"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and "basics ok" in done.stdout, (
        f"{language} basics exited {done.returncode}:\n{done.stdout}\n{done.stderr}")


class Watcher:
    """The C program or the ctypes script watching in namespace A; its lines read by a thread."""

    def __init__(self, lab, installed, language: str, mode: str, scheduling: str):
        self.name = f"{language} ({mode}, {scheduling})"
        env = dict(installed["env"])
        env.pop("DBUS_SESSION_BUS_ADDRESS", None)
        env["DBUS_SYSTEM_BUS_ADDRESS"] = lab.bus.address if mode == "daemon" else NO_BUS
        if mode == "daemon":
            env["REACHABILITY_MODE"] = "daemon"
        self.log = lab.directory / f"c-api-{language}-{mode}-{scheduling}.log"
        argv = [*harness.Namespaces.exec_argv(lab.ns_a), *program_argv(installed, language),
                "watch", scheduling, GATEWAY_V4, UPLINK_V4]
        with open(self.log, "ab") as log:
            self.popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                          env=sanitizer_env(env), start_new_session=True)
        self.lines: list = []
        self.queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.popen.stdout:
            self.queue.put(raw.decode(errors="replace").rstrip("\n"))
        self.queue.put(None)

    def describe(self) -> str:
        shown = "\n".join(f"    {line}" for line in self.lines[-30:])
        return f"{self.name}; lines so far:\n{shown}\n  its stderr:\n{harness.tail(self.log, 40)}"

    def events(self, event: str) -> list:
        found = []
        for line in self.lines:
            words = line.split(" ")
            if words[0] == event:
                found.append((words[1], int(words[2].split("=", 1)[1], 16)))
        return found

    def wait_for(self, event: str, expected: dict, what: str, timeout: float = CHANGE_TIMEOUT) -> None:
        """Until the latest ``event`` line of each label carries the expected flags."""
        deadline = time.monotonic() + timeout
        while True:
            latest = dict(self.events(event))
            if all(latest.get(label) == flags for label, flags in expected.items()):
                return
            try:
                line = self.queue.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                line = None
            if line is None:
                if time.monotonic() >= deadline or self.popen.poll() is not None:
                    raise harness.WaitTimeout(f"{what}: expected {expected}, have {latest}; {self.describe()}")
                continue
            self.lines.append(line)

    def stop(self) -> int:
        """Sends "stop"; its exit status (0: unscheduled, released, balanced, no leak)."""
        self.popen.stdin.write(b"stop\n")
        self.popen.stdin.close()
        try:
            status = self.popen.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            status = self.popen.wait()
        while (line := self.queue.get(timeout=STOP_TIMEOUT)) is not None:
            self.lines.append(line)
        return status

    def kill(self) -> None:
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(timeout=STOP_TIMEOUT)


@pytest.mark.parametrize("language", ["c", "ctypes"])
def test_callbacks_on_a_queue_and_a_run_loop_when_the_carrier_drops(online, installed, language):
    """From the daemon and in-process, on a dispatch queue and on the main run loop: the flags
    once scheduled, a callback for the internet, the address and the pair when kveth0 loses
    carrier and when it gets it back; then unscheduled, released and balanced."""
    lab = online.lab
    runs = [Watcher(lab, installed, language, mode, scheduling)
            for mode in ("daemon", "in-process") for scheduling in ("queue", "runloop")]
    try:
        for watcher in runs:
            watcher.wait_for("scheduled", {"all": 0}, "scheduled")
            flags = dict(watcher.events("flags"))
            assert flags["internet"] == REACHABLE and flags["address"] == REACHABLE | IS_DIRECT, watcher.describe()
            assert flags["pair"] & REACHABLE, watcher.describe()
        connected = {w.name: dict(w.events("flags")) for w in runs}
        lab.set_peer(UPLINK_PEER, False)
        for watcher in runs:
            watcher.wait_for("callback", {"internet": 0, "address": 0, "pair": 0}, "callbacks for the carrier loss")
        lab.set_peer(UPLINK_PEER, True)
        for watcher in runs:
            expected = {label: connected[watcher.name][label] for label in ("internet", "address", "pair")}
            watcher.wait_for("callback", expected, "callbacks for the carrier back")
        for watcher in runs:
            status = watcher.stop()
            assert status == 0 and ("all", 0) in watcher.events("stopped"), (
                f"exit status {status} (23: AddressSanitizer): {watcher.describe()}")
    finally:
        for watcher in runs:
            watcher.kill()


@pytest.mark.parametrize("language", ["c", "ctypes"])
def test_the_service_leaving_is_a_callback_not_the_last_answer(online, installed, language):
    """From the daemon, on a queue and on the run loop: the daemon stops (nothing starts it
    again here) and every scheduled reference is called back with flags 0 (Apple's flags have no
    "unknown"; the last answer must not stay as if it held), GetFlags then says 0 too; started
    again, the answer is back. (The library once ignored the service's departure: the internet
    stayed reachable for as long as it was away.)"""
    lab = online.lab
    runs = [Watcher(lab, installed, language, "daemon", scheduling) for scheduling in ("queue", "runloop")]
    try:
        for watcher in runs:
            watcher.wait_for("scheduled", {"all": 0}, "scheduled")
            assert dict(watcher.events("flags"))["internet"] == REACHABLE, watcher.describe()
        online.daemon.stop()
        for watcher in runs:
            watcher.wait_for("callback", {"internet": 0, "address": 0, "pair": 0},
                             "callbacks with flags 0 once the daemon left")
        online.daemon.start()
        for watcher in runs:
            watcher.wait_for("callback", {"internet": REACHABLE}, "the answer back with the daemon")
        for watcher in runs:
            status = watcher.stop()
            assert status == 0, f"exit status {status}: {watcher.describe()}"
    finally:
        for watcher in runs:
            watcher.kill()
