#!/usr/bin/env python3
"""What a component's bytes are: each core module's code by crate and by module path, from
the name section of a build that keeps it (results/size.md has the figures), e.g.:

    CARGO_TARGET_DIR=/tmp/size CARGO_PROFILE_RELEASE_STRIP=false cargo build --release \\
      --target wasm32-wasip2 --manifest-path guest/component/Cargo.toml [--features api]

    python3 scripts/wasm-size.py COMPONENT.wasm [--depth N] [--top N] [--parts]

Prints a Markdown table: code bytes per group (functions are grouped by the crate, and
within interlock's crates by module, of the first path in their demangled name; a trait
impl `<T as Trait>::f` counts for T's crate), data, and the rest of the file. `--parts`
groups by what the code is for (PARTS below) instead. A function inlined into another
counts where it landed: at opt-level "s" most of the core is inlined into the WIT exports.
"""
import argparse
import re
import sys
from collections import Counter


def leb(b, i):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


def sections(b, i, end):
    while i < end:
        sid = b[i]
        n, j = leb(b, i + 1)
        yield sid, j, j + n
        i = j + n


def core_modules(b):
    """(start, end) of each core module inside a component (or the file itself)."""
    if b[4:8] == b"\x01\x00\x00\x00":
        return [(0, len(b))]
    out = []
    for sid, s, e in sections(b, 8, len(b)):
        if sid == 1:
            out.append((s, e))
    return out


def module_parts(b, start, end):
    imports = 0
    bodies = []
    names = {}
    sizes = Counter()
    for sid, s, e in sections(b, start + 8, end):
        if sid == 0:
            n, j = leb(b, s)
            cname = b[j : j + n].decode()
            sizes[f"custom {cname}"] += e - s
            if cname == "name":
                k = j + n
                while k < e:
                    sub = b[k]
                    ln, k2 = leb(b, k + 1)
                    if sub == 1:
                        cnt, m = leb(b, k2)
                        for _ in range(cnt):
                            idx, m = leb(b, m)
                            ln2, m = leb(b, m)
                            names[idx] = b[m : m + ln2].decode(errors="replace")
                            m += ln2
                    k = k2 + ln
        elif sid == 2:
            cnt, j = leb(b, s)
            for _ in range(cnt):
                for _ in range(2):
                    ln, j = leb(b, j)
                    j += ln
                kind = b[j]
                j += 1
                if kind == 0:
                    _, j = leb(b, j)
                    imports += 1
                elif kind == 1:
                    j += 1
                    flags = b[j]
                    j += 1
                    _, j = leb(b, j)
                    if flags & 1:
                        _, j = leb(b, j)
                elif kind == 2:
                    flags = b[j]
                    j += 1
                    _, j = leb(b, j)
                    if flags & 1:
                        _, j = leb(b, j)
                elif kind == 3:
                    j += 2
            sizes["imports"] += e - s
        elif sid == 10:
            cnt, j = leb(b, s)
            for _ in range(cnt):
                ln, j2 = leb(b, j)
                bodies.append(j2 + ln - j)
                j = j2 + ln
        elif sid == 11:
            sizes["data"] += e - s
        else:
            sizes[SECTION.get(sid, f"section {sid}")] += e - s
    return imports, bodies, names, sizes


SECTION = {1: "types", 3: "functions", 4: "tables", 5: "memory", 6: "globals", 7: "exports", 8: "start",
           9: "elements", 12: "data count"}
SPLIT = re.compile(r"[<>&*() ,;\[\]]+")


ESC = {"$LT$": "<", "$GT$": ">", "$u20$": " ", "$RF$": "&", "$BP$": "*", "$C$": ",", "$u5b$": "[",
       "$u5d$": "]", "$u7b$": "{", "$u7d$": "}", "$u27$": "'", "$u7e$": "~", "$LP$": "(", "$RP$": ")", "..": "::"}


def demangle(name):
    """Rust's legacy mangling (`_ZN...E`) to a path, its hash left out."""
    if not name.startswith("_ZN"):
        return name
    i, parts = 3, []
    while i < len(name) and name[i].isdigit():
        j = i
        while name[j].isdigit():
            j += 1
        n = int(name[i:j])
        parts.append(name[j : j + n])
        i = j + n
    if parts and re.fullmatch(r"h[0-9a-f]{16}", parts[-1]):
        parts.pop()
    out = "::".join(parts)
    for k, v in ESC.items():
        out = out.replace(k, v)
    return out.replace("_<", "<").replace("::_", "::")


def group(name, depth):
    """The crate (and for interlock's, the module) a demangled function name belongs to."""
    n = demangle(name.strip())
    if "#" in n or n.startswith(("cabi_", "wasi:", "interlock:")):
        return "(WIT exports: wit-bindgen glue and what it inlined)"
    # `<T as Trait>::f`, `<T>::f`: T's path.
    while n.startswith(("<", "&", "*", "dyn ", "impl ", "mut ", "const ")):
        n = re.sub(r"^(<|&|\*|dyn |impl |mut |const )", "", n)
    parts = [p for p in SPLIT.split(n) if p]
    if not parts:
        return "(unnamed)"
    path = parts[0].split("::")
    path = [p for p in path if p]
    if not path:
        return "(unnamed)"
    crate = path[0]
    if re.fullmatch(r"[a-z_][a-z0-9_]*", crate) is None:
        return "(other: C, libc, compiler)"
    keep = depth if crate.startswith("interlock") else 1
    mods = [p for p in path[: keep] if re.fullmatch(r"[a-z_][a-z0-9_]*", p)]
    return "::".join(mods) or crate


# What the code is for: the first pattern that matches a demangled name wins.
PARTS = [
    ("float parsing (serde_json's float_roundtrip, core's dec2flt)", r"f64_|parse_decimal|parse_number|parse_exponent|dec2flt|lexical|parse_integer|parse_long_integer|::float"),
    ("JCS numbers (ryu-js; zmij, serde_json's float printer)", r"^ryu_js|^zmij"),
    ("serde_json (the rest: parser, Value, printer)", r"serde_json|serde_core|^serde::"),
    ("formatting (core::fmt, Display/Debug impls)", r"core::fmt|::fmt$|fmt::"),
    ("panic machinery (core::panicking, unwrap/expect failures)", r"panicking|panic|unwrap_failed|expect_failed"),
    ("allocator (dlmalloc, cabi_realloc)", r"dlmalloc|cabi_realloc|__rust_alloc|__rust_dealloc|__rust_realloc|alloc::alloc::"),
    ("the HTTP API (interlock_core::http_api)", r"http_api|http-api"),
    ("people (interlock_core::gate::people, rules, webhooks)", r"gate::people|interlock_core::rules|interlock_core::webhooks|#webhook|#scoreboard|#inbox|#decide|#set-approval-rules"),
    ("the tools mapping (interlock_core::tools)", r"interlock_core::tools|interlock:gate/tools"),
    ("the effects loop (interlock_core::effects)", r"interlock_core::effects|interlock:gate/effects"),
    ("the journal's backends (adapters/journal, journal-format)", r"interlock_journal"),
    ("hashing (sha2, hmac, hex, base64)", r"^sha2|^hmac|^hex|^base64|digest|block_buffer"),
    ("collections, sorting and drop glue, one copy per type (alloc, core::slice::sort, drop_in_place)", r"^alloc::|^core::slice::sort|btree|hashbrown|^core::ptr::drop_in_place"),
    ("the gate's other exports (wit-bindgen glue and the core inlined into it)", r"#|^interlock:|^wasi:"),
    ("the rest of the core (gate, entries, receipts, authority, canon)", r"^interlock_core|^interlock_component"),
]


def part(name):
    n = demangle(name)
    for label, pat in PARTS:
        if re.search(pat, n):
            return label
    return "other (core, libc, compiler builtins)"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("wasm")
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--parts", action="store_true")
    a = ap.parse_args()
    b = open(a.wasm, "rb").read()
    mods = core_modules(b)
    groups = Counter()
    other = Counter()
    total_code = 0
    named = False
    for start, end in mods:
        imports, bodies, names, sizes = module_parts(b, start, end)
        named = named or bool(names)
        for i, size in enumerate(bodies):
            n = names.get(imports + i, "(unnamed)")
            groups[part(n) if a.parts else group(n, a.depth)] += size
            total_code += size
        other.update(sizes)
    if not named:
        print(f"{a.wasm}: no name section (build with CARGO_PROFILE_RELEASE_STRIP=false: see this script's doc)", file=sys.stderr)
    inside = sum(e - s for s, e in mods)
    dbg = sum(v for k, v in other.items() if k.startswith("custom name") or k.startswith("custom .debug"))
    shipped = len(b) - dbg
    print(f"{a.wasm}: {shipped:,} bytes without name and debug sections; {len(mods)} core module(s); code {total_code:,} bytes\n")
    print("| what | bytes | share |")
    print("|---|---:|---:|")
    rows = sorted(groups.items(), key=lambda kv: -kv[1])
    shown = rows[: a.top]
    for k, v in shown:
        print(f"| code: {k} | {v:,} | {100 * v / shipped:.1f}% |")
    rest = sum(v for _, v in rows[a.top :])
    if rest:
        print(f"| code: {len(rows) - a.top} more groups | {rest:,} | {100 * rest / shipped:.1f}% |")
    for k, v in sorted(other.items(), key=lambda kv: -kv[1]):
        if k.startswith("custom name") or k.startswith("custom .debug"):
            continue  # only in the scratch build
        print(f"| {k} | {v:,} | {100 * v / shipped:.1f}% |")
    wrapper = len(b) - inside
    print(f"| component wrapper (types, imports, exports, canon) | {wrapper:,} | {100 * wrapper / shipped:.1f}% |")
    if dbg:
        print(f"\n(name and debug sections of the scratch build, {dbg:,} bytes, are not in the shipped file)")


if __name__ == "__main__":
    main()
