#!/usr/bin/env python3
"""Check Interlock's proofs from outside the component, with the log's or signer's public
key only: RFC 8785 (JCS) from `rfc8785`, Ed25519 from `cryptography`, SHA-256 from hashlib.
No Interlock code is involved.

usage: check_proof.py PUBLIC_KEY_FILE receipt RECEIPT.json [JOURNAL.jsonl]
       check_proof.py PUBLIC_KEY_FILE bundle BUNDLE.json
       check_proof.py PUBLIC_KEY_FILE checkpoint CHECKPOINT.txt
       check_proof.py PUBLIC_KEY_FILE inclusion PROOF.json [CHECKPOINT.txt]
       check_proof.py PUBLIC_KEY_FILE consistency PROOF.json OLD_CHECKPOINT.txt

The key is a C2SP signed-note verifier key, `<name>+<key id>+<base64(0x01 || key)>`, key id
= SHA-256(name || 0x0A || 0x01 || key)[:4]. A receipt's or bundle's `signature` is
{alg: Ed25519, key: <name>+<key id>, value: base64}, over the JCS text of the document
without `signature`. A checkpoint is a C2SP signed note: `<origin>\\n<size>\\n<base64 root>\\n`,
a blank line, `— <name> base64(key id || signature)` lines. The log's leaf of a receipt is
SHA-256 of its JCS text without `signature`; its tree is RFC 6962's (leaf 0x00, node 0x01),
its proofs checked by the algorithms of RFC 9162, 2.1.3.2 and 2.1.4.2. Prints what holds;
exits 1 on any mismatch (each printed as MISMATCH), 2 on a usage error.
"""
import base64
import hashlib
import json
import sys

import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from check_journal import check_journal, read

EM_DASH = "\u2014"


class Mismatch(Exception):
    pass


def sha256(b):
    return hashlib.sha256(b).digest()


def parse_key(text):
    name, key_id, data = text.strip().split("+", 2)
    raw = base64.b64decode(data, validate=True)
    if len(raw) != 33 or raw[0] != 1:
        raise Mismatch("the public key is not an Ed25519 signed-note key")
    if sha256(name.encode() + b"\n" + raw).hex()[:8] != key_id:
        raise Mismatch("the public key's id does not match its name and key")
    return name, key_id, Ed25519PublicKey.from_public_bytes(raw[1:])


def signed_body(doc):
    return rfc8785.dumps({k: v for k, v in doc.items() if k != "signature"})


def check_signature(doc, key, what):
    name, key_id, public = key
    sig = doc.get("signature") or {}
    if sig.get("alg") != "Ed25519" or sig.get("key") != f"{name}+{key_id}":
        raise Mismatch(f"{what} is not signed with Ed25519 by {name}+{key_id}")
    try:
        public.verify(base64.b64decode(sig.get("value", ""), validate=True), signed_body(doc))
    except (InvalidSignature, ValueError):
        raise Mismatch(f"{what}: the signature does not match its content") from None


def open_note(note, key):
    """The checkpoint a note signed by `key` carries: (origin, size, root)."""
    name, key_id, public = key
    text, sep, sigs = note.rpartition("\n\n")
    if not sep or not sigs.endswith("\n"):
        raise Mismatch("the checkpoint is not a signed note")
    text += "\n"
    verified = False
    for line in sigs[:-1].split("\n"):
        if not line.startswith(EM_DASH + " "):
            raise Mismatch("a signature line of the checkpoint is malformed")
        signer, b64 = line[2:].split(" ", 1)
        sig = base64.b64decode(b64, validate=True)
        if signer != name or sig[:4].hex() != key_id:
            continue  # another key's (a witness's) signature
        try:
            public.verify(sig[4:], text.encode())
        except InvalidSignature:
            raise Mismatch("the checkpoint's signature does not verify") from None
        verified = True
    if not verified:
        raise Mismatch(f"the checkpoint is not signed by {name}+{key_id}")
    lines = text[:-1].split("\n")
    if len(lines) < 3 or lines[0] != name or not lines[1].isdigit() or (lines[1] != "0" and lines[1][0] == "0"):
        raise Mismatch("the checkpoint's text is not origin, tree size, root hash (of this log)")
    root = base64.b64decode(lines[2], validate=True)
    if len(root) != 32:
        raise Mismatch("the checkpoint's root hash is not 32 bytes")
    return lines[0], int(lines[1]), root


def node(left, right):
    return sha256(b"\x01" + left + right)


def root_from_inclusion(leaf, index, size, path):
    """RFC 9162, 2.1.3.2."""
    if index >= size:
        raise Mismatch(f"leaf {index} is not in a tree of {size}")
    fn, sn, r = index, size - 1, sha256(b"\x00" + leaf)
    for p in path:
        if sn == 0:
            raise Mismatch("the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node(p, r)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise Mismatch("the inclusion proof is too short")
    return r


def check_consistency(first, first_hash, second, second_hash, path):
    """RFC 9162, 2.1.4.2 (an empty proof for equal trees and from the empty tree)."""
    if first > second:
        raise Mismatch("the old tree is larger than the new")
    if first == second:
        if path or first_hash != second_hash:
            raise Mismatch("equal sizes with other roots: a forked log")
        return
    if first == 0:
        if path:
            raise Mismatch("a proof from the empty tree is empty")
        return
    if not path:
        raise Mismatch("the consistency proof is empty")
    if first & (first - 1) == 0:
        path = [first_hash] + path
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise Mismatch("the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr, sr = node(c, fr), node(c, sr)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if fr != first_hash or sr != second_hash or sn != 0:
        raise Mismatch("the old tree is not a prefix of the new: a forked or rewritten log")


def hashes(proof):
    return [base64.b64decode(h, validate=True) for h in proof["hashes"]]


def load(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def check_receipt(key, path, journal=None):
    r = read(load(path))
    check_signature(r, key, "the receipt")
    said = f"receipt of {r.get('effect_id')}: Ed25519 signature holds"
    if journal is not None:
        problems = []
        streams = check_journal(journal, problems)
        for p in problems:
            print("MISMATCH", p)
        # Its own stream, its people part and every authority stream it anchors.
        pins = [r] + ([r["people"]] if "people" in r else []) + list(r.get("anchors", []))
        for pin in pins:
            chain, head = streams.get(pin["stream"], []), pin["head"]
            if not 0 < head["length"] <= len(chain) or chain[head["length"] - 1]["hash"] != head["hash"]:
                raise Mismatch(f"the journal does not hold {pin['stream']} as the receipt pins it")
        if problems:
            raise Mismatch("the journal's chains do not hold")
        said += f"; the journal holds the {len(pins)} stream(s) it pins"
    return said


QUESTIONS = ("happened_once", "authorized_when_fired", "premises_held", "who_decided", "service_confirmed")


def at(v, *path):
    """The member at `path` of nested objects, or None."""
    for k in path:
        v = v.get(k) if isinstance(v, dict) else None
    return v


def text(v):
    return v if isinstance(v, str) else ""


def five(r):
    """The five answers a receipt gives (ARCHITECTURE.md, "Proof for outsiders"): each
    yes, no, unknown or not_fired; who_decided the names. Recomputed here, not read."""
    states = [text(at(e, "state")) for e in r.get("entries") or []]
    sends, executed = states.count("DISPATCHED"), text(r.get("executed"))
    final, reason = text(r.get("final")), text(r.get("reason"))
    authorized = r.get("authorized") if isinstance(r.get("authorized"), list) else []
    once = executed if executed in ("yes", "no") else "unknown"
    # Every send after an AUTHORIZED, and each AUTHORIZED names the lease or approval checked.
    before = states[: states.index("AUTHORIZED")] if "AUTHORIZED" in states else states
    named = [a for a in authorized if isinstance(at(a, "checks", "lease", "name"), str)
             or isinstance(at(a, "checks", "approval", "id"), str)]
    if sends == 0:
        fired = "not_fired"
    else:
        fired = "yes" if "DISPATCHED" not in before and named and len(named) == len(authorized) else "no"
    declared = isinstance(at(r, "proposed", "premises"), dict) and at(r, "proposed", "premises")
    if reason == "premise_changed":
        premises = "no"
    elif sends == 0:
        premises = "not_fired"
    elif not declared:
        premises = "yes"
    else:
        premises = "yes" if all(isinstance(at(a, "checks", "premises_held"), dict) for a in authorized) else "no"
    names = [r["agent"]] if text(r.get("agent")) else []
    deciders = [at(a, "checks", "approval", "approver") for a in authorized]
    decisions = at(r, "people", "decisions") if "people" in r else None
    deciders += [d if isinstance(d, str) else "?" for d in
                 (at(x, "decider") for x in (decisions if isinstance(decisions, list) else []))]
    for who in deciders:
        if isinstance(who, str) and who not in names:
            names.append(who)
    if "confirmed" in r:
        confirmed = "yes"
    elif final == "COMMITTED" and text(r.get("via")) in ("send", "recovery-retry", "recovery-query"):
        confirmed = "yes"
    elif reason == "target_rejected":
        confirmed = "no"
    else:
        confirmed = "not_fired" if sends == 0 else "unknown"
    return {"effect_id": text(r.get("effect_id")), "final": final, "executed": executed,
            "happened_once": once, "authorized_when_fired": fired, "premises_held": premises,
            "who_decided": names, "service_confirmed": confirmed}


def check_bundle(key, path):
    text = load(path)
    try:
        b = read(text)
    except ValueError:
        raise Mismatch("the bundle is not JSON (cut short?)") from None
    if b.get("bundle") != "interlock-bundle/1":
        raise Mismatch(f"unknown bundle format {b.get('bundle')!r}")
    check_signature(b, key, "the bundle")
    if b.get("count") != len(b.get("receipts", [])):
        raise Mismatch("the bundle's count does not match its receipts")
    answers = b.get("answers")
    if not isinstance(answers, list) or len(answers) != len(b["receipts"]):
        raise Mismatch("the bundle has no answers, one per receipt")
    # The bundle's answers must be the ones its receipts give (their `why` is prose, not
    # compared).
    for r, said in zip(b["receipts"], answers):
        mine = five(r)
        for q, want in mine.items():
            got = said.get(q)
            got = got.get("answer") if q in QUESTIONS and isinstance(got, dict) else got
            if got != want:
                raise Mismatch(f"the bundle answers {q} for {mine['effect_id']} with {got!r}; its receipt gives {want!r}")
        print(f"  {mine['effect_id']} {mine['final']}: " + ", ".join(f"{q} {mine[q]}" for q in QUESTIONS))
    return f"bundle of {b['count']} receipt(s), period {b.get('period')}: Ed25519 signature holds, its answers follow from its receipts"


def check_inclusion(key, path, checkpoint=None):
    p = read(load(path))
    if p.get("proof") != "interlock-inclusion-proof/1":
        raise Mismatch(f"unknown proof format {p.get('proof')!r}")
    origin, size, root = open_note(load(checkpoint) if checkpoint else p["checkpoint"], key)
    if p["tree_size"] != size:
        raise Mismatch(f"the proof is for a tree of {p['tree_size']}, the checkpoint is of {size}")
    leaf = sha256(signed_body(p["receipt"]))
    if root_from_inclusion(leaf, p["leaf_index"], size, hashes(p)) != root:
        raise Mismatch("the receipt is not in the tree the checkpoint signs")
    return f"receipt of {p['receipt'].get('effect_id')} is leaf {p['leaf_index']} of {origin} at size {size}"


def check_consistency_proof(key, path, old_checkpoint):
    p = read(load(path))
    if p.get("proof") != "interlock-consistency-proof/1":
        raise Mismatch(f"unknown proof format {p.get('proof')!r}")
    _, old_size, old_root = open_note(load(old_checkpoint), key)
    origin, new_size, new_root = open_note(p["checkpoint"], key)
    if (p["old_size"], p["new_size"]) != (old_size, new_size):
        raise Mismatch("the proof is for other tree sizes than the checkpoints'")
    check_consistency(old_size, old_root, new_size, new_root, hashes(p))
    return f"{origin} at size {new_size} extends the checkpoint held (size {old_size})"


def main(argv):
    kinds = {"receipt": (1, 2), "bundle": (1, 1), "checkpoint": (1, 1), "inclusion": (1, 2), "consistency": (2, 2)}
    if len(argv) < 4 or argv[2] not in kinds or not kinds[argv[2]][0] <= len(argv) - 3 <= kinds[argv[2]][1]:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    try:
        key = parse_key(load(argv[1]))
        what, files = argv[2], argv[3:]
        if what == "receipt":
            said = check_receipt(key, *files)
        elif what == "bundle":
            said = check_bundle(key, *files)
        elif what == "checkpoint":
            origin, size, root = open_note(load(files[0]), key)
            said = f"checkpoint of {origin}: {size} leaves, root {root.hex()}"
        elif what == "inclusion":
            said = check_inclusion(key, *files)
        else:
            said = check_consistency_proof(key, *files)
    except (Mismatch, KeyError, TypeError, ValueError) as e:
        print("MISMATCH", e if isinstance(e, Mismatch) else f"malformed: {e!r}")
        return 1
    print(f"ok: {said}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
