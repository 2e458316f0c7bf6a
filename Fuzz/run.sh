#!/usr/bin/env bash
# Runs one fuzz target for a given time with libFuzzer and AddressSanitizer.
#
#   Fuzz/run.sh names|paths|messages [SECONDS]     (default 600)
#
# New interesting inputs are added to Fuzz/Corpus/TARGET (commit the useful
# ones); a crashing input is written to Fuzz/Regressions/TARGET, where the
# unit tests (FuzzRegressionTests) replay it from then on.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: Fuzz/run.sh names|paths|messages [SECONDS]}
seconds=${2:-600}
case $target in names|paths|messages) ;; *) echo "unknown target $target" >&2; exit 2 ;; esac

scratch=.build-fuzz
swift build -c release --product reachability-fuzz --scratch-path "$scratch" \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -use-ld=lld
binary="$scratch/release/reachability-fuzz"

mkdir -p "Fuzz/Corpus/$target" "Fuzz/Regressions/$target"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
REACHABILITY_FUZZ_TARGET=$target "$binary" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=4096 -artifact_prefix="Fuzz/Regressions/$target/" -print_final_stats=1 \
    "$work" "Fuzz/Corpus/$target"
# Keep a minimal corpus: merge what was found into the committed directory.
REACHABILITY_FUZZ_TARGET=$target "$binary" -merge=1 "Fuzz/Corpus/$target" "$work" 2>&1 | tail -1
