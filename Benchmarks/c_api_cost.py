#!/usr/bin/python3
"""What the C API costs: the library's size, what it loads, and a GetFlags from C (run as root).

    swift build -c release --product SystemConfigurationC   (and the daemon: swift build -c release)
    sudo /usr/bin/python3 Benchmarks/c_api_cost.py [--calls 5000] [--debug]

Installs libreachability-sc with ``capi/install-library.sh`` into a scratch prefix (as
``install.sh`` does), then prints: the library's file size, the Swift runtime installed beside
it (files and bytes), every shared library it loads (``ldd``), and from
``capi/tests/getflags-bench.c`` (built with the installed header and ``pkg-config``, -O2) the
time of the process's first ``SCNetworkReachabilityGetFlags``, of a GetFlags not scheduled
(a fresh answer each time) and of one while scheduled (the latest answer), p50 and p99 over
``--calls`` calls, through the daemon (``--backend kernel`` in a network namespace, on a private
system bus) and in-process (no bus). Timings on a loaded machine are noisy.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO / "Tests" / "Integration"))
sys.path.insert(0, str(HERE))

import harness  # noqa: E402
from kernel_flaps import NetnsDaemon  # noqa: E402

NO_BUS = "unix:path=/nonexistent/c-api-benchmark-bus"


def install(library: Path, prefix: Path) -> dict:
    subprocess.run([str(REPO / "capi" / "install-library.sh"), "--library", str(library), "--prefix", str(prefix),
                    "--strip"], check=True, stdout=subprocess.DEVNULL)
    return dict(os.environ, PKG_CONFIG_PATH=str(prefix / "lib" / "pkgconfig"))


def footprint(prefix: Path) -> None:
    library = prefix / "lib" / "libreachability-sc.so.1.0.0"
    runtime = sorted((prefix / "lib" / "reachability-sc").iterdir())
    print(f"  library: {library.stat().st_size / 1e6:.1f} MB ({library.name}, stripped as install.sh installs it)")
    print(f"  its Swift runtime: {len(runtime)} files, {sum(f.stat().st_size for f in runtime) / 1e6:.1f} MB")
    loaded = subprocess.run(["ldd", str(library)], check=True, capture_output=True, text=True).stdout.splitlines()
    names = [line.split()[0] for line in loaded if line.strip()]
    print(f"  loads {len(names)} shared libraries: {' '.join(names)}")


def build(env: dict, directory: Path) -> Path:
    program = directory / "getflags-bench"
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "reachability-sc"], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
    subprocess.run(["gcc", "-std=c99", "-D_POSIX_C_SOURCE=200809L", "-O2", "-Wall", "-Wextra", "-Werror",
                    str(REPO / "capi" / "tests" / "getflags-bench.c"), *flags, "-lpthread", "-o", str(program)],
                   check=True)
    return program


def run(label: str, argv: list, env: dict) -> None:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    words = dict(word.split("=", 1) for word in done.stdout.split() if "=" in word)
    if done.returncode != 0 or "scheduled-us-p50" not in words:
        print(f"  {label}: failed (exit {done.returncode})\n{done.stdout}\n{done.stderr[-2000:]}")
        return
    print(f"  {label}: first GetFlags {float(words['first-us']) / 1000:.1f} ms; not scheduled "
          f"p50 {words['unscheduled-us-p50']} µs, p99 {words['unscheduled-us-p99']} µs; scheduled "
          f"p50 {words['scheduled-us-p50']} µs, p99 {words['scheduled-us-p99']} µs")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=5000, help="GetFlags calls per measurement (default 5000)")
    parser.add_argument("--debug", action="store_true", help="the debug build's library and daemon")
    options = parser.parse_args()
    build_dir = REPO / ".build" / ("debug" if options.debug else "release")
    library = build_dir / "libSystemConfigurationC.so"
    binary = Path(os.environ.get("REACHABILITYD") or build_dir / "reachabilityd").resolve()
    if os.geteuid() != 0:
        sys.exit("c_api_cost: needs root (a network namespace)")
    for needed in (library, binary):
        if not needed.exists():
            sys.exit(f"c_api_cost: no {needed} (swift build -c release, or --debug)")

    with tempfile.TemporaryDirectory(prefix="reach-capi-") as scratch:
        prefix = Path(scratch)
        env = install(library, prefix)
        print(f"c_api_cost ({build_dir.name} build):")
        footprint(prefix)
        program = build(env, prefix)
        run("in-process", [str(program), str(options.calls)], dict(env, DBUS_SYSTEM_BUS_ADDRESS=NO_BUS))

        directory = harness.short_tmpdir("reach-capi-")
        namespaces = harness.Namespaces()
        bus = harness.PrivateBus(directory, "system")
        daemon = client = None
        try:
            bus.start()
            client = bus.client()
            netns = namespaces.create("capi")
            namespaces.ip(netns, "link", "set", "lo", "up")
            daemon = NetnsDaemon(netns, bus.address, directory / "reachabilityd.log",
                                 args=["--system", "--backend", "kernel"], binary=binary)
            daemon.start(client)
            run("through the daemon", [*harness.Namespaces.exec_argv(netns), str(program), str(options.calls)],
                dict(env, DBUS_SYSTEM_BUS_ADDRESS=bus.address, REACHABILITY_MODE="daemon"))
        finally:
            if client is not None:
                client.close()
            if daemon is not None:
                daemon.stop()
            bus.stop()
            namespaces.close()


if __name__ == "__main__":
    main()
