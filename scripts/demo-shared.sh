#!/usr/bin/env bash
# The crash demo with its journal in a local PostgreSQL shared by two workers: one process
# sends the $20 refund and dies before the reply; another process, which shares nothing with
# it but the database (as a second machine would), recovers it: paid once. A throwaway
# cluster is started under a temporary folder and stopped at the end (scripts/postgres.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
bash scripts/setup.sh
bash scripts/build-wasm.sh >/dev/null
cargo build -q -p interlock-cli
export INTERLOCK_WASM="$PWD/dist/interlock_gate.wasm"
bin="$CARGO_TARGET_DIR/debug/interlock"

pg=$(mktemp -d /tmp/interlock-demo-pg.XXXXXX)
trap 'bash scripts/postgres.sh stop "$pg" >/dev/null || true; rm -rf "$pg"' EXIT
url=$(bash scripts/postgres.sh start "$pg")
echo "PostgreSQL (a throwaway cluster): $url"
for m in ${@:-2 3}; do
  # A new database per run: the effect of one run must not be found by the next.
  db="${url%/postgres}/demo_tier_$m"
  "${PG_BIN:-/usr/lib/postgresql/15/bin}/psql" -q "$url" -c "CREATE DATABASE demo_tier_$m" >/dev/null
  echo; echo "################ interlock demo $m --journal $db"
  "$bin" demo "$m" --dir ".interlock-demo/shared-$m" --journal "$db"
  echo "# a third process verifies the shared journal:"
  "$bin" verify "$db"
done
