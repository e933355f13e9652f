"""A fresh machine to the README's two commands, timed (issue 28).

    python3 experiments/install/fresh.py            # the demo: bash scripts/demo.sh
    python3 experiments/install/fresh.py --tests    # and the test command: bash scripts/test.sh

Clones the checkout's committed HEAD into a new folder and runs each command there with an
empty cargo target folder of its own, as a newcomer's first run would (the test command's
build from nothing needs more than 17 GB of disk: a run with 17 GB free ran out); what a machine keeps
between runs stays (cargo's registry cache, npm's and pip's caches, the apt packages), so
the figures leave out downloads. Writes results/bench-install.json (the figures
results/bench.md folds in; a figure not measured this time is kept from the last run).
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "results" / "bench-install.json"
COMMAND = "python3 experiments/install/fresh.py --tests"
GOALS = {"install.demo": 180.0, "install.tests": 1200.0}


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(checkout: Path, target: Path, command: list[str], log: Path) -> tuple[float, float]:
    """Wall and CPU seconds of `command` in `checkout`; fails loudly, naming its log."""
    env = {**os.environ, "CARGO_TARGET_DIR": str(target)}
    cpu, start = children_cpu(), time.monotonic()
    with log.open("w") as out:
        rc = subprocess.run(command, cwd=checkout, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    wall, cpu = time.monotonic() - start, children_cpu() - cpu
    if rc != 0:
        sys.exit(f"fresh.py: {' '.join(command)} failed (exit {rc}); its output: {log}")
    return wall, cpu


def figure(fid: str, what: str, wall: float, cpu: float, when: str) -> dict:
    goal = GOALS[fid]
    return {
        "id": fid,
        "what": what,
        "value": wall,
        "unit": "s",
        "goal": f"<= {goal:.0f} s ({goal / 60:.0f} min)",
        "met": wall <= goal,
        "detail": f"{wall / 60:.1f} min wall, {cpu:.0f} s CPU; {when}",
    }


def main() -> None:
    tests = "--tests" in sys.argv[1:]
    head = subprocess.check_output(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True).strip()
    dirty = subprocess.check_output(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, text=True)
    if dirty:
        print("fresh.py: the working tree has uncommitted changes; HEAD is what is measured", file=sys.stderr)
    load = Path("/proc/loadavg").read_text().split()[0]
    when = (
        f"commit {head}, {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, load average {load} at the start, "
        f"{os.cpu_count()} CPUs; an empty target folder, crates from cargo's registry cache (no download)"
    )
    kept = {}
    if OUT.exists():
        kept = {f["id"]: f for f in json.loads(OUT.read_text())["figures"]}
    # Kept when a command fails (its log is there); removed after a run that passed.
    tmp = Path(tempfile.mkdtemp(prefix="interlock-fresh-"))
    checkout = tmp / "checkout"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True)
    wall, cpu = timed(checkout, tmp / "target-demo", ["bash", "scripts/demo.sh"], tmp / "demo.log")
    if "final AMBIGUOUS" not in (tmp / "demo.log").read_text():
        sys.exit("fresh.py: the demo ran but did not end with its tier 3 AMBIGUOUS")
    kept["install.demo"] = figure(
        "install.demo", "a fresh machine to the README's demo (bash scripts/demo.sh)", wall, cpu, when
    )
    print(f"demo: {wall:.0f} s wall, {cpu:.0f} s CPU", file=sys.stderr)
    write(kept)  # kept even if the tests then fail
    if tests:
        wall, cpu = timed(checkout, tmp / "target-tests", ["bash", "scripts/test.sh"], tmp / "tests.log")
        kept["install.tests"] = figure(
            "install.tests",
            "a fresh machine to a passing README test command (bash scripts/test.sh)",
            wall,
            cpu,
            when + "; npm's and pip's caches warm",
        )
        print(f"tests: {wall:.0f} s wall, {cpu:.0f} s CPU", file=sys.stderr)
    shutil.rmtree(tmp, ignore_errors=True)
    write(kept)


def write(kept: dict) -> None:
    figures = [kept[i] for i in GOALS if i in kept]
    OUT.write_text(json.dumps({"command": COMMAND, "figures": figures}, indent=2) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
