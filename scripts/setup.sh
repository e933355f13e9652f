#!/usr/bin/env bash
# Install what a fresh machine lacks for building and testing Interlock. Idempotent.
# `setup.sh rust` sets up the Rust toolchain only (what scripts/demo.sh needs).
set -euo pipefail
cd "$(dirname "$0")/.."
# The pinned toolchain (rust-toolchain.toml). Where rustup cannot download it (no route to
# its server) and the installed stable toolchain is that very release, the pin names it: the
# same directory under the pinned name (rustup refuses `toolchain link` for a release name).
pinned=$(sed -n 's/^channel = "\(.*\)"$/\1/p' rust-toolchain.toml)
rustup_home=${RUSTUP_HOME:-$HOME/.rustup}
host=$(cd / && rustc -vV | sed -n 's/^host: //p')
if [ ! -e "$rustup_home/toolchains/$pinned-$host" ]; then
  if [ "$(cd / && rustup run stable rustc --version 2>/dev/null | cut -d' ' -f2)" = "$pinned" ]; then
    ln -s "stable-$host" "$rustup_home/toolchains/$pinned-$host"
  else
    (cd / && rustup toolchain install "$pinned" --profile minimal)
  fi
fi
rustup target add wasm32-wasip2 >/dev/null
rustup component add rustfmt clippy >/dev/null 2>&1 || true
[ "${1:-}" = rust ] && exit 0
# PostgreSQL 15 for the shared-journal tests (each starts its own throwaway cluster with
# scripts/postgres.sh; nothing runs as a service).
if [ ! -x /usr/lib/postgresql/15/bin/initdb ] && [ -z "${PG_BIN:-}" ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq postgresql >/dev/null
  else
    echo "setup.sh: PostgreSQL is missing; run: sudo apt-get install postgresql" >&2
  fi
fi
# git for the git target's tests (tests run the git binary on throwaway repositories; 2.38+
# for merge-tree --write-tree).
if ! command -v git >/dev/null; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq git >/dev/null
  else
    echo "setup.sh: git is missing; run: sudo apt-get install git" >&2
  fi
fi
