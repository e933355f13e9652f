#!/usr/bin/env python3
"""Counts lines of code per area: non-blank lines that are not comments (nor Python
docstrings), with tests and generated files counted apart.

    python3 scripts/lines.py            # the table
    python3 scripts/lines.py --json     # the same as JSON
    python3 scripts/lines.py --check    # also fail unless hosts/ <= 1.3 x (guest/ + adapters/ Rust)

Areas: guest/ (the core and the component), adapters/ (Rust only: journal backends and
targets), hosts/ by host, and the rest. A file is a test when it lives under a `test`,
`tests` or `conformance` folder or is named like one (`test_*.py`, `*.test.js`,
`tests.rs`); in a Rust source file, everything from a top-level `#[cfg(test)]` test module
on is test code. Generated and vendored files (node_modules, jco's output, bundles, lock files,
vendored WIT) are not counted. ARCHITECTURE.md states the goal this checks.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.3  # hosts/ at most this many times guest/ + adapters/ Rust (ARCHITECTURE.md)

EXTS = {".rs": "rust", ".js": "js", ".mjs": "js", ".ts": "js", ".py": "python", ".wit": "wit"}
SKIP_PARTS = {"node_modules", "gen", "dist", ".venv", "deps", "target", "__pycache__"}
TEST_DIRS = {"test", "tests", "conformance", "fixtures"}


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.splitlines()]


def is_test_path(rel: Path) -> bool:
    name = rel.name
    return (bool(TEST_DIRS & set(rel.parts[:-1])) or name.startswith("test_") or name.endswith(".test.js")
            or name in ("tests.rs", "conftest.py") or name.endswith("_test.rs"))


def c_like(text: str) -> list[str]:
    """Lines of code in Rust/JS/WIT text: `//` and `/* */` comments removed."""
    code, in_block = [], False
    for line in text.splitlines():
        s, out = line, ""
        while s:
            if in_block:
                end = s.find("*/")
                if end < 0:
                    s = ""
                else:
                    s, in_block = s[end + 2:], False
                continue
            start = s.find("/*")
            slash = s.find("//")
            # A `//` inside a string would count as a comment: rare enough here (URLs in
            # strings are), and it only ever undercounts a line that has code before it.
            if slash >= 0 and (start < 0 or slash < start):
                out += s[:slash]
                s = ""
            elif start >= 0:
                out += s[:start]
                s, in_block = s[start + 2:], True
            else:
                out += s
                s = ""
        code.append(out)
    return code


def python_lines(text: str) -> list[str]:
    """Lines of Python code: comments and docstrings blanked."""
    lines = text.splitlines()
    blank: set[int] = set()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return lines
    prev = tokenize.NEWLINE
    for tok in tokens:
        if tok.type == tokenize.COMMENT:
            row = tok.start[0] - 1
            if lines[row].strip().startswith("#"):
                blank.add(row)
        elif tok.type == tokenize.STRING and prev in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL):
            # A string that is a whole statement: a docstring.
            blank.update(range(tok.start[0] - 1, tok.end[0]))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            prev = tok.type
    return ["" if i in blank else line for i, line in enumerate(lines)]


def count(path: Path) -> tuple[int, int]:
    """(code lines, test code lines) of one file."""
    lang = EXTS[path.suffix]
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = python_lines(text) if lang == "python" else c_like(text)
    cut = len(lines)
    if lang == "rust":
        raw = text.splitlines()
        for i, line in enumerate(raw):
            # A test module (`#[cfg(test)]` then `mod`), not a test-only item such as
            # `extern crate std;` at the top of a no_std crate.
            following = next((r for r in raw[i + 1:] if r.strip()), "")
            if line.startswith("#[cfg(test)]") and following.lstrip().startswith(("mod ", "pub mod ")):
                cut = i
                break
    code = sum(1 for line in lines[:cut] if line.strip())
    tests = sum(1 for line in lines[cut:] if line.strip())
    return code, tests


def area(rel: Path) -> str:
    parts = rel.parts
    if parts[0] in ("guest", "hosts") and len(parts) > 2:
        return f"{parts[0]}/{parts[1]}"
    if parts[0] == "adapters" and len(parts) > 2:
        return f"adapters/{parts[1]}"
    return parts[0]


def measure() -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for path in tracked():
        rel = path.relative_to(ROOT)
        if path.suffix not in EXTS or SKIP_PARTS & set(rel.parts) or not path.is_file():
            continue
        if rel.name.endswith(".d.ts") or re.search(r"\.min\.js$", rel.name):
            continue
        code, tests = count(path)
        row = table.setdefault(area(rel), {})
        kind = EXTS[path.suffix]
        if is_test_path(rel):
            tests, code = tests + code, 0
        row[kind] = row.get(kind, 0) + code
        row["tests"] = row.get("tests", 0) + tests
    return table


def totals(table: dict[str, dict[str, int]]) -> dict[str, int]:
    def code(prefix: str, langs: tuple[str, ...] = ("rust", "js", "python", "wit")) -> int:
        return sum(v for a, row in table.items() if a == prefix or a.startswith(prefix + "/")
                   for k, v in row.items() if k in langs)
    return {
        "guest": code("guest"),
        "adapters_rust": code("adapters", ("rust",)),
        "hosts": code("hosts"),
    }


def main() -> int:
    table = measure()
    t = totals(table)
    ratio = t["hosts"] / max(1, t["guest"] + t["adapters_rust"])
    if "--json" in sys.argv:
        print(json.dumps({"areas": table, "totals": t, "ratio": round(ratio, 3), "goal": GOAL}, indent=1))
    else:
        langs = ["rust", "js", "python", "wit", "tests"]
        print(f"{'area':32} " + " ".join(f"{k:>7}" for k in langs))
        for a in sorted(table):
            print(f"{a:32} " + " ".join(f"{table[a].get(k, 0):>7}" for k in langs))
        print()
        print(f"guest/ {t['guest']}, adapters/ Rust {t['adapters_rust']}, hosts/ {t['hosts']}: "
              f"hosts / (guest + adapters Rust) = {ratio:.2f} (goal <= {GOAL})")
    if "--check" in sys.argv and ratio > GOAL:
        print(f"lines.py: hosts/ is {ratio:.2f} times guest/ + adapters/ Rust, over the goal of {GOAL}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
