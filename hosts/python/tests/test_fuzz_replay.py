"""Issue 12: the file journal corpus of the fuzzer (fuzz/seeds/file_journal and
fuzz/regressions/file_journal) replayed through this host's file storage under the gate
component's journal. Each input is opened as a journal.jsonl, and the result must be exactly
the Rust backend's, as the checked-in table fuzz/file_journal_expected.json records it: the
same streams (read here from the entries the journal holds, in order), or the same refusal
with the same text."""

import json
import shutil
from pathlib import Path
from typing import Any, Dict

from interlock.clock import SystemClock
from interlock.gate import GateHost, JournalRef
from interlock.journal import FileJournal, JournalFileError

FUZZ = Path(__file__).resolve().parents[3] / "fuzz"


def test_every_file_journal_fuzz_input_opens_or_is_refused_as_in_rust(tmp_path: Path) -> None:
    expected: Dict[str, Any] = json.loads(
        (FUZZ / "file_journal_expected.json").read_text(encoding="utf-8")
    )
    assert len(expected) > 30, "the corpus is there"
    for i, (name, want) in enumerate(expected.items()):
        d = tmp_path / str(i)
        d.mkdir()
        shutil.copyfile(FUZZ / name, d / "journal.jsonl")
        got: Dict[str, Any]
        with FileJournal.open(d) as files:
            try:
                entries = GateHost(JournalRef(files), SystemClock()).entries_in_order()
            except JournalFileError as e:
                got = {"error": e.case, "message": str(e)}
            else:
                streams: Dict[str, Any] = {}
                for text in entries:
                    entry = json.loads(text)
                    streams[entry["stream"]] = [entry["stream"], entry["seq"] + 1, entry["open"]]
                got = {"streams": list(streams.values())}
        assert got == want, name
