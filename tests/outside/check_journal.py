#!/usr/bin/env python3
"""Check an Interlock journal, and optionally a signed receipt, from outside the component:
RFC 8785 (JCS) from the `rfc8785` package (pip install rfc8785), hashlib and hmac. No
Interlock code is involved.

usage: check_journal.py JOURNAL.jsonl [RECEIPT.json KEY_HEX]

Every line must be the JCS text of its entry, its `hash` the SHA-256 (hex) of the JCS text
of the entry without `hash`, its `seq` its place in its stream and its `prev` the hash of
the entry before it (64 zeros first). A receipt's `signature.value` must be the hex
HMAC-SHA256, under the key, of the JCS text of the receipt without `signature`, and its
`head` must be an entry of its stream. Prints a summary; exits 1 on any mismatch.
"""
import hashlib
import hmac
import json
import sys

import rfc8785

GENESIS = "0" * 64
SAFE = 2**53 - 1


def read(text):
    # JCS numbers are IEEE doubles, as in every JavaScript reader; rfc8785 refuses an int
    # it cannot hold exactly, so a larger one is read as the double it stands for.
    return json.loads(text, parse_int=lambda s: int(s) if abs(int(s)) <= SAFE else float(s))


def jcs(value):
    return rfc8785.dumps(value)


def without(obj, field):
    return {k: v for k, v in obj.items() if k != field}


def check_journal(path, problems):
    streams = {}  # name -> list of entries, in order
    with open(path, "rb") as f:
        lines = f.read().split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    for n, line in enumerate(lines, 1):
        try:
            entry = read(line.decode("utf-8"))
            name, seq = entry["stream"], entry["seq"]
            text, body = jcs(entry), jcs(without(entry, "hash"))
        except Exception as e:  # not JSON, not an object, no stream or seq, not JCS-able
            problems.append(f"line {n}: not an entry ({e!r})")
            continue
        chain = streams.setdefault(name, [])
        where = f"line {n} ({name} seq {seq})"
        if text != line:
            problems.append(f"{where}: the line is not the JCS text of its entry")
        if hashlib.sha256(body).hexdigest() != entry.get("hash"):
            problems.append(f"{where}: hash does not match the content")
        if seq != len(chain):
            problems.append(f"{where}: expected seq {len(chain)}")
        if entry.get("prev") != (chain[-1]["hash"] if chain else GENESIS):
            problems.append(f"{where}: prev is not the hash of the entry before it")
        chain.append(entry)
    return streams


def check_receipt(path, key, streams, problems):
    with open(path, "rb") as f:
        receipt = read(f.read().decode("utf-8"))
    sig = receipt.get("signature") or {}
    want = hmac.new(key, jcs(without(receipt, "signature")), hashlib.sha256).hexdigest()
    if sig.get("alg") != "HMAC-SHA256" or not hmac.compare_digest(str(sig.get("value")), want):
        problems.append("receipt: the signature does not hold")
    chain = streams.get(receipt.get("stream"), [])
    head = receipt.get("head") or {}
    length = head.get("length")
    if not isinstance(length, int) or not 0 < length <= len(chain):
        problems.append(f"receipt: head length {length}, the stream holds {len(chain)} entries")
    elif chain[length - 1]["hash"] != head.get("hash"):
        problems.append("receipt: head hash is not the stream's entry at that length")
    for e in receipt.get("entries", []):
        if not (isinstance(e.get("seq"), int) and e["seq"] < len(chain)
                and chain[e["seq"]]["hash"] == e.get("hash")):
            problems.append(f"receipt: entry seq {e.get('seq')} is not in the journal")
    return receipt


def main(argv):
    if len(argv) not in (2, 4):
        print("usage: check_journal.py JOURNAL.jsonl [RECEIPT.json KEY_HEX]", file=sys.stderr)
        return 2
    problems = []
    streams = check_journal(argv[1], problems)
    entries = sum(len(c) for c in streams.values())
    print(f"{argv[1]}: {entries} entries in {len(streams)} streams, hashes recomputed (RFC 8785)")
    if len(argv) == 4:
        r = check_receipt(argv[2], bytes.fromhex(argv[3]), streams, problems)
        head = r.get("head") or {}
        print(f"{argv[2]}: receipt of {r.get('stream')}, head {head.get('length')} entries, "
              f"HMAC-SHA256 recomputed (RFC 8785)")
    for p in problems:
        print("MISMATCH", p)
    print("ok" if not problems else f"{len(problems)} mismatch(es)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
