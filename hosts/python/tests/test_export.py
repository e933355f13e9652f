"""The exporters (ARCHITECTURE.md, "Export"): OTLP to a local receiver that decodes with
the official proto package; the file sinks against their schemas (BigQuery's table
schema, Cloud Logging's LogEntry type, OCSF's API Activity class); an exporter SIGKILLed
at several points and restarted sends every record and no other, by the receiver's
account; bad input is a typed error that records nothing."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Union

import pytest

from interlock import FakeClock, Interlock, Rejected
from interlock.export import ExportError, ExportFailed
from otlp_receiver import Receiver, attributes, span_view
from sql_backends import PostgresBackend

HERE = Path(__file__).resolve().parent
SCHEMA = HERE.parents[2] / "docs" / "export" / "bigquery-schema.json"
T0 = 1_800_000_000_000
COMMITTED, REFUSED = 24, 3


def make_journal(path: Union[Path, str], committed: int = COMMITTED, refused: int = REFUSED) -> None:
    """A journal (a folder, or a URL) of `committed` refunds, `refused` rejected sends, and a
    lease granted and revoked."""
    refunds: Dict[str, Any] = {}
    clock = FakeClock(T0)
    gate = Interlock(path, clock=clock, standing_lease=True, agent="refund-agent")

    @gate.effect(key=lambda order, amount: f"refund:{order}",
                 lookup=lambda order, amount, idempotency_key: refunds.get(idempotency_key))
    def refund(order, amount, idempotency_key):
        clock.advance(37)
        refunds[idempotency_key] = {"refund_id": f"re_{len(refunds)}", "order": order, "amount": amount}
        return refunds[idempotency_key]

    @gate.effect(key=lambda order: f"void:{order}")
    def void(order, idempotency_key):
        raise Rejected("the order is settled")

    for i in range(committed):
        assert refund(f"o{i}", 100 + i).status == "COMMITTED"
    for i in range(refused):
        assert void(f"v{i}").status == "REFUSED"
    gate.lease("case-1", expires_at_ms=T0 + 3_600_000)
    gate.revoke_lease("case-1")
    gate.close()


@pytest.fixture
def journal(tmp_path):
    j = tmp_path / "journal"
    make_journal(j)
    return j


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def lines(path: Path) -> List[Dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def journal_entries(journal: Path) -> List[Dict[str, Any]]:
    return [json.loads(x) for x in (journal / "journal.jsonl").read_text().splitlines()
            if not json.loads(x)["stream"].startswith("export:")]


def test_otlp_spans_events_and_the_metric_through_the_sdk(journal, receiver):
    gate = Interlock(journal)
    r = gate.export(f"otlp={receiver.url}", max_records=10, content=True)
    gate.close()
    assert r.records == COMMITTED + REFUSED + 3  # one metric record per batch of spans
    assert len(receiver.spans) == COMMITTED + REFUSED
    assert len(receiver.deliveries) == len(receiver.spans), "no span sent twice"
    res = {a.key: a.value.string_value for a in receiver.resources[0].attributes}
    assert res["service.name"] == "interlock"
    by_name: Dict[str, List[Any]] = {}
    for s in receiver.spans.values():
        by_name.setdefault(s.name, []).append(s)
    assert set(by_name) == {"execute_tool refund", "execute_tool void"}
    span = by_name["execute_tool refund"][0]
    attrs = {a.key: a.value for a in span.attributes}
    assert attrs["gen_ai.operation.name"].string_value == "execute_tool"
    assert attrs["gen_ai.tool.name"].string_value == "refund"
    # The trace id is the effect id; the tool call id too.
    assert span.trace_id.hex() == attrs["gen_ai.tool.call.id"].string_value
    assert attrs["interlock.state"].string_value == "COMMITTED"
    assert json.loads(attrs["gen_ai.tool.call.arguments"].string_value)["amount"] >= 100
    assert "refund_id" in json.loads(attrs["gen_ai.tool.call.result"].string_value)
    assert span.kind == span.SPAN_KIND_INTERNAL
    assert span.end_time_unix_nano - span.start_time_unix_nano == 37_000_000
    assert [e.name for e in span.events] == ["PROPOSED", "AUTHORIZED", "DISPATCHED", "COMMITTED"]
    void = by_name["execute_tool void"][0]
    vattrs = {a.key: a.value.string_value for a in void.attributes}
    assert (vattrs["interlock.state"], vattrs["interlock.reason"], vattrs["error.type"]) == \
        ("REFUSED", "target_rejected", "target_rejected")
    assert void.status.code == void.status.STATUS_CODE_ERROR
    assert receiver.histogram() == {"COMMITTED": COMMITTED, "REFUSED": REFUSED}
    # Caught up: a second run sends nothing.
    again = Interlock(journal)
    assert again.export(f"otlp={receiver.url}").records == 0
    again.close()
    assert len(receiver.deliveries) == COMMITTED + REFUSED


def test_content_is_opt_in(journal, receiver):
    gate = Interlock(journal)
    gate.export(f"otlp={receiver.url}")
    gate.close()
    for s in receiver.spans.values():
        keys = {a.key for a in s.attributes}
        assert not keys & {"gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}, keys


def run_exporter(journal: Path, url: str, *extra: str) -> "subprocess.Popen[str]":
    return subprocess.Popen([sys.executable, "-m", "interlock.export", str(journal), "--to", f"otlp={url}",
                             "--batch", "4", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("kill", ["received-before-ack", "after-ack", "timer"])
def test_a_killed_exporter_resends_only_the_batch_in_doubt_and_skips_nothing(journal, receiver, kill):
    expected = COMMITTED + REFUSED
    kills = 0
    for attempt in range(40):
        p = run_exporter(journal, receiver.url)
        if kill == "received-before-ack":
            # The receiver keeps the batch of its next request and SIGKILLs the exporter
            # before answering: the batch arrived, SENT was never written.
            receiver.kill_pid, receiver.kill_at = p.pid, receiver.trace_requests + 2
        elif kill == "after-ack":
            receiver.kill_pid = None
            n = receiver.trace_requests + 2
            deadline = time.monotonic() + 30
            while receiver.trace_requests < n and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.001)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        else:
            time.sleep(0.25 + 0.1 * attempt)
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        out, err = p.communicate(timeout=60)
        if p.returncode == 0:
            break
        assert p.returncode == -signal.SIGKILL, err
        kills += 1
    else:
        # Every try was killed (a slow machine): one more, left to finish.
        receiver.kill_pid = None
        out, err = run_exporter(journal, receiver.url).communicate(timeout=60)
        assert json.loads(out)["exported"] > 0, err
    assert kills >= 1, "the exporter was never killed: the test tested nothing"
    # Nothing skipped, nothing else: every closed effect's span, by its id.
    assert len(receiver.spans) == expected
    ids = {e["stream"][len("effect:"):] for e in journal_entries(journal) if e["stream"].startswith("effect:")}
    assert {t for t, _ in receiver.spans} == ids
    # A span that arrived twice arrived the same, and only from a batch in doubt.
    for t, s, span in receiver.deliveries:
        assert span == receiver.spans[(t, s)]
    resent = len(receiver.deliveries) - expected
    assert resent <= 4 * kills, (resent, kills)
    if kill == "received-before-ack":
        assert resent >= 1, "the batch the receiver kept was sent again"
    assert receiver.histogram() == {"COMMITTED": COMMITTED, "REFUSED": REFUSED}


def schema_fields():
    from google.cloud.bigquery import SchemaField

    return [SchemaField.from_api_repr(f) for f in json.loads(SCHEMA.read_text())]


def test_bigquery_rows_follow_the_table_schema(journal, tmp_path):
    out = tmp_path / "rows.jsonl"
    gate = Interlock(journal)
    r = gate.export("bigquery", str(out), max_records=7)
    gate.close()
    rows = lines(out)
    entries = journal_entries(journal)
    assert len(rows) == len(entries) == r.records
    fields = {f.name: f for f in schema_fields()}
    kinds = {"STRING": str, "INTEGER": int, "BOOLEAN": bool, "TIMESTAMP": str}
    for row, entry in zip(rows, entries):
        assert set(row) <= set(fields), set(row) - set(fields)
        for name, f in fields.items():
            if f.mode == "REQUIRED":
                assert name in row, (name, row)
            if name in row:
                assert isinstance(row[name], kinds[f.field_type]), (name, row[name])
        assert row["insert_id"] == entry["hash"]
        assert json.loads(row["entry"]) == entry
    assert len({r["insert_id"] for r in rows}) == len(rows)


def test_cloud_logging_entries_are_log_entries(journal, tmp_path):
    from google.cloud.logging_v2.types import LogEntry

    out = tmp_path / "log.jsonl"
    gate = Interlock(journal)
    gate.export("cloud-logging", str(out))
    gate.close()
    for line in out.read_text().splitlines():
        # The official type's JSON parser: an unknown field or a wrong type raises.
        e = LogEntry.from_json(line, ignore_unknown_fields=False)
        assert e.insert_id and e.timestamp
        assert e.json_payload["entry"]["hash"] == e.insert_id
    severities = {json.loads(x)["severity"] for x in out.read_text().splitlines()}
    assert severities == {"INFO", "WARNING", "NOTICE"}


def test_siem_events_are_ocsf_api_activity(journal, tmp_path):
    from ocsf_emitter._models import ApiActivity
    from ocsf_emitter.validate import validate

    out = tmp_path / "ocsf.jsonl"
    gate = Interlock(journal)
    gate.export("siem", str(out))
    gate.close()
    known = set(ApiActivity.model_fields)
    events = lines(out)
    for ev in events:
        assert set(ev) <= known, set(ev) - known
        model = ApiActivity.model_validate(ev)
        validate(model)
        assert (ev["class_uid"], ev["category_uid"], ev["type_uid"]) == (6003, 6, 600399)
    assert len({e["metadata"]["uid"] for e in events}) == len(events)


def test_a_file_sink_resumes_and_cuts_a_batch_left_in_doubt(journal, tmp_path):
    out = tmp_path / "rows.jsonl"
    gate = Interlock(journal)
    gate.export("siem", str(out), max_records=5)
    whole = out.read_bytes()
    gate.close()
    # Left in doubt: a batch's SENDING is recorded and half of it written, then a crash.
    fresh = tmp_path / "journal2"
    make_journal(fresh)
    out2 = tmp_path / "rows2.jsonl"
    g = Interlock(fresh)
    host = g.host()
    from interlock.export import _call

    _call(host, "open", "siem", str(out2), None, False, None)
    batch = _call(host, "next", 5)
    out2.write_text("".join(r + "\n" for r in batch.records)[:-30])
    g.close()
    g = Interlock(fresh)
    r = g.export("siem", str(out2), max_records=5)
    g.close()
    assert r.resent == 5
    assert out2.read_bytes() == whole, "the same lines, once each"


def test_bad_input_is_clear_and_moves_nothing(journal, tmp_path, receiver):
    gate = Interlock(journal)
    before = (journal / "journal.jsonl").read_bytes()
    bad = "invalid-destination"
    for to, case in [("splunk", "unknown-sink"), ("otlp", bad), ("otlp=ftp://x", bad), ("otlp=http://h:0", bad),
                     ("bigquery", bad)]:
        with pytest.raises(ExportError) as e:
            gate.export(to)
        assert e.value.case == case, e.value
    assert (journal / "journal.jsonl").read_bytes() == before
    # A receiver that answers 500: the batch is not recorded as sent, and comes again.
    receiver.status = 500
    with pytest.raises(ExportFailed):
        gate.export(f"otlp={receiver.url}", timeout_s=2)
    receiver.status = None
    r = gate.export(f"otlp={receiver.url}")
    assert r.resent > 0 and len(receiver.spans) == COMMITTED + REFUSED
    # A receiver that is down.
    down = Receiver()
    url = down.url
    down.close()
    with pytest.raises(ExportFailed):
        gate.export(f"otlp={url}", name="down", timeout_s=1)
    with pytest.raises(ExportError) as e:
        gate.export("otlp=http://127.0.0.1:9", name="down")
    assert e.value.case == "elsewhere"
    # A file that lost lines since the last export.
    out = tmp_path / "rows.jsonl"
    gate.export("bigquery", str(out))
    out.write_text(out.read_text()[:-100])
    with pytest.raises(ExportError) as e:
        gate.export("bigquery", str(out))
    assert e.value.case == "file-mismatch" and "shorter" in str(e.value)
    gate.close()


def test_the_command_line(journal, tmp_path, receiver):
    run = subprocess.run([sys.executable, "-m", "interlock.export", str(journal), "--to", "bogus"],
                         capture_output=True, text=True)
    assert run.returncode == 2 and "unknown-sink" in run.stderr, run.stderr
    run = subprocess.run([sys.executable, "-m", "interlock.export", str(journal), "--to", f"otlp={receiver.url}"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["exported"] == len((journal / "journal.jsonl").read_text().splitlines()) - 2


NODE_CLI = HERE.parents[1] / "node" / "src" / "export-cli.js"


def node_exporter() -> List[str]:
    """The Node host's exporter command (skipped, saying why, when it is not installed)."""
    sdk = HERE.parents[1] / "node" / "node_modules" / "@opentelemetry" / "exporter-trace-otlp-proto"
    if shutil.which("node") is None or not sdk.is_dir():
        if os.environ.get("INTERLOCK_REQUIRE_NODE"):
            pytest.fail("INTERLOCK_REQUIRE_NODE is set but the Node host is not installed (hosts/node: npm ci)")
        pytest.skip("the Node host is not installed (hosts/node: npm ci && npm run build)")
    return ["node", str(NODE_CLI)]


def metric_view(r: Receiver) -> Any:
    out = []
    for req in r.metric_requests:
        for rm in req.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    for p in m.histogram.data_points:
                        out.append((m.name, m.unit, m.histogram.aggregation_temporality, p.start_time_unix_nano,
                                    p.time_unix_nano, p.count, p.sum, list(p.bucket_counts), list(p.explicit_bounds),
                                    attributes(p.attributes)))
    return out


def test_every_host_sends_the_same_records(journal, tmp_path, cli):
    """A differential test: the CLI (Rust SDK), Python and Node export the same journal to
    the same lines, and to the same spans and metric points by the receiver's account."""
    node = node_exporter()
    heads = {"cli": [str(cli), "export"], "node": node}
    for sink in ("otlp", "bigquery", "cloud-logging", "siem"):
        seen: Dict[str, Any] = {}
        for host in ("python", "cli", "node"):
            j = tmp_path / f"{host}-{sink}"
            shutil.copytree(journal, j)
            r = Receiver() if sink == "otlp" else None
            to = f"otlp={r.url}" if r else sink
            out = None if r else str(tmp_path / f"{host}-{sink}.jsonl")
            if host == "python":
                g = Interlock(j)
                g.export(to, out, max_records=5)
                g.close()
            else:
                cmd = heads[host] + [str(j), "--to", to, "--batch", "5"] + (["--out", out] if out else [])
                run = subprocess.run(cmd, capture_output=True, text=True)
                assert run.returncode == 0, (host, run.stderr)
            if r:
                assert len(r.spans) == COMMITTED + REFUSED, host
                seen[host] = (sorted(span_view(s) for s in r.spans.values()), metric_view(r),
                              attributes(r.resources[0].attributes))
                r.close()
            else:
                seen[host] = Path(out).read_bytes() if out else b""
        assert seen["python"] == seen["cli"], sink
        assert seen["python"] == seen["node"], sink


def test_a_postgres_journal_is_exported_in_order_though_appends_commit_out_of_it(pg_cluster, tmp_path):
    """PostgreSQL hands out ordinals at insert, not at commit: an append that took ordinal 10
    can commit after one that took 11. The exporter's read waits out appends in flight
    (LOCK TABLE ... IN SHARE MODE), so it never passes an ordinal a later commit fills: two
    connections append, the lower ordinals committed last, while an export runs."""
    import psycopg

    pg = PostgresBackend(pg_cluster)
    url, other = pg.fresh(), pg.fresh()
    make_journal(url, committed=6, refused=1)
    # Two more effects, made in another journal: their rows are valid entries to copy in.
    make_journal(other, committed=8, refused=0)
    effects = "SELECT name FROM interlock_streams WHERE name LIKE 'effect:%'"
    late = sorted(set(pg.query(other, effects)) - set(pg.query(url, effects)))[:2]
    assert len(late) == 2, late
    with psycopg.connect(other) as c:
        rows = {s: c.execute("SELECT stream, seq, entry FROM interlock_entries WHERE stream = %s ORDER BY seq",
                             (s,)).fetchall() for s in late}

    out = tmp_path / "rows.jsonl"
    first = subprocess.run([sys.executable, "-m", "interlock.export", url, "--to", "bigquery", "--out", str(out),
                            "--batch", "5"], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    exported_before = json.loads(first.stdout)["exported"]

    def append(conn: Any, stream: str) -> None:
        for st, seq, entry in rows[stream]:
            conn.execute("INSERT INTO interlock_entries (stream, seq, entry) VALUES (%s, %s, %s)", (st, seq, entry))
        conn.execute("INSERT INTO interlock_streams (name, length, open) VALUES (%s, %s, false)",
                     (stream, len(rows[stream])))

    a, b = psycopg.connect(url), psycopg.connect(url)
    try:
        append(a, late[0])  # takes the lower ordinals, and stays in flight
        append(b, late[1])
        b.commit()  # the higher ordinals are committed first
        p = subprocess.Popen([sys.executable, "-m", "interlock.export", url, "--to", "bigquery", "--out", str(out),
                              "--batch", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # The exporter's read waits on the append in flight, not past it.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and p.poll() is None and not pg.query(
                url, "SELECT count(*) FROM pg_locks WHERE NOT granted AND mode = 'ShareLock'")[0]:
            time.sleep(0.05)
        assert p.poll() is None, p.communicate()
        a.commit()
        out_text, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    finally:
        a.close()
        b.close()
    # The appends did commit out of ordinal order: the later stream holds the higher ones.
    first_late = pg.query(url, f"SELECT max(ordinal) FROM interlock_entries WHERE stream = '{late[0]}'")[0]
    second_late = pg.query(url, f"SELECT min(ordinal) FROM interlock_entries WHERE stream = '{late[1]}'")[0]
    assert first_late < second_late
    # Every entry once, in the journal's (ordinal) order: nothing skipped, nothing twice.
    entries = [e for e in pg.query(url, "SELECT entry FROM interlock_entries ORDER BY ordinal")
               if not json.loads(e)["stream"].startswith("export:")]
    written = [r["entry"] for r in lines(out)]
    assert written == entries
    assert json.loads(out_text)["exported"] > exported_before
    assert {json.loads(e)["stream"] for e in written} >= set(late)
