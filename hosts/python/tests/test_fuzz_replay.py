"""Issue 12: the file journal corpus of the fuzzer (fuzz/seeds/file_journal and
fuzz/regressions/file_journal) replayed through this host's FileJournal. Each input is
opened as a journal.jsonl, and the result must be exactly the Rust backend's, as the
checked-in table fuzz/file_journal_expected.json records it (the fuzz crate's
``file_journal_table`` test keeps that table current): the same streams, or the same
refusal with the same text."""

import json
import shutil
from pathlib import Path
from typing import Any, Dict

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
        try:
            j = FileJournal.open(d)
        except JournalFileError as e:
            got = {"error": e.case, "message": str(e)}
        else:
            is_open = set(j.open_streams())
            got = {"streams": [[s, j.length(s), s in is_open] for s in j.streams()]}
            j.close()
        assert got == want, name
