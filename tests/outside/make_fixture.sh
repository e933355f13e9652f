#!/usr/bin/env bash
# Regenerate fixture/ with the real CLI: the tier-2 demo (a refund, a crash after the send,
# recovery), then an approval whose premises_seen exercise what RFC 8785 does differently
# from plain sorted JSON (a key above U+FFFF against one at U+E000, 0.000001, -0, 2.0, a
# non-ASCII memo), then the refund's receipt signed with the key in fixture/key.hex.
# The fake clock makes every run write the same bytes.
# Environment: INTERLOCK_CLI (default: cargo build -p interlock-cli and use that).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
CLI=${INTERLOCK_CLI:-}
if [ -z "$CLI" ]; then
  cargo build -q -p interlock-cli --manifest-path "$ROOT/Cargo.toml"
  CLI=$CARGO_TARGET_DIR/debug/interlock
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
T=1800000000000
FX=$HERE/fixture

"$CLI" --clock-ms $T demo 2 --dir "$WORK/j" > /dev/null
"$CLI" --clock-ms $T approve "$WORK/j" "$FX/approval.json" > /dev/null
python3 -c 'import sys; sys.stdout.buffer.write(bytes.fromhex(open(sys.argv[1]).read()))' \
  "$FX/key.hex" > "$WORK/key"
ID=$(grep -o '"stream":"effect:[0-9a-f]*"' "$WORK/j/journal.jsonl" | head -1 | sed 's/.*effect://; s/"//')
"$CLI" --clock-ms $T receipt "$WORK/j" "$ID" --key-file "$WORK/key" > "$FX/receipt.json"
cp "$WORK/j/journal.jsonl" "$FX/journal.jsonl"
echo "fixture/: journal.jsonl ($(wc -l < "$FX/journal.jsonl") entries), receipt.json of effect $ID"
