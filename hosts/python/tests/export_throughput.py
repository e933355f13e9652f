"""Export throughput (results/evidence.md, "Export throughput"): records/s per sink and host,
OTLP spans/s to a local receiver decoding with opentelemetry-proto.

    python tests/export_throughput.py [EFFECTS] [--cli PATH] [--node]

Makes a journal of EFFECTS committed refunds (default 1000), then exports it whole to each
sink, from a fresh copy each time: through the Python host in this process (the export
alone timed), and with --cli / --node through `interlock export` and `interlock-export`
(hosts/node) as processes. A process's time includes its start (loading the component, the
SDK); it is measured apart, as a second run on the journal just exported (nothing left to
send), and the net rate is the records over the difference."""

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from interlock import Interlock  # noqa: E402
from otlp_receiver import Receiver  # noqa: E402
from test_export import make_journal  # noqa: E402

NODE_CLI = Path(__file__).resolve().parents[2] / "node" / "src" / "export-cli.js"


def main() -> None:
    args = sys.argv[1:]
    commands = {}
    if "--cli" in args:
        at = args.index("--cli")
        commands["cli"] = [args[at + 1], "--json", "export"]
        del args[at:at + 2]
    if "--node" in args:
        args.remove("--node")
        commands["node"] = ["node", str(NODE_CLI)]
    effects = int(args[0]) if args else 1000
    work = Path(tempfile.mkdtemp())
    try:
        base = work / "journal"
        make_journal(base, committed=effects, refused=0)
        entries = len((base / "journal.jsonl").read_text().splitlines())
        print(f"journal: {effects} effects, {entries} entries")
        receiver = Receiver()
        for sink in ("bigquery", "cloud-logging", "siem", "otlp"):
            for host in ["python", *commands]:
                j = work / f"{sink}-{host}"
                shutil.copytree(base, j)
                out = work / f"{sink}-{host}.jsonl"
                to = f"otlp={receiver.url}" if sink == "otlp" else sink
                if host == "python":
                    t = time.perf_counter()
                    g = Interlock(j)
                    records = g.export(to, None if sink == "otlp" else str(out)).records
                    g.close()
                    dt, start = time.perf_counter() - t, 0.0
                else:
                    cmd = commands[host] + [str(j), "--to", to] + ([] if sink == "otlp" else ["--out", str(out)])

                    def run(cmd=cmd):
                        t = time.perf_counter()
                        r = subprocess.run(cmd, check=True, capture_output=True, text=True)
                        return time.perf_counter() - t, json.loads(r.stdout)["records"]

                    dt, records = run()
                    start, again = run()
                    assert again == 0, again
                spans = f", {effects / (dt - start):,.0f} spans/s" if sink == "otlp" else ""
                print(f"{host:6} {sink:13} {records:6} records in {dt:6.2f} s (start {start:4.2f} s): "
                      f"{records / dt:7,.0f} records/s, {records / (dt - start):7,.0f} net{spans}", flush=True)
                shutil.rmtree(j)
                out.unlink(missing_ok=True)
        receiver.close()
    finally:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
