"""Python figures of issue 8, against wasmtime (Rust) in the same invocation.

    hosts/python/.venv/bin/python experiments/bench/python/bench.py [--quick]

Imports the Python host (hosts/python: the installed package, else its src/). Writes
results/bench-python.json, which `interlock-bench` folds into results/bench.md. The
wasmtime baseline comes from running `interlock-bench --only overhead` (the release binary
under $CARGO_TARGET_DIR) right after the Python rounds."""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUICK = "--quick" in sys.argv
ROOT = Path(__file__).resolve().parents[3]
OUT = Path(tempfile.gettempdir()) / "bench-python-quick.json" if QUICK else ROOT / "results" / "bench-python.json"

try:
    import interlock  # noqa: F401
except ImportError:
    sys.path.insert(0, str(ROOT / "hosts" / "python" / "src"))
try:
    from interlock.clock import FakeClock
    from interlock.gate import GateHost, JournalRef, applied, captured, found, allowed
    from interlock.journal import FileJournal, MemoryJournal
except ImportError as e:  # the host is not there (yet), or wasmtime-py is missing
    print(f"skip: the Python host cannot be imported ({e})", file=sys.stderr)
    sys.exit(0)

LEASE = "case-4471"
T0_MS = 1_800_000_000_000
LEASE_UNTIL_MS = T0_MS + 10 * 365 * 24 * 3_600_000
PREMISES = {"eligible": True, "refunded_by_others_cents": 0}
RESULT = '{"amount_cents":2000,"refund_id":"re_0001"}'


def proposal(n: int) -> str:
    """The same text as experiments/bench/src/common.rs."""
    return (
        '{"agent":"refund-agent","target":{"name":"payments","dedupes":true,"dedupe_window_ms":86400000,'
        '"lookup":true,"timeout_ms":1000},'
        f'"key":"refund:order_{n}","effect":{{"order":"order_{n}","amount_cents":2000}},'
        f'"authority":{{"lease":"{LEASE}"}},"premises":{{"eligible":true,"refunded_by_others_cents":0}}}}'
    )


class NullTarget:
    def capture(self, _req):
        return captured(PREMISES)

    def authorize(self, _req):
        return allowed(True)

    def apply(self, _req):
        return applied(RESULT)

    def query(self, _req):
        return found(RESULT)


figures = []


def fig(id_, what, value, unit, detail="", goal=None, met=None):
    figures.append({"id": id_, "what": what, "value": value, "unit": unit, "detail": detail, "goal": goal, "met": met})
    print(f"  {id_:<34} {value:12.3f} {unit}", file=sys.stderr)


# Submit over an in-memory journal.
rounds, per_round = (2, 10) if QUICK else (9, 200)
host = GateHost(JournalRef(MemoryJournal()), FakeClock(T0_MS))
host.grant_lease(LEASE, LEASE_UNTIL_MS)
n, per_submit = 0, []
for r in range(rounds + 1):
    t = time.perf_counter()
    for _ in range(per_round):
        o = host.submit(proposal(n), NullTarget())
        assert o.state == "COMMITTED", o
        n += 1
    if r:
        per_submit.append((time.perf_counter() - t) * 1e6 / per_round)
py_us = statistics.median(per_submit)
fig("python.submit_memory", "Python (wasmtime-py): submit with an in-memory journal", py_us, "µs",
    f"median of {rounds} rounds x {per_round}")

target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
binary = target / "release" / "interlock-bench"
if binary.exists():
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([str(binary), "--only", "overhead", "--out", tmp] + (["--quick"] if QUICK else []), check=True)
        rust = json.loads((Path(tmp) / "bench.json").read_text())
    o = next(f for f in rust["figures"] if f["id"] == "overhead.component_vs_native")
    wasmtime_us = float(o["detail"].split("component ")[1].split(" µs")[0])
    fig("python.vs_wasmtime", "Python submit / wasmtime (Rust) submit (same component, in-memory journals)",
        py_us / wasmtime_us, "x", f"Python {py_us:.1f} µs, wasmtime {wasmtime_us:.1f} µs", "<= 3x", py_us / wasmtime_us <= 3)
else:
    print(f"no {binary}: cargo build --release -p interlock-bench for the ratio", file=sys.stderr)

# A new instance (the component is compiled or loaded once per process).
inst = []
for _ in range(3 if QUICK else 50):
    t = time.perf_counter()
    GateHost(JournalRef(MemoryJournal()), FakeClock(T0_MS))
    inst.append((time.perf_counter() - t) * 1e3)
fig("python.instantiate", "Python: a new GateHost (linker + instance; component cached)", statistics.median(inst), "ms")

# Submit on the file journal against one raw write + fdatasync of the same bytes.
cache = Path.home() / ".cache"
cache.mkdir(exist_ok=True)
with tempfile.TemporaryDirectory(dir=cache) as d:
    fj = FileJournal.open(os.path.join(d, "journal"))
    fh = GateHost(JournalRef(fj), FakeClock(T0_MS))
    fh.grant_lease(LEASE, LEASE_UNTIL_MS)
    raw = os.open(os.path.join(d, "raw.bin"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    size = lambda: os.path.getsize(os.path.join(d, "journal", "journal.jsonl"))  # noqa: E731
    g, w = [], []
    count = 5 if QUICK else 300
    fs0 = fj.fsyncs
    for i in range(count):
        s0 = size()
        t = time.perf_counter()
        fh.submit(proposal(10**9 + i), NullTarget())
        g.append(time.perf_counter() - t)
        buf = b"x" * (size() - s0)
        t = time.perf_counter()
        os.write(raw, buf)
        os.fdatasync(raw)
        w.append(time.perf_counter() - t)
    os.close(raw)
    per_effect = (fj.fsyncs - fs0) / count
    fig("python.fsyncs_per_effect", "Python: fdatasync per submitted effect", per_effect, "",
        f"{fj.fsyncs - fs0} for {count}", "= 1", per_effect == 1)
    ratio = statistics.median(g) / statistics.median(w)
    fig("python.submit_vs_raw_fsync", "Python: submit on the file journal / one raw write+fdatasync of the same bytes",
        ratio, "x", f"median submit {statistics.median(g) * 1e6:.0f} µs, raw {statistics.median(w) * 1e6:.0f} µs, {count} interleaved",
        "<= 1.5x", ratio <= 1.5)
    fj.close()

OUT.parent.mkdir(parents=True, exist_ok=True)
cmd = "hosts/python/.venv/bin/python experiments/bench/python/bench.py" + (" --quick" if QUICK else "")
OUT.write_text(json.dumps({"command": cmd, "figures": figures}, indent=2, ensure_ascii=False) + "\n")
print(f"wrote {OUT}", file=sys.stderr)
