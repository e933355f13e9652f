"""The faults through the MCP proxies, as results/mcp.md reports them: runs the fault suites
(tests/mcp with the official Python MCP SDK as client and server; hosts/node/test/mcp-proxy.test.js
with the official TypeScript SDK as client and server) against both proxies, and writes each
test's outcome per proxy. Each test asserts the refunds it counts at the payments service, so
"held" is that assertion passing in this run.

    python experiments/mcp-bench/faults.py --cli target/debug/interlock [--out results/mcp.md]

Writes the "## Faults through the proxies" section of results/mcp.md, keeping the rest.
"""

import argparse
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SECTION = "## Faults through the proxies"


def pytest_suite(cli: str, junit: Path) -> dict:
    env = dict(os.environ, INTERLOCK_CLI=cli)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/mcp",
                    f"--junitxml={junit}"], cwd=ROOT, env=env, check=False)
    cells: dict = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name", "")
        m = re.match(r"(test_\w+)(?:\[(.*)\])?", name)
        if not m:
            continue
        test, param = m.group(1), m.group(2) or ""
        proxy = "cli" if "cli-proxy" in param else "python" if "python-proxy" in param else "both"
        label = test.removeprefix("test_").replace("_", " ")
        extra = re.sub(r"-?(cli|python)-proxy-?", "", param)
        if extra:
            label += f" ({extra})"
        status = "skipped" if case.find("skipped") is not None else (
            "FAILED" if case.find("failure") is not None or case.find("error") is not None else "held")
        cells.setdefault(label, {})[proxy] = status
    return cells


def node_suite(cli: str, python: str) -> dict:
    env = dict(os.environ, INTERLOCK_CLI=cli, INTERLOCK_PYTHON=python)
    out = subprocess.run(["node", "--test", "--test-reporter=tap", "test/mcp-proxy.test.js"],
                         cwd=ROOT / "hosts" / "node", env=env, capture_output=True, text=True, check=False)
    cells: dict = {}
    for line in out.stdout.splitlines():
        m = re.match(r"\s*(not ok|ok) \d+ - (interlock mcp-proxy|python -m interlock.mcp_proxy): (.*?)(\s+# SKIP.*)?$",
                     line)
        if not m:
            continue
        proxy = "cli" if m.group(2) == "interlock mcp-proxy" else "python"
        status = "skipped" if m.group(4) else ("held" if m.group(1) == "ok" else "FAILED")
        cells.setdefault(m.group(3), {})[proxy] = status
    return cells


def versions() -> str:
    ts = json.loads((ROOT / "hosts/node/node_modules/@modelcontextprotocol/sdk/package.json").read_text())["version"]
    lock = (ROOT / "Cargo.lock").read_text()
    rmcp = re.search(r'name = "rmcp"\nversion = "([^"]+)"', lock)
    return (f"Python `mcp` {importlib.metadata.version('mcp')}, TypeScript `@modelcontextprotocol/sdk` {ts}, "
            f"Rust `rmcp` {rmcp.group(1) if rmcp else '?'} (the CLI's proxy)")


def table(title: str, cells: dict) -> list:
    lines = [f"### {title}", "", "| fault (the test) | `interlock mcp-proxy` | `python3 -m interlock.mcp_proxy` |",
             "|---|---|---|"]
    for label, c in cells.items():
        if "both" in c:
            lines.append(f"| {label} | {c['both']} (one test, not per proxy: its name says what it compares) | |")
        else:
            lines.append(f"| {label} | {c.get('cli', '-')} | {c.get('python', '-')} |")
    return lines + [""]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--python", default=sys.executable, help="the Python the Node suite starts the Python proxy with")
    ap.add_argument("--out", default=str(ROOT / "results" / "mcp.md"))
    a = ap.parse_args()
    cli = str(Path(a.cli).resolve())
    with tempfile.TemporaryDirectory() as tmp:
        py = pytest_suite(cli, Path(tmp) / "junit.xml")
    js = node_suite(cli, a.python)
    failed = [k for cells in (py, js) for k, c in cells.items() if "FAILED" in c.values()]
    lines = [
        SECTION, "",
        f"`python experiments/mcp-bench/faults.py --cli target/debug/interlock`, one run. SDKs: {versions()}. "
        "Every test counts the refunds at the simulated payments service (its state file survives the "
        "SIGKILLs) and asserts them: \"held\" means that assertion passed in this run. The faults "
        "(docs/FAULTS.md): a proxy killed after it forwarded create_refund and before the reply (F1/F2, "
        "recovered by the lookup tool, or AMBIGUOUS at tier 3), a hand refund during the outage (F8), a "
        "conflicting payload (F5), duplicate calls (F3), a lease revoked during the outage (F9), two calls "
        "racing one cap (F11), and bad input.", "",
    ]
    lines += table("The official Python MCP SDK as client and upstream server (tests/mcp)", py)
    lines += table("The official TypeScript MCP SDK as client and upstream server (hosts/node/test/mcp-proxy.test.js)",
                   js)
    text = "\n".join(lines)
    print(text)
    out = Path(a.out)
    old = out.read_text() if out.exists() else "# MCP proxy\n\n"
    if SECTION in old:
        head, _, rest = old.partition(SECTION)
        nxt = rest.find("\n## ")
        old = head + (rest[nxt + 1:] if nxt >= 0 else "")
    out.write_text(old.rstrip("\n") + "\n\n" + text)
    if failed:
        sys.exit(f"failed: {failed}")


if __name__ == "__main__":
    main()
