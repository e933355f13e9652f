"""Copies the components (dist/interlock_gate.wasm, dist/payments_sim.wasm,
dist/journal_format.wasm, built by scripts/build-wasm.sh) into the package at build time,
so a wheel carries them and installs where no Rust toolchain exists. Everything else is in pyproject.toml."""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
COMPONENTS = ("interlock_gate.wasm", "payments_sim.wasm", "journal_format.wasm")


def copy_components() -> None:
    dist = Path(os.environ.get("INTERLOCK_DIST", HERE.parent.parent / "dist"))
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


class BuildPy(build_py):
    def run(self):
        copy_components()
        super().run()


setup(cmdclass={"build_py": BuildPy})
