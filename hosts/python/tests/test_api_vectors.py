"""tests/api/*.json, the friendly API's cases as data (tests/api/README.md), played through
the decorator API. Node plays the same files (hosts/node/test/api-vectors.test.js)."""

import inspect
import json
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

import interlock
from interlock import Interlock

VECTORS = Path(__file__).resolve().parents[3] / "tests" / "api"
FILES = sorted(VECTORS.glob("*.json"))

#: Vectors this runner does not play, each with why. Every other vector is played.
SKIP: Dict[str, str] = {}
#: URLs this host opens (shared journals): a vector expecting one refused is not played.
SHARED = ("sqlite://", "postgres://", "postgresql://")

KNOWN = {"id", "about", "open", "world", "define", "call", "expect", "restart"}
EXPECT = {"error", "field", "state", "reason", "open", "sent", "journal_unchanged",
          "lease_granted", "lease_not_granted"}


def test_there_are_vectors_and_every_skip_is_explained() -> None:
    assert len(FILES) >= 8
    ids = {f.stem for f in FILES}
    for vid, why in SKIP.items():
        assert vid in ids and why.strip(), vid


def value(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"$number"}:
        text = v["$number"]
        return float("nan") if text == "NaN" else int(text)
    return v


class World:
    def __init__(self, v: Dict[str, Any], folder: Path):
        self.v = v
        self.folder = folder
        self.sent = 0
        self.premises = dict(v.get("world", {}).get("premises", {}))

    def journal(self) -> bytes:
        f = self.folder / "journal.jsonl"
        return f.read_bytes() if f.exists() else b""

    def lease_granted(self, name: str) -> bool:
        for line in self.journal().decode().splitlines():
            e = json.loads(line)
            if e.get("stream") == f"lease:{name}" and e.get("state") == "GRANTED":
                return True
        return False

    def open(self) -> Interlock:
        o = self.v.get("open", {})
        assert set(o) <= {"strict", "journal"}, o
        return Interlock(o.get("journal", self.folder), strict=o.get("strict", False))

    def define(self, gate: Interlock, d: Dict[str, Any]) -> Callable[..., Any]:
        assert set(d) <= {"target", "params", "key", "lease", "premises", "bounds", "allowed", "send",
                          "timeout_ms"}, d
        params: List[str] = d["params"]

        def fn(*args: Any, **kwargs: Any) -> Any:
            self.sent += 1
            if d.get("send", "ok") == "unavailable":
                raise ConnectionError("the target did not answer")
            return {"ok": True}

        sig = [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in params]
        sig.append(inspect.Parameter("idempotency_key", inspect.Parameter.POSITIONAL_OR_KEYWORD))
        fn.__signature__ = inspect.Signature(sig)  # type: ignore[attr-defined]

        def key(*args: Any) -> str:
            return d["key"].format(**dict(zip(params, args)))

        premises = None
        if "premises" in d:
            def premises(*_args: Any) -> Dict[str, Any]:
                return {n: self.premises[n] for n in d["premises"]}

        allowed = None
        if "allowed" in d:
            def allowed(*_args: Any) -> bool:
                if d["allowed"] == "throws":
                    raise RuntimeError("the check's service is down")
                return bool(d["allowed"] == "yes")

        return gate.effect(fn, name=d["target"], key=key, premises=premises, allowed=allowed,
                           lease=d.get("lease"), bounds=d.get("bounds"), timeout_ms=d.get("timeout_ms"))

    def call(self, gate: Interlock, effect: Any) -> Any:
        args = [value(a) for a in self.v["call"]]
        approval = self.v.get("world", {}).get("approval")
        if approval is None:
            return effect(*args)
        p = gate.approve(approval["approval"], approval["approver"], effect.proposal(*args),
                         premises_seen=approval["premises_seen"])
        return effect.gate.submit(p)

    def check(self, expect: Dict[str, Any], run: Callable[[], Any], before: bytes) -> None:
        assert set(expect) <= EXPECT, set(expect) - EXPECT
        sent = self.sent
        if "error" in expect:
            with pytest.raises(interlock.InterlockError) as e:
                run()
            assert type(e.value).__name__ == expect["error"], repr(e.value)
            if "field" in expect:
                assert e.value.field == expect["field"], repr(e.value)  # type: ignore[attr-defined]
        else:
            out = run()
            if "state" in expect:
                assert out.status == expect["state"], out
            if "reason" in expect:
                assert out.reason == expect["reason"], out
            if "open" in expect:
                assert (not out.final) == expect["open"], out
        if "sent" in expect:
            assert self.sent - sent == expect["sent"]
        if expect.get("journal_unchanged"):
            assert self.journal() == before
        if "lease_granted" in expect:
            assert self.lease_granted(expect["lease_granted"])
        if "lease_not_granted" in expect:
            assert not self.lease_granted(expect["lease_not_granted"])


@pytest.mark.parametrize("path", FILES, ids=[f.stem for f in FILES])
def test_vector(path: Path, tmp_path: Path) -> None:
    v = json.loads(path.read_text())
    assert v["id"] == path.stem and set(v) <= KNOWN, set(v) - KNOWN
    if v["id"] in SKIP:
        pytest.skip(SKIP[v["id"]])
    journal = v.get("open", {}).get("journal", "")
    if journal.startswith(SHARED) and v["expect"].get("error") == "UnsupportedJournal":
        pytest.skip(f"expects {journal.split('://')[0]}:// refused, but this host opens it (a shared journal, "
                    "issue 13); tests/test_inputs.py refuses the URLs it cannot open, nothing created")
    w = World(v, tmp_path / ".interlock")
    if "define" not in v:  # the case is the opening itself
        w.check(v["expect"], w.open, w.journal())
        return
    gate = w.open()
    try:
        for name in v.get("world", {}).get("leases", []):
            gate.lease(name, 3600)
        effect = w.define(gate, v["define"])
        w.check(v["expect"], lambda: w.call(gate, effect), w.journal())
    finally:
        gate.close()
    if "restart" in v:
        r = v["restart"]
        assert set(r) <= {"define", "expect"}, r
        again = w.open()
        try:
            d = r.get("define", True)
            if d is not False:
                w.define(again, v["define"] if d is True else d)

            def recover() -> Any:
                report = again.recover()
                assert not report.errors and len(report) == 1, (report, report.errors)
                return report[0]

            w.check(r["expect"], recover, w.journal())
        finally:
            again.close()
