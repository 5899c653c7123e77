"""The benchmark suite runs end to end at ``--quick 100`` sizes (numbers are not asserted: timings
belong to the benchmark, not to tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ROWS = (
    "1a 1b 2a 2b 2c 3 4a 4b 4c 5a 5b 5c 5d 5e 6 6b 7 7b 9a 9h 9z 10 11a 11b 11c 11d 11e 11f 11j 11k"
    " 12a 12b 12c 13a 13b 14a 14l 15a 15b 15c 15d 15e 16a 16b 16c 17a 17b"
).split()
#: the suite in three runs of 3-10 s each at ``--quick 100`` (rows 12 and 13 keep fixed-length
#: parts), so that the test processes share it: at ``--quick`` (10) it took 69 s of CPU, the
#: largest share of `make check`'s
GROUPS = ["12", "13", "1,2,3,4,5,6,7,9,10,11,14,15,16,17"]


def _number(row: str) -> str:
    return row.rstrip("abcdefghijklmnopqrstuvwxyz")


def test_the_groups_cover_every_row():
    covered = {n for group in GROUPS for n in group.split(",")}
    assert {_number(row) for row in ROWS} <= covered


@pytest.mark.parametrize("group", GROUPS)
def test_quick_run_prints_every_row(tmp_path, group):
    table = tmp_path / "results.md"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "100", "--repeats", "1", "--only", group,
         "--markdown", str(table)],
        cwd=ROOT,
        capture_output=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"},
    )  # fmt: skip
    out = proc.stdout.decode()
    assert proc.returncode == 0, out + proc.stderr.decode()
    for row in ROWS:
        if _number(row) in group.split(","):
            assert f"[{row}]" in out, f"row {row} missing from:\n{out}"
    text = table.read_text()
    assert "| row |" in text and "python" in text
