"""benchmarks/RESULTS.md is the current table: a run updates the rows it ran and no other.

Broke it to watch it fail: with update_results writing only the rows of the run (the store's
other rows dropped), test_a_run_updates_its_rows_and_keeps_the_others fails; with the table
written from the run alone, test_the_table_is_written_from_the_store fails.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from benchmarks.common import Measure, Result
from benchmarks.report import current_table, load_store, update_results

ROOT = Path(__file__).resolve().parents[2]
INFO = {"date": "2030-01-01 00:00 UTC", "machine": "test machine", "python": "3.99.0",
        "river": "9.9", "git commit": "abc1234"}  # fmt: skip


def _copy(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "benchmarks" / "results.json", tmp_path / "results.json")
    return tmp_path / "RESULTS.md"


def test_a_run_updates_its_rows_and_keeps_the_others(tmp_path):
    table = _copy(tmp_path)
    before = {r["row"]: r for r in load_store(tmp_path / "results.json")}
    run = [Result("3", "arrays", Measure("ours", 70e6, "ex/s"), Measure("sklearn", 7e6, "ex/s"),
                  10.0, goal=">= 50M ex/s", met=True)]  # fmt: skip
    update_results(table, run, INFO, "python -m benchmarks --only 3")
    after = {r["row"]: r for r in load_store(tmp_path / "results.json")}
    assert after.keys() == before.keys()
    assert after["3"]["ours"] == "70,000,000 ex/s" and after["3"]["date"] == INFO["date"]
    assert after["3"]["versions"] == {"python": "3.99.0", "river": "9.9"}
    assert {k: v for k, v in after.items() if k != "3"} == {
        k: v for k, v in before.items() if k != "3"
    }
    assert list(after) == list(before)  # row order kept (1a ... 15e)


def test_the_table_is_written_from_the_store(tmp_path):
    table = _copy(tmp_path)
    update_results(table, [], INFO, "python -m benchmarks --only 3")
    records = load_store(tmp_path / "results.json")
    text = table.read_text(encoding="utf-8")
    assert text == current_table(records)
    for rec in records:
        assert f"| {rec['row']} | " in text
    assert len(text.splitlines()) <= 300


def test_the_committed_table_is_the_store_s():
    """RESULTS.md is what the store gives: nobody edits one without the other."""
    records = load_store(ROOT / "benchmarks" / "results.json")
    committed = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    assert committed == current_table(records)
    assert len(committed.splitlines()) <= 300
    for rec in records:  # each row says when, with what and where it was measured
        assert rec["date"] and rec["machine"] and rec["versions"].get("python"), rec["row"]
    assert json.loads((ROOT / "benchmarks" / "results.json").read_text())["version"] == 1
