#!/usr/bin/env bash
# The crash demo against Stripe's API through the official stripe SDK (Python): localstripe
# (PyPI, a stateful fake Stripe server written by others) as its own process, a $100 charge,
# a $20 refund whose sender is SIGKILLed after localstripe took the refund and before the
# reply, a new process that recovers it from the journal: one refund, and its receipt.
# Builds the gate component if dist/ lacks it; a venv with the SDK and localstripe
# (INTERLOCK_PY_VENV, default hosts/python/.venv).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/interlock-target}"
if [ ! -f dist/interlock_gate.wasm ]; then
  bash scripts/setup.sh
  bash scripts/build-wasm.sh >/dev/null
fi
VENV=${INTERLOCK_PY_VENV:-$PWD/hosts/python/.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip --disable-pip-version-check -q install 'wasmtime>=50,<51' 'stripe==16.1.0' 'localstripe==1.15.10'
export INTERLOCK_WASM="$PWD/dist/interlock_gate.wasm"
PYTHONPATH="$PWD/hosts/python/src" exec "$VENV/bin/python" hosts/python/examples/stripe_demo.py
