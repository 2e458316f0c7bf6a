#!/usr/bin/env bash
# The daemon under valgrind's memcheck through a scripted scenario on a private
# bus: 200 clients watching hosts and addresses and leaving without Release,
# Query, Refresh, bad input, then SIGTERM. Fails on any memcheck error or any
# definitely lost byte; prints the leak summary.
#
#   Tests/valgrind.sh      # as root
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind > /dev/null || { apt-get update -q && apt-get install -y -q valgrind; }
swift build --product reachabilityd
bin=$(swift build --show-bin-path)
log=$(mktemp /tmp/reach-valgrind-XXXXXX.log)
status=0
VALGRIND_LOG=$log REACHABILITYD="$bin/reachabilityd" /usr/bin/python3 - <<'PY' || status=$?
import os, signal, subprocess, sys
sys.path.insert(0, "Tests/Integration")
import harness
from harness import MANAGER_IFACE, ROOT_PATH, SERVICE, TARGET_IFACE
from test_hardening import churn, wait_no_children

lab = harness.PlainLab().start()
try:
    env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=lab.bus.address)
    with open(os.environ["VALGRIND_LOG"], "w") as log:
        daemon = subprocess.Popen(
            ["valgrind", "--leak-check=full", "--show-leak-kinds=definite", "--errors-for-leak-kinds=definite",
             "--error-exitcode=99", "--num-callers=30", os.environ["REACHABILITYD"], "--system", "--backend",
             "kernel"], env=env, stderr=log)
    lab.client.wait_for_name(SERVICE, 120)
    churn(lab.bus.address, 200)
    client = lab.client
    path = client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", ("localhost",))[0]
    client.call(SERVICE, path, TARGET_IFACE, "Refresh", timeout=60)
    client.call(SERVICE, ROOT_PATH, TARGET_IFACE, "Refresh")
    for target in ("", "localhost", "127.0.0.1", "::1"):
        client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Query", "s", (target,), timeout=60)
    for bad in ("bad_host!", "x" * 5000, "fe80::1%nosuch"):
        assert client.call_error(SERVICE, ROOT_PATH, MANAGER_IFACE, "WatchHost", "s", (bad,)) is not None
    client.call(SERVICE, ROOT_PATH, MANAGER_IFACE, "Release", "o", (path,))
    wait_no_children(client, "no target left")
    daemon.send_signal(signal.SIGTERM)
    status = daemon.wait(120)
    print(f"valgrind: the daemon exited with {status}")
    sys.exit(0 if status == 0 else 1)
finally:
    lab.bus.stop()
PY
grep -E "definitely lost|indirectly lost|possibly lost|still reachable|ERROR SUMMARY" "$log" | sed 's/^==[0-9]*== *//'
rm -f "$log"
exit $status
