"""Copies the components (dist/interlock_gate.wasm, dist/payments_sim.wasm, built by
scripts/build-wasm.sh) and the SQL journals' schema (adapters/journal/src/schema.sql, for
reading: the component carries its own) into the package at build time, so a wheel carries
them and installs where no Rust toolchain or checkout exists. Everything else is in
pyproject.toml."""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
COMPONENTS = ("interlock_gate.wasm", "payments_sim.wasm")
SCHEMA = ROOT / "adapters" / "journal" / "src" / "schema.sql"


def copy_components() -> None:
    dist = Path(os.environ.get("INTERLOCK_DIST", ROOT / "dist"))
    target = HERE / "src" / "interlock" / "wasm"
    target.mkdir(parents=True, exist_ok=True)
    for name in COMPONENTS:
        src = dist / name
        if src.is_file():
            shutil.copyfile(src, target / name)
        elif not (target / name).is_file():
            raise SystemExit(
                f"{src} is missing: build the components first "
                "(`bash scripts/build-wasm.sh` at the repository root), or set INTERLOCK_DIST"
            )


def copy_schema() -> None:
    # The one schema, never a second copy in the source tree: the checkout's file, copied
    # as it is (an sdist already carries the copy).
    target = HERE / "src" / "interlock" / "sql" / SCHEMA.name
    target.parent.mkdir(parents=True, exist_ok=True)
    if SCHEMA.is_file():
        shutil.copyfile(SCHEMA, target)
    elif not target.is_file():
        raise SystemExit(f"{SCHEMA} is missing: build from a checkout of the repository")


class BuildPy(build_py):
    def run(self):
        copy_components()
        copy_schema()
        super().run()


setup(cmdclass={"build_py": BuildPy})
