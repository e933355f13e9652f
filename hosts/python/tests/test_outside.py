"""Entry hashes and a signed receipt recomputed from outside the component: the short script
tests/outside/check_journal.py (RFC 8785 by the `rfc8785` package, hashlib, hmac) checks the
CLI-made fixture and a journal this host writes, and catches a one-byte edit."""

import subprocess
import sys

import pytest

from conftest import REPO
from interlock import COMMITTED, FakeClock, Interlock
from interlock.payments_sim import Payments

OUTSIDE = REPO / "tests" / "outside"
FIXTURE = OUTSIDE / "fixture"
KEY = "a key for the outside check, ключ 🔑".encode()


def check(*args):
    run = subprocess.run([sys.executable, str(OUTSIDE / "check_journal.py"), *map(str, args)],
                         capture_output=True, text=True)
    assert run.returncode in (0, 1), run.stderr
    return run.returncode, run.stdout


def test_the_cli_fixture_checks_out():
    key = (FIXTURE / "key.hex").read_text().strip()
    rc, out = check(FIXTURE / "journal.jsonl", FIXTURE / "receipt.json", key)
    assert rc == 0 and out.endswith("ok\n"), out
    assert "6 entries in 3 streams" in out
    rc, out = check(FIXTURE / "journal.jsonl", FIXTURE / "receipt.json", KEY.hex())
    assert rc == 1 and "the signature does not hold" in out, out


@pytest.fixture
def written(tmp_path):
    """A journal written by this host, with an effect whose JCS form differs from plain
    sorted JSON (a key above U+FFFF before one at U+E000, 0.000001, 2.0, -0), and its
    receipt signed with KEY."""
    payments = Payments.create(tmp_path / "payments.json", "2")
    payments.add_order("order_881", 10_000)
    gate = Interlock(tmp_path / ".interlock", clock=FakeClock(1_800_000_000_000), standing_lease=True)

    @gate.effect(key=lambda order, amount, note, rate, tags: f"refund:{order}",
                 premises=lambda order, amount, note, rate, tags, idempotency_key:
                     payments.premises(order, idempotency_key),
                 lookup=lambda order, amount, note, rate, tags, idempotency_key:
                     payments.find_by_reference(idempotency_key))
    def refund(order, amount, note, rate, tags, idempotency_key):
        return payments.refund(order, amount, reference=idempotency_key)

    out = refund("order_881", 2000, "café 😀 \u2028 \x1f", 0.000001,
                 {"\ue000": "private use", "😀": "emoji", "two": 2.0, "zero": -0.0})
    assert out.status == COMMITTED, out
    receipt = tmp_path / "receipt.json"
    receipt.write_text(gate.receipt(out.effect_id, key=KEY).text, encoding="utf-8")
    gate.close()
    journal = tmp_path / ".interlock" / "journal.jsonl"
    text = journal.read_text(encoding="utf-8")
    # What the check below proves would not hold for serde_json's sorted output.
    assert '"rate":0.000001' in text and '"two":2,' in text and '"zero":0,' in text
    assert text.index('"😀":"emoji"') < text.index('"\ue000":"private use"')
    return journal, receipt


def test_a_journal_written_here_checks_out(written):
    journal, receipt = written
    rc, out = check(journal, receipt, KEY.hex())
    assert rc == 0 and out.endswith("ok\n"), out


@pytest.mark.parametrize("target", ['"rate":0.00000', '"amount":200', '"hash":"'])
def test_a_one_byte_edit_is_caught(written, target):
    journal, receipt = written
    data = bytearray(journal.read_bytes())
    at = data.index(target.encode()) + len(target)
    data[at] = ord("7") if data[at] != ord("7") else ord("8")
    journal.write_bytes(bytes(data))
    rc, out = check(journal, receipt, KEY.hex())
    assert rc == 1 and "MISMATCH" in out, out


def test_an_edited_receipt_is_caught(written):
    journal, receipt = written
    receipt.write_text(receipt.read_text(encoding="utf-8").replace('"attempts":1', '"attempts":0'),
                       encoding="utf-8")
    rc, out = check(journal, receipt, KEY.hex())
    assert rc == 1 and "the signature does not hold" in out, out
