"""CsvParser.parse_dense against parse(): the same floats and labels, or None for the batch."""

from __future__ import annotations

import contextlib
import csv
import random
import struct
from decimal import Decimal, localcontext

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron import native
from stream_perceptron.errors import RecordError
from stream_perceptron.formats import scan
from stream_perceptron.formats.base import parse_label
from stream_perceptron.formats.delimited import CsvParser

HEADER = b"a,b,y,c"

HAS_C = native.dense is not None
SCANNERS = {"c": native.dense.scan_csv if HAS_C else None}
needs_c = pytest.mark.skipif(not HAS_C, reason="the C extension is not built")

# The C scanner, and the reference: float() on every cell.
PATHS = [pytest.param("c", marks=needs_c), "generic"]
COMPILED = [pytest.param("c", marks=needs_c)]


@contextlib.contextmanager
def path(name: str):
    """parse_dense with the C scanner, or with np.array/float() only."""
    saved = scan.scan_csv
    scan.scan_csv = SCANNERS.get(name)
    try:
        yield
    finally:
        scan.scan_csv = saved


def parser(header: bytes = HEADER) -> CsvParser:
    p = CsvParser("y")
    assert p.parse(header) is None
    return p


def bits(v: float) -> str:
    return struct.pack("<d", v).hex()


def parse_all(p: CsvParser, lines: list[bytes]) -> list:
    out = []
    for line in lines:
        try:
            out.append(p.parse(line))
        except (RecordError, csv.Error) as e:  # csv.Error: a quote and a newline (a parse bug)
            out.append(e)
    return out


def assert_matches_parse(lines: list[bytes], header: bytes = HEADER):
    """parse_dense's answer agrees with parse() line by line; returns it."""
    got = parser(header).parse_dense(lines)
    ref = parser(header)
    plain = [ref._parse_plain(line) for line in lines]
    examples = parse_all(parser(header), lines)
    if all(e is not None for e in plain):  # every line plain: the batch must be dense
        assert got is not None
    if got is None:
        return None
    names, X, labels = got
    if isinstance(X, memoryview):  # the C scanner's matrix, read without NumPy by its path
        assert X.format == "d" and X.c_contiguous and X.ndim == 2
        X = np.asarray(X)
        got = names, X, labels
    assert names == ref._feature_names
    assert X.dtype == np.float64 and X.shape == (len(lines), len(names))
    assert X.flags.c_contiguous
    assert len(labels) == len(lines) and all(type(c) is bytes for c in labels)
    for row, label, example in zip(X.tolist(), labels, examples):
        assert not isinstance(example, Exception)
        assert list(example.x) == names  # parse gives every feature: the line is dense
        assert [bits(v) for v in example.x.values()] == [bits(v) for v in row]
        assert parse_label(label.decode("utf-8")) == example.y
        assert type(parse_label(label.decode("utf-8"))) is type(example.y)
    return got


@pytest.mark.parametrize("via", PATHS)
def test_plain_batch(via):
    with path(via):
        _check_plain_batch()


def _check_plain_batch():
    lines = [b"1.5,-2,1,3e-5", b"0,-0,,1e308", b"+7, 8 ,true,0.1", b"1_0,2,cat,4\r",
             b"1\n,\t2,1 ,3"]  # fmt: skip
    names, X, labels = assert_matches_parse(lines)
    assert names == ["a", "b", "c"]
    assert X.tolist() == [
        [1.5, -2.0, 3e-5], [0.0, -0.0, 1e308], [7.0, 8.0, 0.1], [10.0, 2.0, 4.0], [1.0, 2.0, 3.0]
    ]  # fmt: skip
    assert bits(X[1, 1]) == bits(-0.0)
    assert labels == [b"1", b"", b"true", b"cat", b"1 "]
    assert assert_matches_parse(lines[:4])[1].tolist() == X[:4].tolist()


@pytest.mark.parametrize("via", PATHS)
def test_label_column_first_or_last_and_no_features(via):
    with path(via):
        _check_label_column_first_or_last_and_no_features()


def _check_label_column_first_or_last_and_no_features():
    assert_matches_parse([b"1,2,3", b"0,4,5"], header=b"y,a,b")
    assert_matches_parse([b"2,3,1", b"4,5,0"], header=b"a,b,y")
    names, X, labels = assert_matches_parse([b"1", b"", b"0"], header=b"y")
    assert names == [] and X.shape == (3, 0) and labels == [b"1", b"", b"0"]


@pytest.mark.parametrize("via", PATHS)
def test_empty_batch(via):
    with path(via):
        _check_empty_batch()


def _check_empty_batch():
    names, X, labels = parser().parse_dense([])
    assert names == ["a", "b", "c"] and X.shape == (0, 3) and labels == []


@pytest.mark.parametrize("via", PATHS)
def test_header_pending(via):
    with path(via):
        _check_header_pending()


def _check_header_pending():
    assert CsvParser("y").parse_dense([b"a,b,y,c"]) is None


@pytest.mark.parametrize(
    "bad",
    [
        b'"1",2,1,3',  # quotes
        b'1,2,"1",3',
        b"nan,2,1,3",
        b"1,inf,1,3",
        b"1,2,1,-Infinity",
        b"1e400,2,1,3",  # overflows to inf
        b",2,1,3",  # empty cell: a missing feature
        b"1,2,1,",
        b"1, ,1,3",
        b"1,2,1",  # wrong column count
        b"1,2,1,3,4",
        b"",
        b"1,x,1,3",  # not a number
        b"1,0x10,1,3",
        b"1,1.2.3,1,3",
        b"1,2\x00,1,3",  # NUL: float() refuses it (numpy's 'S' dtype would strip it)
        b"1,\xd9\xa1,1,3",  # a non-ASCII digit: float(bytes) refuses it (parse() accepts it)
        b"1,2,\xff,3",  # a label cell that is not UTF-8
    ],
)
@pytest.mark.parametrize("via", PATHS)
def test_one_bad_line_makes_the_batch_none(bad, via):
    with path(via):
        _one_bad_line_makes_the_batch_none(bad)


def _one_bad_line_makes_the_batch_none(bad):
    good = [b"1,2,1,3", b"4,5,0,6"]
    assert parser().parse_dense(good) is not None
    assert parser().parse_dense([*good, bad]) is None
    assert parser().parse_dense([bad, *good]) is None


@pytest.mark.parametrize("via", PATHS)
def test_finite_values_with_an_overflowing_sum_are_dense(via):
    with path(via):
        _check_finite_values_with_an_overflowing_sum_are_dense()


def _check_finite_values_with_an_overflowing_sum_are_dense():
    # _parse_plain's sum check sends this line to _parse_checked, which accepts it all the same
    lines = [b"1.7e308,1.7e308,1,1.7e308"]
    assert parser()._parse_plain(lines[0]) is None
    names, X, _ = assert_matches_parse(lines)
    assert X.tolist() == [[1.7e308] * 3]


@pytest.mark.parametrize("via", PATHS)
def test_correctly_rounded_like_float(via):
    with path(via):
        _check_correctly_rounded_like_float()


def _check_correctly_rounded_like_float():
    rng = np.random.default_rng(0)
    values = np.concatenate(
        [
            rng.normal(size=3000),
            rng.normal(size=3000) * 10.0 ** rng.integers(-320, 308, size=3000),
            rng.integers(0, 2**63, size=1000).view(np.float64),  # any bit pattern
        ]
    )
    values = values[np.isfinite(values)]
    texts = (
        [repr(v) for v in values.tolist()]
        + [f"{v:.25e}" for v in values.tolist()[:2000]]  # more digits than a double holds
        + [f"{v:.3g}" for v in values.tolist()[:2000]]
        + ["2.4703282292062327e-324", "2.4703282292062328e-324", "9007199254740993",
           "1.00000000000000011102230246251565404236316680908203125", "0.1e-400", "1e-400",
           "4.9406564584124654e-324", "1.7976931348623158e308", "1.7976931348623157e308"]
    )  # fmt: skip
    lines = [f"{t},1,0,{t}".encode() for t in texts]
    names, X, _ = assert_matches_parse(lines)
    assert [bits(v) for v in X[:, 0].tolist()] == [bits(float(t)) for t in texts]


GOOD_CELLS = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.floats(allow_nan=False, allow_infinity=False).map(lambda v: f"{v:.4g}"),
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["1_0", " 2 ", "+3", "-0", ".5", "5.", "1\n", "\t4\r", "1E5", "-0.0e-7"]),
)
BAD_CELLS = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e999", "", " ", "x", "0x1", "1e", "1,5", '"1"',
                     "\x00", "١", "1__0"]),
    st.text(alphabet="0123456789.eE+-_ ", max_size=6),
)  # fmt: skip
GOOD_LABELS = st.sampled_from(["", "0", "1", "-1", "+1", "1.0", "true", "False", "cat", " 1 "])
LABELS = st.one_of(GOOD_LABELS, st.just("\xff"))


@pytest.mark.parametrize("via", PATHS)
@settings(max_examples=500, deadline=None)
@given(data=st.data(), clean=st.booleans())
def test_agrees_with_parse(via, data, clean):
    """Clean batches (mostly dense) and dirty ones (mostly not): the answer agrees with parse."""
    cells = GOOD_CELLS if clean else st.one_of(GOOD_CELLS, BAD_CELLS)
    labels = GOOD_LABELS if clean else LABELS
    counts = st.just(3) if clean else st.integers(2, 4)
    lines = []
    for _ in range(data.draw(st.integers(0, 8))):
        row = data.draw(counts.flatmap(lambda k: st.lists(cells, min_size=k, max_size=k)))
        row.insert(min(2, len(row)), data.draw(labels))  # usually 4 columns, the label third
        line = ",".join(row).encode("utf-8", "surrogateescape")
        lines.append(line.replace("\xff".encode(), b"\xff"))
    with path(via):
        assert_matches_parse(lines)


@pytest.mark.parametrize("via", PATHS)
def test_more_cells_for_float_than_the_c_scanner_keeps(via):
    lines = [b"1_0,%d,1,1e-320" % i for i in range(3000)]  # underscores, subnormals: float()
    with path(via):
        names, X, labels = assert_matches_parse(lines)
        assert X[:, 1].tolist() == list(range(3000)) and X[0, 2] == 1e-320
        assert parser().parse_dense([*lines, b"1,2,1,x"]) is None


# -- the C decimal parser -------------------------------------------------------------------------


def test_powers_of_ten_table_matches_go_strconv():
    lo, hi = native._powers_of_ten()

    def row(e):
        k = e - native.E10_MIN
        return int(lo[k]), int(hi[k])

    assert row(-348) == (0x1732C869CD60E453, 0xFA8FD5A0081C0288)
    assert row(-162) == (0x0CB4A5A3112A5112, 0xE65829B3046B0AFA)
    assert row(43) == (0x6D9CCD05D0000000, 0xE596B7B0C643C719)
    assert row(0) == (0, 1 << 63)


def decimal_strings(n: int, seed: int) -> list[str]:
    """Hard and ordinary decimal texts: shortest reprs, any bit pattern, 1-19 digits, long
    digit strings, near-halfway points between doubles, integers near 2**53 and 2**64, the
    subnormal and overflow boundaries."""
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    any_bits = rng.integers(0, 2**63, size=n, dtype=np.int64).view(np.float64).tolist()
    normal = (rng.normal(size=n) * 10.0 ** rng.integers(-300, 300, size=n)).tolist()
    out = []
    with localcontext() as ctx:
        ctx.prec = 800
        for k in range(n):
            v, w = any_bits[k], normal[k]
            kind = k % 8
            if kind == 0:
                out += [repr(v), repr(w)]
            elif kind == 1:
                out += [f"{w:.{pick.randint(1, 20)}g}", f"{v:.{pick.randint(0, 18)}e}"]
            elif kind == 2:
                digits = "".join(pick.choice("0123456789") for _ in range(pick.randint(1, 21)))
                cut = pick.randint(0, len(digits))
                text = f"{digits[:cut]}.{digits[cut:]}"
                out.append(text + (f"e{pick.randint(-345, 330)}" if pick.random() < 0.6 else ""))
            elif kind == 3 and np.isfinite(w) and w:
                x = abs(w)
                mid = (Decimal(x) + Decimal(float(np.nextafter(x, np.inf)))) / 2
                out += [format(mid, f".{pick.randint(15, 19)}e"), format(mid, "e")]
            elif kind == 4:
                base = pick.choice([2**53, 2**54, 2**63, 2**64, 10**19, 10**18, 10**16])
                out.append(str(base + pick.randint(-5, 5)))
            elif kind == 5:
                out.append(f"{w:.17f}"[:22])
            elif kind == 6:
                out.append(pick.choice([
                    "2.2250738585072014e-308", "2.2250738585072011e-308", "4.9e-324",
                    "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308",
                    "9.999999999999999e22", "1e23", "8.98846567431158e307", "0.000000000000001",
                    "123456789012345678e-30", "9007199254740993", "0.1", "0.3", "-0", "+.5e-0",
                    "1e-348", "1e-349", "1e347", "1e348", "00000000000000000000000001.5",
                ]))  # fmt: skip
            else:
                out.append(f" {w!r}\t" if k % 16 == 7 else f"{v:.3e}")
    return out


@pytest.mark.parametrize("scanner", COMPILED)
@pytest.mark.parametrize("seed", range(3))
def test_decimal_parser_is_float_bit_for_bit(scanner, seed):
    texts = [t.encode() for t in decimal_strings(20000, seed)]
    joined = b"".join(t + b",1\n" for t in texts)  # each line ends with a newline
    n = len(texts)
    X = np.empty((n, 1))
    labels = np.empty(len(joined), np.uint8)
    slow = np.empty((2 * n, 4), np.int64)
    buf = np.frombuffer(joined, np.uint8)
    status, rows, _, n_slow = SCANNERS[scanner](buf, n, 2, 1, X, labels, slow)
    assert rows == n
    assert status == 0
    left = set(slow[:n_slow, 2].tolist())
    assert len(left) < n / 3  # most cells are decided by the compiled parser
    parsed = [(t, X[i, 0]) for i, t in enumerate(texts) if i not in left]
    assert [bits(v) for _, v in parsed] == [bits(float(t)) for t, _ in parsed]
    assert len({t for t, _ in parsed}) > 10000
    # the cells left are cells float() must decide: inf, nan, subnormals, > 19 digits, ...


@pytest.mark.parametrize("scanner", COMPILED)
def test_decimal_parser_takes_the_cells_it_should(scanner):
    def decided(text: bytes) -> bool:
        ok, value = native.dense.parse_decimal(text)
        if ok:
            assert bits(value) == bits(float(text))
        return ok

    for text in [b"1", b"-0", b"0e999", b" 1.5\r", b"+.5", b"5.", b"1E+05", b"1e-300",
                 b"0.1234567890123456789", b"1e308", b"9" * 19]:  # fmt: skip
        assert decided(text), text
    for text in [b"", b" ", b".", b"-", b"e5", b"1e", b"1e+", b"1_0", b"inf", b"nan", b"0x1",
                 b"1.2.3", b"1 2", b"1\x00", b"1" * 20, b"1e-320", b"1e400", b"1e347", b"1e-400",
                 b"2.4703282292062328e-324"]:  # fmt: skip
        assert not decided(text), text


@pytest.mark.parametrize("scanner", COMPILED)
def test_plain_batches_take_the_compiled_parser(scanner):
    lines = [b"%r,%r,1,%r" % (v, -v, v / 3) for v in np.linspace(-5, 5, 999).tolist()]
    with path(scanner):
        dense = scan.parse_csv_numbers(lines, 4, 2)
    assert dense is not NotImplemented and dense is not None
    assert dense[1] == [b"1"] * 999
    assert [bits(v) for v in np.asarray(dense[0]).ravel().tolist()] == [
        bits(float(c)) for line in lines for i, c in enumerate(line.split(b",")) if i != 2
    ]


@needs_c
def test_the_default_scanner_is_c_when_built():
    assert scan.scan_csv is native.dense.scan_csv


@needs_c
def test_the_c_scanner_refuses_bad_buffers():
    X, labels, slow = np.empty((1, 1)), np.empty(8, np.uint8), np.empty((4, 4), np.int64)
    with pytest.raises(ValueError, match="newline"):
        native.dense.scan_csv(b"1,2", 1, 2, 1, X, labels, slow)
    with pytest.raises(ValueError, match="X"):
        native.dense.scan_csv(b"1,2\n2,3\n", 2, 2, 1, X, labels, slow)
    with pytest.raises(ValueError, match="label_col"):
        native.dense.scan_csv(b"1,2\n", 1, 2, 2, X, labels, slow)
