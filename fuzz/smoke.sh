#!/usr/bin/env bash
# A quick fuzz smoke test for CI: build the cargo-fuzz targets on nightly, replay the kept
# regressions and seeds on stable, then run each target for a while from the seeds.
#   FUZZ_SECONDS  seconds per target (default 20)
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and the nightly toolchain.
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}-fuzz"
seconds="${FUZZ_SECONDS:-20}"
targets=(journal proposal file_journal)

echo "== fuzz: regressions and seeds (stable)"
cargo test --quiet

echo "== fuzz: build (nightly, sanitizer)"
cargo +nightly fuzz build -O

for t in "${targets[@]}"; do
    echo "== fuzz: $t for ${seconds}s"
    work="$(mktemp -d)"
    log="$(mktemp)"
    # Start from the seeds in a scratch corpus, so CI leaves no files behind. Steer around the
    # bugs that are known and still open (tests/regressions.rs, KNOWN_OPEN).
    status=0
    cargo +nightly fuzz run -O "$t" "$work" "seeds/$t" -- \
        -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E '^(stat::number_of_executed_units|#[0-9]+[[:space:]]+DONE)' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log" >&2
        echo "fuzz: $t found a crash; the input is in fuzz/artifacts/$t/ (keep it in regressions/$t/)" >&2
        rm -rf "$work" "$log"
        exit 1
    fi
    rm -rf "$work" "$log"
done
echo "fuzz smoke: ok"
