"""docs/targets.md, "write your own target": its code is these tests' bodies, between the
``# guide: NAME`` and ``# guide: end`` lines, and :func:`test_the_guide_shows_these_tests`
checks that the guide shows them as they are here (and the Rust one, from
guest/core/src/targets/tests.rs), so the guide cannot drift from code that runs.

The target written by hand is Stripe refunds through the official SDK, against localstripe
(its own process; it ignores Idempotency-Key, so the target is declared tier 2): what a user
writes for a service Interlock has no built-in target for."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest
import stripe

from interlock import Interlock, SimulatedCrash
from interlock.clock import FakeClock
from stripe_support import charge, localstripe_server, refunds_of

REPO = Path(__file__).resolve().parents[3]
GUIDE = REPO / "docs" / "targets.md"
SOURCES = {"python": Path(__file__), "rust": REPO / "guest" / "core" / "src" / "targets" / "tests.rs"}


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with localstripe_server(tmp_path_factory.mktemp("localstripe")) as url:
        yield url


def test_write_your_own_target(base_url: str, tmp_path: Path) -> None:
    journal = tmp_path / "journal"
    clock = FakeClock(1_800_000_000_000)
    ch = charge(stripe.StripeClient("sk_test_guide", base_addresses={"api": base_url}), 10_000)

    # guide: own-target
    sdk = stripe.StripeClient("sk_test_guide", base_addresses={"api": base_url}, max_network_retries=0)

    def define(gate: Interlock) -> Any:
        def refunds_of_charge(charge: str) -> Any:
            return [r.to_dict() for r in sdk.v1.refunds.list(params={"charge": charge, "limit": 100}).data]

        # 1. The premises, read fresh, this effect's own refund left out (by the effect id
        #    it carries): counted, a restart after a crash past the send would take it for
        #    someone else's and refuse.
        def premises(charge: str, amount_cents: int, effect_id: str) -> Dict[str, Any]:
            others = [r for r in refunds_of_charge(charge) if r["metadata"].get("interlock_effect_id") != effect_id]
            return {"refunded_by_others_cents": sum(r["amount"] for r in others)}

        # 3. The lookup: did the effect with this id happen? Its result, or None.
        def lookup(charge: str, amount_cents: int, effect_id: str) -> Optional[Dict[str, Any]]:
            mine = [r for r in refunds_of_charge(charge) if r["metadata"].get("interlock_effect_id") == effect_id]
            return {"id": mine[0]["id"]} if mine else None

        # 2. The send, carrying the effect id (idempotency_key) as the key the service
        #    dedupes on and as the reference the lookup finds. `rejects`: the errors that
        #    mean nothing was applied; any other raise leaves the send's fate unknown.
        @gate.effect(key=lambda charge, amount_cents: f"refund:{charge}", premises=premises, lookup=lookup,
                     dedupes=False, lease="case-4471", timeout_ms=5000,
                     rejects=(stripe.InvalidRequestError, stripe.CardError))
        def refund(charge: str, amount_cents: int, idempotency_key: str) -> Dict[str, Any]:
            r = sdk.v1.refunds.create(
                params={"charge": charge, "amount": amount_cents, "metadata": {"interlock_effect_id": idempotency_key}},
                options={"idempotency_key": idempotency_key})
            return {"id": r.id}

        return refund

    # The test every target needs: the send lands, the process dies before the reply.
    gate = Interlock(journal, clock=clock)
    gate.lease("case-4471", 3600)
    refund = define(gate)
    with pytest.raises(SimulatedCrash):
        refund.gate.submit(refund.proposal(ch, 2000), crash_after_effect=True)
    clock.advance(5001)  # past the dead sender's claim
    gate = Interlock(journal, clock=clock)  # the restart: a new process on the journal
    define(gate)
    [out] = gate.recover()
    assert out.status == "COMMITTED" and gate.receipt(out.effect_id)["via"] == "recovery-query"
    assert len(sdk.v1.refunds.list(params={"charge": ch}).data) == 1  # one refund
    # guide: end
    assert refunds_of(sdk, ch)[0].metadata["interlock_effect_id"] == out.effect_id
    gate.close()


def snippets(path: Path) -> Dict[str, str]:
    """Each ``guide: NAME`` region of a file, dedented."""
    out: Dict[str, str] = {}
    name: Optional[str] = None
    lines: List[str] = []
    for line in path.read_text().splitlines():
        marker = re.search(r"(#|//) guide: ([\w-]+)\s*$", line)
        if marker and marker.group(2) == "end":
            indent = min(len(x) - len(x.lstrip()) for x in lines if x.strip())
            out[str(name)] = "\n".join(x[indent:] for x in lines).strip("\n")
            name, lines = None, []
        elif marker:
            name, lines = marker.group(2), []
        elif name is not None:
            lines.append(line)
    return out


def test_the_guide_shows_these_tests() -> None:
    guide = GUIDE.read_text()
    shown = dict(re.findall(r"<!-- guide: ([\w-]+) -->\n```\w+\n(.*?)\n```", guide, re.S))
    expected = {k: v for src in SOURCES.values() for k, v in snippets(src).items()}
    assert set(shown) == set(expected) and len(expected) >= 2, (sorted(shown), sorted(expected))
    for name, code in expected.items():
        assert shown[name] == code, f"docs/targets.md's {name} is not the test's code"
