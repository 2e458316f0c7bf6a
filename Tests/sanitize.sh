#!/usr/bin/env bash
# The whole integration suite against binaries built with a sanitizer.
#
#   Tests/sanitize.sh address          # as root; AddressSanitizer (+ LeakSanitizer at exit)
#   Tests/sanitize.sh thread           # as root; ThreadSanitizer
#
# Every sanitizer report is written to a file; the run fails if any test
# fails or any report exists, and prints the reports. Run Tests/test-all.sh
# once first (it installs the packages the suite needs).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitizer=${1:?usage: Tests/sanitize.sh address|thread}
case $sanitizer in address|thread) ;; *) echo "unknown sanitizer $sanitizer" >&2; exit 2 ;; esac

scratch=.build-$sanitizer
swift build --scratch-path "$scratch" -Xswiftc -sanitize="$sanitizer" -Xswiftc -use-ld=lld \
    --product reachabilityd
swift build --scratch-path "$scratch" -Xswiftc -sanitize="$sanitizer" -Xswiftc -use-ld=lld --product reachctl
swift build --scratch-path "$scratch" -Xswiftc -sanitize="$sanitizer" -Xswiftc -use-ld=lld \
    --product reachability-example
swift build --scratch-path "$scratch" -Xswiftc -sanitize="$sanitizer" -Xswiftc -use-ld=lld \
    --product network-path-example
swift build --scratch-path "$scratch" -Xswiftc -sanitize="$sanitizer" -Xswiftc -use-ld=lld \
    --product system-configuration-example
bin=$(swift build --scratch-path "$scratch" --show-bin-path)

reports=$(mktemp -d /tmp/reach-$sanitizer-XXXXXX)
chmod 1777 "$reports"
suppressions="$PWD/Tests/sanitizer-suppressions"
# Leaks are checked in the daemon, which frees everything before it exits. The
# client programs (reachctl, the example) keep the library's engine for the
# life of the process by design, so what is alive at their exit is not a leak.
export ASAN_OPTIONS="log_path=$reports/report:detect_leaks=0"
export REACH_TEST_DAEMON_ASAN_OPTIONS="log_path=$reports/report:detect_leaks=1"
export REACH_TEST_SANITIZER=$sanitizer
export LSAN_OPTIONS="suppressions=$suppressions/lsan.supp:print_suppressions=0"
export TSAN_OPTIONS="log_path=$reports/report:suppressions=$suppressions/tsan.supp:halt_on_error=0"
# Slower binaries: more time for every bounded wait.
export REACH_TEST_START_TIMEOUT=90 REACH_TEST_CHANGE_TIMEOUT=45
# A crash is reported by the sanitizer itself; Swift's backtracer would read the dying
# process's memory through instrumented memcpy and report that instead.
export SWIFT_BACKTRACE=enable=no

status=0
REACHABILITYD="$bin/reachabilityd" /usr/bin/python3 -m pytest Tests/Integration -q -ra "${@:2}" || status=$?
if compgen -G "$reports/report*" > /dev/null; then
    echo "== $sanitizer reports"
    cat "$reports"/report*
    status=1
else
    echo "== no $sanitizer reports"
fi
rm -rf "$reports"
exit $status
