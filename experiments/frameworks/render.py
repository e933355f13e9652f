"""results/frameworks.md from the cells each framework's experiment wrote
(results/frameworks/<framework>.json: the scripts in experiments/frameworks/), beside
the original's published table (the Python library's landing page), cell by cell.

    python experiments/frameworks/render.py [--check]

--check (CI): every "with Interlock" cell present holds ($20, or $0 for the revoked
approval); writes nothing.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CELLS = ROOT / "results" / "frameworks"
OUT = ROOT / "results" / "frameworks.md"

ROWS = [
    ("reply_lost", "Reply lost after the service took the refund", 2000),
    ("hand_refund", "Support refunded by hand during the outage", 2000),
    ("approval_revoked", "Approval revoked during the outage", 0),
    ("cap_race", "Two approvals race one $30 cap", 2000),
]

# The original's table (its landing page), by framework and row: what it published.
ORIGINAL = {
    "Temporal": ["Held", "$40", "Sent $20", "Not run", "Held rows 1 to 3"],
    "DBOS": ["Held", "$40 in 3 of 3", "Sent $20 unless cancelled", "Held, with a cap transaction", "Held rows 1 to 3"],
    "LangGraph": ["Held", "$40 in 3 of 3", "Held", "Held", "Held rows 1 to 4"],
    "OpenAI Agents SDK": ["Held with a key", "$40 in 3 of 3", "Held", "$40 in 10 of 10",
                          "Held rows 1 to 3; row 4 with a cap journal"],
    "open-multi-agent": ["Held", "$40 in 2 of 2", "Held with its run store", "$40 in 5 of 5", "Not run"],
    "Google ADK": ["Held with a key", "$40 in 2 of 2", "Sent $20", "$40 in 12 of 18",
                   "Held rows 1 to 3, with an AP2 mandate"],
}


def dollars(cents: int) -> str:
    return f"${cents / 100:.0f}" if cents % 100 == 0 else f"${cents / 100:.2f}"


def cell(c: dict) -> str:
    if c is None:
        return "missing"
    if "not_run" in c:
        return f"not run ({c['not_run']})"
    text = dollars(c["refunded_cents"])
    if c.get("state"):
        text += f", {c['state']}"
    if c.get("runs", 1) > 1:
        text += f" ({c['runs']} runs)"
    return text


def holds(row: str, want: int, c: dict) -> bool:
    return c is not None and "not_run" not in c and c.get("refunded_cents") == want


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    frameworks = [json.loads(p.read_text()) for p in sorted(CELLS.glob("*.json"))]
    broken = []
    for f in frameworks:
        for row, _, want in ROWS:
            c = f["rows"].get(row, {}).get("with")
            if c is not None and "not_run" not in c and not holds(row, want, c):
                broken.append(f"{f['framework']} / {row}: {cell(c)}")
    if broken:
        sys.exit("a 'with Interlock' cell does not hold: " + "; ".join(broken))
    if a.check:
        print(f"{len(frameworks)} frameworks, every 'with Interlock' cell present holds")
        return
    lines = [
        "# The same $20 refund in each framework, alone and with Interlock inside",
        "",
        "Written by `python experiments/frameworks/render.py` from `results/frameworks/*.json`, which "
        "each framework's experiment writes (`experiments/frameworks/`). Real runtimes, scripted models, "
        "no network: refunds are counted at the simulated payments service. The rows are the original's "
        "(its landing page): \"alone\" is the framework used as documented, \"with\" is Interlock inside it. "
        "A test per \"with\" cell fails if it stops holding (`hosts/python/tests/frameworks/`, "
        "`hosts/node/test/frameworks/`).",
        "",
    ]
    for f in frameworks:
        version = f.get("version") or "unversioned"
        lines += [f"## {f['framework']} ({f.get('package', '')} {version}, {f['language']})", ""]
        orig = ORIGINAL.get(f["framework"].replace(" (JS)", "").replace(".js", ""))
        lines += ["| what went wrong | alone | with Interlock | the original published (alone) |",
                  "|---|---|---|---|"]
        for i, (row, title, _) in enumerate(ROWS):
            r = f["rows"].get(row, {})
            o = orig[i] if orig else "not in its table"
            lines.append(f"| {title} | {cell(r.get('alone'))} | {cell(r.get('with'))} | {o} |")
        if orig:
            lines.append(f"| Same framework, Interlock inside | | | {orig[4]} |")
        notes = [(title, side, r[side]["note"]) for row, title, _ in ROWS for side in ("alone", "with")
                 for r in [f["rows"].get(row, {})] if isinstance(r.get(side), dict) and r[side].get("note")]
        lines.append("")
        for title, side, note in notes:
            lines.append(f"- {title}, {side}: {note}")
        lines.append("")
    missing = [name for name in ORIGINAL if not any(
        f["framework"].replace(" (JS)", "").replace(".js", "") == name for f in frameworks)]
    if missing:
        lines += ["## Not run here", "", "The original's table also had: " + ", ".join(missing)
                  + " (no cells written by this repository's experiments yet).", ""]
    OUT.write_text("\n".join(lines))
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
