"""Proof for outsiders through the Python host: a key pair, an Ed25519 receipt checked with
the public key alone, the transparency log (checkpoints, inclusion and consistency proofs),
a bundle with its five answers; bad keys and documents are typed errors that write nothing;
and tests/outside/check_proof.py (rfc8785, cryptography, hashlib: no Interlock code)
accepts everything this host produced and rejects every mutated copy."""

import base64
import json
import os
import stat
import subprocess
import sys

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from conftest import REPO
from interlock import (
    COMMITTED,
    BadKey,
    BadSignature,
    FakeClock,
    Interlock,
    Malformed,
    ProofFailed,
    UnknownVersion,
)
from interlock.keys import read_key, write_private_key
from interlock.payments_sim import Payments

CHECK = REPO / "tests" / "outside" / "check_proof.py"
T0 = 1_800_000_000_000


def outside(*args):
    run = subprocess.run([sys.executable, str(CHECK), *map(str, args)], capture_output=True, text=True)
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, run.stdout


@pytest.fixture
def shop(tmp_path):
    """A journal with two refunds, logged, and a key pair on disk."""
    payments = Payments.create(tmp_path / "payments.json", "2")
    for order in ("order_881", "order_882", "order_883"):
        payments.add_order(order, 10_000)
    clock = FakeClock(T0)
    gate = Interlock(tmp_path / ".interlock", clock=clock, standing_lease=True)

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key),
                 lookup=lambda order, amount, idempotency_key: payments.find_by_reference(idempotency_key))
    def refund(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    signer, verifier = gate.generate_key("shop.example/interlock")
    write_private_key(tmp_path / "shop.key", signer)
    (tmp_path / "shop.pub").write_text(verifier + "\n")
    ids = []
    for order in ("order_881", "order_882"):
        out = refund(order, 2000)
        assert out.status == COMMITTED, out
        ids.append(out.effect_id)
    yield gate, tmp_path, ids, refund
    gate.close()


def test_keys_are_written_owner_only_and_read_from_a_file_or_the_environment(shop, monkeypatch):
    gate, d, _, _ = shop
    assert stat.S_IMODE(os.stat(d / "shop.key").st_mode) == 0o600
    with pytest.raises(FileExistsError):
        write_private_key(d / "shop.key", "x")
    private = read_key(d / "shop.key", what="private key")
    monkeypatch.setenv("SHOP_PUBLIC_KEY", (d / "shop.pub").read_text())
    assert read_key(env="SHOP_PUBLIC_KEY") == (d / "shop.pub").read_text()
    with pytest.raises(BadKey, match="holds no public key"):
        read_key(env="NOT_SET_ANYWHERE", what="public key")
    with pytest.raises(BadKey, match="cannot read"):
        read_key(d / "missing.key")
    # The wrong half, a mangled key: typed, and the key is never in the message.
    with pytest.raises(BadKey, match="private signer key") as e:
        gate.check_receipt_signature("{}", private)
    assert private.strip().split("+", 4)[4] not in str(e.value)
    with pytest.raises(BadKey, match="PRIVATE\\+KEY\\+"):
        gate.signed_receipt("0" * 32, (d / "shop.pub").read_text())
    with pytest.raises(BadKey):
        gate.checkpoint(private.replace("A", "B", 1))


def test_a_signed_receipt_checks_with_the_public_key_alone(shop):
    gate, d, ids, _ = shop
    private, public = read_key(d / "shop.key"), read_key(d / "shop.pub")
    r = gate.signed_receipt(ids[0], private)
    assert r["signature"]["alg"] == "Ed25519" and r["signature"]["key"].startswith("shop.example/interlock+")
    assert [a["stream"] for a in r["anchors"]] == ["lease:agent-standing"]
    assert gate.check_receipt_signature(r, public) == ids[0]
    assert gate.check_signed_receipt(r, public).ok
    other = gate.generate_key("shop.example/interlock")[1]
    with pytest.raises(BadSignature, match="not by"):
        gate.check_receipt_signature(r, other)
    assert not gate.check_signed_receipt(r, other).ok
    edited = r.text.replace('"amount_cents":2000', '"amount_cents":2001')
    with pytest.raises(BadSignature, match="changed after signing"):
        gate.check_receipt_signature(edited, public)
    with pytest.raises(Malformed):
        gate.check_receipt_signature(r.text[:-3], public)
    # HMAC receipts as before.
    assert gate.check_receipt(gate.receipt(ids[0], key=b"k"), b"k").ok


def test_the_log_proves_inclusion_and_consistency(shop):
    gate, d, ids, refund = shop
    private, public = read_key(d / "shop.key"), read_key(d / "shop.pub")
    journal = d / ".interlock" / "journal.jsonl"
    c1 = gate.checkpoint(private)
    assert (c1["tree_size"], c1["appended"]) == (2, 2)
    before = journal.read_bytes()
    assert gate.checkpoint(private)["appended"] == 0 and journal.read_bytes() == before
    proof = gate.prove_inclusion(ids[1])
    assert gate.check_inclusion(proof, public) == {
        "effect_id": ids[1], "leaf_index": 1, "tree_size": 2, "origin": "shop.example/interlock"}
    assert refund("order_883", 500).status == COMMITTED
    c2 = gate.checkpoint(private)
    assert c2["tree_size"] == 3
    cons = gate.prove_consistency(2)
    assert gate.check_consistency(cons, c1["checkpoint"], public)["tree_size"] == 3
    assert gate.verify(checkpoints=[c1["checkpoint"]]).ok
    # A proof for another tree; an unknown version; another key: typed, nothing written.
    before = journal.read_bytes()
    with pytest.raises(ProofFailed, match="another tree"):
        gate.check_inclusion(proof, public, checkpoint=c2["checkpoint"])
    with pytest.raises(UnknownVersion):
        gate.check_inclusion(proof.replace("inclusion-proof/1", "inclusion-proof/2"), public)
    with pytest.raises(BadSignature):
        gate.check_consistency(cons, c1["checkpoint"], gate.generate_key("shop.example/interlock")[1])
    with pytest.raises(ProofFailed, match="no checkpoint of 7 leaves"):
        gate.prove_inclusion(ids[0], tree_size=7)
    assert journal.read_bytes() == before


def test_a_bundle_answers_the_five_questions(shop):
    gate, d, ids, _ = shop
    private, public = read_key(d / "shop.key"), read_key(d / "shop.pub")
    bundle = gate.bundle(private, from_ms=T0, to_ms=T0 + 1)
    answers = gate.check_bundle(bundle, public)
    assert [e["effect_id"] for e in answers["effects"]] == ids
    for e in answers["effects"]:
        for q in ("happened_once", "authorized_when_fired", "premises_held", "service_confirmed"):
            assert e[q]["answer"] == "yes", (q, e[q])
        assert e["who_decided"]["answer"] == ["agent"]
    with pytest.raises(Malformed, match="cut short"):
        gate.check_bundle(bundle[: len(bundle) // 2], public)
    with pytest.raises(UnknownVersion):
        gate.check_bundle(bundle.replace("interlock-bundle/1", "interlock-bundle/0"), public)
    with pytest.raises(BadSignature):
        gate.check_bundle(bundle, gate.generate_key("shop.example/interlock")[1])


def resign(doc, private):
    """`doc` signed again with the signed-note private key `private`, as a forger holding
    the key would: Ed25519 over the RFC 8785 text without `signature`."""
    seed = base64.b64decode(private.strip().split("+", 4)[4])[1:]  # its base64 may hold a "+"
    body = {k: v for k, v in doc.items() if k != "signature"}
    sig = Ed25519PrivateKey.from_private_bytes(seed).sign(rfc8785.dumps(body))
    return json.dumps({**body, "signature": {**doc["signature"], "value": base64.b64encode(sig).decode()}})


def test_the_outside_checker_recomputes_a_bundles_answers(shop):
    gate, d, ids, _ = shop
    # Every kind of answer (tests/outside/fixture/bundle.json, made by the core's test):
    # each recomputed from its receipt agrees with what the bundle says.
    fixture = REPO / "tests" / "outside" / "fixture"
    rc, out = outside(fixture / "bundle.pub", "bundle", fixture / "bundle.json")
    assert rc == 0 and "its answers follow from its receipts" in out, out
    for kind in ("happened_once unknown", "premises_held no", "service_confirmed not_fired",
                 "authorized_when_fired not_fired", "service_confirmed no"):
        assert kind in out, (kind, out)
    # An answer changed and the bundle signed again with the right key: the signature holds,
    # the answer does not, and both the checker and the gate say which.
    private, public = read_key(d / "shop.key"), read_key(d / "shop.pub")
    doc = json.loads(gate.bundle(private))
    doc["answers"][1]["service_confirmed"]["answer"] = "unknown"
    forged = resign(doc, private)
    (d / "forged.json").write_text(forged, encoding="utf-8")
    rc, out = outside(d / "shop.pub", "bundle", d / "forged.json")
    assert rc == 1 and f"service_confirmed for {ids[1]}" in out, out
    with pytest.raises(ProofFailed, match="service_confirmed"):
        gate.check_bundle(forged, public)
    doc["answers"][1]["service_confirmed"]["answer"] = "yes"
    doc["answers"][0]["who_decided"]["answer"] = ["agent", "mallory"]
    (d / "forged.json").write_text(resign(doc, private), encoding="utf-8")
    rc, out = outside(d / "shop.pub", "bundle", d / "forged.json")
    assert rc == 1 and "who_decided" in out, out


def flip(text, at):
    """`text` with the character at `at` changed (a digit or letter to another)."""
    c = text[at]
    return text[:at] + ("1" if c != "1" else "2") + text[at + 1:]


def test_the_outside_checker_accepts_what_this_host_made_and_rejects_every_mutation(shop):
    gate, d, ids, refund = shop
    private, public = read_key(d / "shop.key"), read_key(d / "shop.pub")
    journal = d / ".interlock" / "journal.jsonl"
    c1 = gate.checkpoint(private)["checkpoint"]
    assert refund("order_883", 500).status == COMMITTED
    c2 = gate.checkpoint(private)["checkpoint"]
    files = {
        "receipt.json": gate.signed_receipt(ids[0], private).text,
        "bundle.json": gate.bundle(private),
        "c1.txt": c1,
        "c2.txt": c2,
        "inclusion.json": gate.prove_inclusion(ids[1]),
        "consistency.json": gate.prove_consistency(2),
    }
    for name, text in files.items():
        (d / name).write_text(text, encoding="utf-8")
    pub = d / "shop.pub"
    good = [
        ("receipt", d / "receipt.json", journal),
        ("bundle", d / "bundle.json"),
        ("checkpoint", d / "c2.txt"),
        ("inclusion", d / "inclusion.json"),
        ("inclusion", d / "inclusion.json", d / "c2.txt"),
        ("consistency", d / "consistency.json", d / "c1.txt"),
    ]
    for args in good:
        rc, out = outside(pub, *args)
        assert rc == 0 and "\nok: " in "\n" + out, (args, out)

    # A swapped key: every document is refused.
    (d / "other.pub").write_text(gate.generate_key("shop.example/interlock")[1])
    for args in good:
        rc, out = outside(d / "other.pub", *args)
        assert rc == 1 and "MISMATCH" in out, (args, out)

    # Byte flips: every hex or base64 digit a signature, a hash or a root holds, and each
    # number, in each document (the checker must catch every one).
    tried = 0
    for name, kind, extra in [("receipt.json", "receipt", []), ("bundle.json", "bundle", []),
                              ("c2.txt", "checkpoint", []), ("inclusion.json", "inclusion", []),
                              ("consistency.json", "consistency", [d / "c1.txt"])]:
        text = files[name]
        spots = [i for i, ch in enumerate(text) if ch.isalnum()]
        for at in spots[:: max(1, len(spots) // 30)]:
            mutated = flip(text, at)
            if mutated == text:
                continue
            (d / "m").write_text(mutated, encoding="utf-8")
            rc, out = outside(pub, kind, d / "m", *extra)
            assert rc == 1, (name, at, text[max(0, at - 20):at + 20], out)
            tried += 1
    assert tried > 120

    # A forked log: a second journal signed with the same key, whose first leaf differs.
    fork = Interlock(d / "fork", clock=FakeClock(T0 + 5), standing_lease=True)
    payments = Payments.create(d / "p2.json", "2")
    for order in ("order_881", "order_882", "order_883"):
        payments.add_order(order, 10_000)

    @fork.effect(key=lambda order, amount: f"refund:{order}",
                 premises=lambda order, amount, idempotency_key: payments.premises(order, idempotency_key))
    def refund2(order, amount, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    refund2("order_881", 1999)
    refund2("order_882", 2000)
    fork.checkpoint(private)
    refund2("order_883", 1)
    fork.checkpoint(private)
    (d / "forked.json").write_text(fork.prove_consistency(2), encoding="utf-8")
    fork.close()
    rc, out = outside(pub, "consistency", d / "forked.json", d / "c1.txt")
    assert rc == 1 and "forked" in out, out
    with pytest.raises(ProofFailed, match="forked"):
        gate.check_consistency((d / "forked.json").read_text(), c1, public)
