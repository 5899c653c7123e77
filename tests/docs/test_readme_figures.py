"""The README's figures come from the current results table (benchmarks/RESULTS.md), never
from an older run.

Broke it to watch it fail: row 3's ratio in the README's table set to the older 8.9x fails
test_the_headline_table_is_the_results_table, and "12.5x" written anywhere in the README
fails test_every_figure_the_readme_quotes_is_in_the_table.
"""

from __future__ import annotations

import re
from pathlib import Path

from benchmarks.report import load_store

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
#: a figure: a ratio (12.0x), a percentage (89.60 %), a rate or a size (68.2M, 24.4 MiB)
FIGURE = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:x\b| ?%|M\b| MiB\b)")
#: the cell the README shows for a row whose run logged only its ratio
NO_FIGURE = {"(logged as a ratio)": "—"}


def _headline_rows() -> list[list[str]]:
    section = README[README.index("## Headline figures") :]
    section = section[: section.index("\n## ")]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells and re.fullmatch(r"\d+[a-z]?", cells[0]):
            rows.append([c.replace("\\|", "|") for c in cells])
    return rows


def test_the_headline_table_is_the_results_table():
    store = {rec["row"]: rec for rec in load_store(REPO / "benchmarks" / "results.json")}
    rows = _headline_rows()
    assert len(rows) >= 5
    for row, _what, ours, ratio, met in rows:
        rec = store[row]
        assert ours == NO_FIGURE.get(rec["ours"], rec["ours"]), (row, ours, rec["ours"])
        assert ratio == rec["ratio"], (row, ratio, rec["ratio"])
        assert met == rec["met"], (row, met, rec["met"])


def _normal(figure: str) -> str:
    return figure.replace(" %", "%")


def test_every_figure_the_readme_quotes_is_in_the_table():
    table = {_normal(f) for f in FIGURE.findall((REPO / "benchmarks" / "RESULTS.md").read_text())}
    quoted = {_normal(f) for f in FIGURE.findall(README)}
    assert quoted, "no figure found in the README"
    assert quoted <= table, f"figures of the README not in benchmarks/RESULTS.md: {quoted - table}"


def test_the_readme_is_short_and_starts_with_the_two_commands():
    lines = README.splitlines()
    assert len(lines) <= 200, len(lines)
    first_block = README[README.index("```sh") : README.index("```", README.index("```sh") + 5)]
    commands = [ln.split("#")[0].strip() for ln in first_block.splitlines()[1:]]
    assert [c for c in commands if c] == ["make run", "make test"]
    assert README.index("```sh") < README.index("\n## ", README.index("## Set up"))
