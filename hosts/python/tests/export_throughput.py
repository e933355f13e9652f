"""Export throughput (results/evidence.md, "Export throughput"): records/s per sink through
the Python host, and OTLP spans/s to a local receiver decoding with opentelemetry-proto.

    python tests/export_throughput.py [EFFECTS] [--cli PATH]

Makes a journal of EFFECTS committed refunds (default 2000), then exports it whole to each
sink, fresh each time, timing the export alone. With --cli, the CLI's `interlock export`
too (its time includes its start)."""

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from otlp_receiver import Receiver  # noqa: E402
from test_export import make_journal  # noqa: E402

from interlock import Interlock  # noqa: E402


def main() -> None:
    args = sys.argv[1:]
    cli = None
    if "--cli" in args:
        cli = args[args.index("--cli") + 1]
        del args[args.index("--cli"):args.index("--cli") + 2]
    effects = int(args[0]) if args else 2000
    work = Path(tempfile.mkdtemp())
    try:
        base = work / "journal"
        make_journal(base, committed=effects, refused=0)
        entries = len((base / "journal.jsonl").read_text().splitlines())
        print(f"journal: {effects} effects, {entries} entries")
        receiver = Receiver()
        for sink in ("bigquery", "cloud-logging", "siem", "otlp"):
            hosts = [("python", None)] + ([("cli", cli)] if cli else [])
            for host, binary in hosts:
                j = work / f"{sink}-{host}"
                shutil.copytree(base, j)
                out = work / f"{sink}-{host}.jsonl"
                to = f"otlp={receiver.url}" if sink == "otlp" else sink
                t = time.perf_counter()
                if binary is None:
                    g = Interlock(j)
                    records = g.export(to, None if sink == "otlp" else str(out)).records
                    g.close()
                else:
                    cmd = [binary, "--json", "export", str(j), "--to", to]
                    if sink != "otlp":
                        cmd += ["--out", str(out)]
                    records = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["records"]
                dt = time.perf_counter() - t
                spans = f", {effects / dt:,.0f} spans/s" if sink == "otlp" else ""
                print(f"{host:6} {sink:13} {records:6} records in {dt:6.2f} s: {records / dt:8,.0f} records/s{spans}")
        receiver.close()
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
