"""The CSV block scanner's pieces, its line count and its label ids.

A large block is scanned in pieces by two threads at once; the pieces must give what one scan
gives, bit for bit, and what ``float()`` on each cell gives.
"""

from __future__ import annotations

import random
import struct
import threading

import numpy as np
import pytest

from stream_perceptron import native
from stream_perceptron.formats import scan
from stream_perceptron.formats.label_cells import LabelCells
from stream_perceptron.learners import Perceptron

pytestmark = pytest.mark.skipif(native.dense is None, reason="the C extension is not built")

NCOL, LABEL_COL = 4, 2


def bits(v: float) -> str:
    return struct.pack("<d", v).hex()


def lines_of(seed: int, n: int, labels: list[bytes] | None = None) -> list[bytes]:
    """Lines of NCOL cells: mostly plain decimals, some cells float() must decide."""
    rng = random.Random(seed)
    odd = [b"1_000.5", b"5e-324", b"12345678901234567890123", b"  7 ", b"+.5"]
    labels = labels or [b"1", b"0"]
    out = []
    for _ in range(n):
        cells = [
            rng.choice(odd) if rng.random() < 0.02 else b"%.5f" % rng.uniform(-9, 9)
            for _ in range(NCOL - 1)
        ]
        cells.insert(LABEL_COL, rng.choice(labels))
        out.append(b",".join(cells))
    return out


def reference(lines: list[bytes]) -> tuple[list[list[str]], list[bytes]]:
    rows, cells = [], []
    for line in lines:
        parts = line.split(b",")
        cells.append(parts.pop(LABEL_COL))
        rows.append([bits(float(c)) for c in parts])
    return rows, cells


@pytest.fixture
def split_at(monkeypatch):
    """Set the size from which blocks are split; records the threads that scanned."""
    threads: list[str] = []
    real = scan.scan_csv

    def recording(*args):
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(scan, "scan_csv", recording)

    def set_size(size: int) -> list[str]:
        monkeypatch.setattr(scan, "SPLIT_BYTES", size)
        monkeypatch.setattr(scan, "_CPUS", 2)
        return threads

    return set_size


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("count", [None, "given"])
def test_pieces_give_one_scans_values_and_floats(split_at, seed, count):
    lines = lines_of(seed, 3000 + seed * 17)
    block = b"\n".join(lines) + b"\n"
    n = len(lines) if count else None
    threads = split_at(1 << 40)
    whole = scan.parse_csv_block(block, n, NCOL, LABEL_COL)
    assert threads == ["MainThread"]
    split_at(64)
    halves = scan.parse_csv_block(block, n, NCOL, LABEL_COL)
    assert len(threads) == 1 + scan.PIECES  # which thread scans which piece: the first free
    assert whole is not None and whole is not NotImplemented
    assert halves is not None and halves is not NotImplemented
    rows, cells = reference(lines)
    for X, labels in (whole, halves):
        assert X.shape == (len(lines), NCOL - 1)
        assert [[bits(v) for v in row] for row in X.tolist()] == rows
        assert isinstance(labels, LabelCells) and list(labels) == cells


@pytest.mark.parametrize(
    "bad, expected",
    [
        (b'1,2,"1",3', None),  # a quote
        (b"1,2,1", None),  # a column short
        (b"1,2,1,3,4", None),  # a column too many
        (b"1,x,1,3", None),  # a cell float() refuses
        (b"1,1e999,1,3", None),  # infinite
    ],
)
@pytest.mark.parametrize("where", ["first", "second"])
def test_a_bad_line_in_any_piece_refuses_the_block(split_at, bad, expected, where):
    lines = lines_of(7, 2000)
    lines[100 if where == "first" else 1900] = bad
    split_at(64)
    assert scan.parse_csv_block(b"\n".join(lines) + b"\n", None, NCOL, LABEL_COL) is expected


def test_a_wrong_line_count_refuses_the_block(split_at):
    lines = lines_of(3, 500)
    split_at(64)
    block = b"\n".join(lines) + b"\n"
    assert scan.parse_csv_block(block, 499, NCOL, LABEL_COL) is None
    assert scan.parse_csv_block(block, 500, NCOL, LABEL_COL) is not None


def test_one_cpu_scans_in_one_piece(split_at, monkeypatch):
    threads = split_at(64)
    monkeypatch.setattr(scan, "_CPUS", 1)
    assert scan.parse_csv_block(b"\n".join(lines_of(1, 800)) + b"\n", None, NCOL, 2) is not None
    assert threads == ["MainThread"]


def test_many_distinct_label_cells_come_as_a_list(split_at):
    labels = [b"class-%d" % i for i in range(65)]
    lines = lines_of(5, 3000, labels)
    split_at(64)
    X, cells = scan.parse_csv_block(b"\n".join(lines) + b"\n", None, NCOL, LABEL_COL)
    assert type(cells) is list and cells == reference(lines)[1]
    X, cells = scan.parse_csv_block(b"\n".join(lines[:50]) + b"\n", None, NCOL, LABEL_COL)
    assert isinstance(cells, LabelCells) and cells == reference(lines[:50])[1]


def test_intern_lines_ids_and_refusals():
    ids = np.empty(5, np.int32)
    assert native.dense.intern_lines(b"b\na\n\nb\na", ids, 64) == [b"b", b"a", b""]
    assert ids.tolist() == [0, 1, 2, 0, 1]
    assert native.dense.intern_lines(b"b\na\nc\nb\na", ids, 2) is None  # a third cell
    assert native.dense.intern_lines(b"a\nb", ids, 64) is None  # two lines for five rows
    assert native.dense.intern_lines(b"a\n" * 5 + b"a", ids, 64) is None  # six
    assert native.dense.intern_lines(b"x" * 65 + b"\na\na\na\na", ids, 64) is None  # too long
    with pytest.raises(ValueError, match="max_distinct"):
        native.dense.intern_lines(b"a", np.empty(1, np.int32), 65)


def test_label_cells_are_a_sequence_of_their_cells():
    cells = LabelCells([b"+1", b"-1", b""], np.array([1, 0, 2, 0], np.int32))
    assert list(cells) == [b"-1", b"+1", b"", b"+1"] == cells
    assert cells[2] == b"" and cells[-1] == b"+1" and cells[1:3] == [b"+1", b""]
    assert cells != [b"-1"] and len(cells) == 4 and b"" in cells
    assert [cells[i] for i in np.array([3, 0])] == [b"+1", b"-1"]


@pytest.mark.parametrize("settled", [True, False])
def test_encoding_by_ids_is_encoding_row_by_row(settled):
    label_of = {b"1": 1, b"0": 0, b"": None, b"7": 7}
    distinct = [b"0", b"1", b""] + ([b"7"] if not settled else [])
    rng = np.random.default_rng(1)
    ids = rng.integers(0, len(distinct), 500).astype(np.int32)
    rows = [distinct[i] for i in ids.tolist()]
    got, want = Perceptron(), Perceptron()
    if settled:
        for model in (got, want):
            model.learn_one({"a": 1.0}, 1)
            model.learn_one({"a": 1.0}, 0)
    a = got.encode_block(distinct, label_of, ids=ids)
    b = want.encode_block(rows, label_of)
    assert a is not None and b is not None
    assert a[0].tolist() == b[0].tolist() and a[1] == b[1] and a[2].keys() == b[2].keys()
    assert got.label_encoding == want.label_encoding


def test_count_lines_is_bytes_count():
    rng = random.Random(3)
    data = bytes(rng.choice(b"ab\n,") for _ in range(5000))
    for _ in range(200):
        start = rng.randrange(len(data) + 1)
        end = rng.randrange(start, len(data) + 1)
        assert native.dense.count_lines(data, start, end) == data.count(b"\n", start, end)
    for start, end in ((-1, 3), (3, 2), (0, len(data) + 1)):
        with pytest.raises(ValueError, match="start or end"):
            native.dense.count_lines(data, start, end)
