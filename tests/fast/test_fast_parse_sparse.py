"""The sparse scanners against the record parsers: every line the scanner takes gives the
features (names, order, float bits) and label of ``parse``; every line it declines is one the
record path refuses or reads otherwise, and a block holding one is declined whole."""

from __future__ import annotations

import json
import math
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_perceptron import native
from stream_perceptron.errors import RecordError
from stream_perceptron.formats import make_parser, scan
from stream_perceptron.formats.sparse_rows import SparseRows

pytestmark = pytest.mark.skipif(native.dense is None, reason="the C extension is not built")


def _bits(x: dict[str, float]) -> list[tuple[str, bytes]]:
    """A feature dict as its names in order and each value's float bits (-0.0 is not 0.0)."""
    return [(k, struct.pack("<d", v)) for k, v in x.items()]


def _scan(fmt: str, lines: list[bytes]) -> tuple[list[str], SparseRows, list[bytes]] | None:
    parser = make_parser(fmt)
    parser.sparse_blocks = True
    block = b"\n".join(lines) + b"\n"
    return parser.parse_dense_block(block, len(lines))


def _reference(fmt: str, line: bytes) -> tuple[dict[str, float], object] | None:
    try:
        example = make_parser(fmt).parse(line)
    except RecordError:
        return None
    return example.x, example.y


def _dicts(names: list[str], X: object) -> list[dict[str, float]]:
    """A block's rows as dicts: sparse rows, or a dense matrix (a steady flat JSON block)."""
    if isinstance(X, SparseRows):
        return X.dicts(names)
    return [dict(zip(names, row, strict=True)) for row in X.tolist()]  # type: ignore[attr-defined]


def _check_block(fmt: str, lines: list[bytes]) -> bool:
    """The scanner's block equals the record parser line by line; True when it took it."""
    got = _scan(fmt, lines)
    expected = [_reference(fmt, line) for line in lines]
    if got is None:
        return False
    assert None not in expected, "the scanner took a block holding a line parse() refuses"
    names, rows, cells = got
    parser = make_parser(fmt)
    for x, cell, (ref_x, ref_y) in zip(_dicts(names, rows), cells, expected, strict=True):
        assert _bits(x) == _bits(ref_x)
        label = parser.label_cache[cell]
        assert label == ref_y and type(label) is type(ref_y)
    return True


JSON_TAKEN = [
    b'{"a": 1, "b": -2.5e-3, "y": 1}',
    b'{"y": "spam", "b": 0.1, "z": true, "w": false, "gone": null}',
    b'{"colour": "red", "size": 2, "y": 0}',
    b'{"x": {"f1": 1.5, "f2": "blue"}, "y": -1}',
    b'{"y": 2, "x": {"f1": -0}}',
    b'{"x": {"f1": -0.0, "f9": 1e-320}}',
    b'{"a": 123456789012345678901234567890, "y": 1}',
    b'{"a": 9007199254740993, "b": 1.7976931348623157e308, "y": 1}',
    b'{"caf\\u00e9": 1, "\\ud83d\\ude00": "\\u0072ed", "q\\"uote": "a\\\\b", "y": "\\u00e9"}',
    b'{"y": null, "a": 1}',
    b'{"a": 1}',
    b"{}",
    b'  {"a" : 1 ,"y":1 }  ',
    b'{"\xc3\xa9t\xc3\xa9": "\xe2\x82\xac", "y": 1}',
    b'{"a": "", "y": ""}',
]

JSON_DECLINED = [
    b'{"a": 1, "a": 2, "y": 1}',  # a duplicate key
    b'{"a": "b", "a": "c", "y": 1}',  # a duplicate key, string values
    b'{"a": NaN, "y": 1}',
    b'{"a": Infinity, "y": 1}',
    b'{"a": 1e400, "y": 1}',
    b'{"a": [1], "y": 1}',
    b'{"a": {"b": 1}, "y": 1}',
    b'{"x": {"a": 1}, "y": 1, "z": 2}',  # an object among other members: non_numeric
    b'{"x": {"a": {"b": 1}}, "y": 1}',
    b'{"a": 01, "y": 1}',
    b'{"a": .5, "y": 1}',
    b'{"a": 1., "y": 1}',
    b'{"a": +1, "y": 1}',
    b'{"a": 1,}',
    b'{"a\\ud800": 1}',  # a lone surrogate escape: invalid_utf8
    b'{"a": "\\udc00"}',
    b'{"a": "\\x41"}',
    b'{"a": "tab\there"}',
    b'{"a": 1, "y": {"b": 1}}',  # a label that is an object
    b'{"a": 1, "y": [1]}',
    b'{"a": tru}',
    b"[1, 2]",
    b"",
    b'{"\xff": null, "a": 1}',  # not UTF-8, in a key whose value is null
    b'{"a": 1} x',
]


@pytest.mark.parametrize("line", JSON_TAKEN)
def test_json_lines_the_scanner_takes_are_parsed_as_parse_does(line):
    assert _check_block("jsonl", [line, b'{"a": 2, "y": 1}'])


@pytest.mark.parametrize("line", JSON_DECLINED)
def test_a_json_line_the_scanner_cannot_take_sends_the_whole_block_to_the_record_path(line):
    assert _scan("jsonl", [b'{"a": 2, "y": 1}', line, b'{"a": 3, "y": 0}']) is None


def test_a_name_made_twice_in_a_row_goes_to_the_record_path():
    # "a=b" as a key and as a's string value: one feature name, given twice in the row
    assert _scan("jsonl", [b'{"a=b": 2, "a": "b", "y": 1}']) is None
    assert _reference("jsonl", b'{"a=b": 2, "a": "b", "y": 1}') is not None


def test_the_nested_form_follows_parse_with_another_label_field():
    parser = make_parser("jsonl", label="target")
    parser.sparse_blocks = True
    # nested: the label is "y" whatever --label says; with "y" beside "x" the scanner declines
    assert parser.parse_dense_block(b'{"x": {"a": 1}, "y": 1}\n', 1) is None
    names, rows, cells = parser.parse_dense_block(b'{"x": {"a": 1}}\n{"a": 2, "target": 1}\n', 2)
    assert rows.dicts(names) == [{"a": 1.0}, {"a": 2.0}]
    assert [parser.label_cache[c] for c in cells] == [None, 1]


LIBSVM_TAKEN = [
    b"1 1:0.5 3:-2 10:1e3",
    b"-1 qid:3 2:1 # a comment: 5:6",
    b"2:1.5 7:-0",
    b"+1 a:1 b:.5 c:5. d:1_0 e:-0.0",
    b"cat 1:1\t2:2",
    b"1 1:00012 2:1e-400",
    b"1 5:123456789012345678901234567890",
    b"0",
    b"1#x 2:3",
]

LIBSVM_DECLINED = [
    b"1 1:",
    b"1 :1",
    b"1 a:b:c",
    b"1 1:1 1:2",
    b"1 1:nan",
    b"1 1:inf",
    b"1 1:1e400",
    b"1 1:x",
    b"1 2 3:1",
    b"",
    b"# only a comment",
    b"1 qid:",
    b"1 \xc3\xa9:1",  # not ASCII before the comment: str.split's own whitespace rules
]


@pytest.mark.parametrize("line", LIBSVM_TAKEN)
def test_libsvm_lines_the_scanner_takes_are_parsed_as_parse_does(line):
    assert _check_block("libsvm", [line, b"1 1:1"])


@pytest.mark.parametrize("line", LIBSVM_DECLINED)
def test_a_libsvm_line_the_scanner_cannot_take_sends_the_block_to_the_record_path(line):
    assert _scan("libsvm", [b"1 1:1", line]) is None


def test_scanners_hand_out_no_block_unless_asked():
    for fmt, line in (("jsonl", b'{"a": 1, "b": "c", "y": 1}'), ("libsvm", b"1 1:2")):
        parser = make_parser(fmt)
        assert parser.parse_dense_block(line + b"\n", 1) is None
        parser.sparse_blocks = True
        assert parser.parse_dense_block(line + b"\n", 1) is not None


_names = st.sampled_from(["a", "b", "c", "é", "k=v", "k", "x", "y", "x y", "\\u0061", "\\\""])
_numbers = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["-0", "0.0", "-0.0", "1e-320", "2.5E+3", "1e308", "123456789.123456789e-5"]),
)
_values = st.one_of(
    _numbers, st.sampled_from(["true", "false", "null", '"red"', '""', '"\\u00e9"', '"a\\"b"'])
)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.lists(st.tuples(_names, _values), max_size=6), min_size=1, max_size=5))
def test_random_json_objects_match_parse(objects):
    lines = [("{" + ", ".join(f'"{k}": {v}' for k, v in obj) + "}").encode() for obj in objects]
    if not _check_block("jsonl", lines):  # declined: a line is refused, or names one twice
        assert any(_reference("jsonl", line) is None or _names_twice(line) for line in lines)


def _names_twice(line: bytes) -> bool:
    """Whether the flat object ``line`` makes one feature name twice ("k=v" and k: "v")."""
    made = [
        f"{k}={v}" if isinstance(v, str) else k
        for k, v in json.loads(line, object_pairs_hook=list)
        if k != "y" and v is not None
    ]
    return len(set(made)) != len(made)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["", "1", "-1", "+1", "cat", "2.0"]),
            st.lists(st.tuples(st.integers(0, 20), _numbers), max_size=6),
        ),
        min_size=1, max_size=5,
    )
)
def test_random_libsvm_lines_match_parse(rows):
    lines = []
    for label, items in rows:
        tokens = [label] if label else []
        tokens += [f"{k}:{v}" for k, v in items]
        lines.append(" ".join(tokens).encode())
    if not _check_block("libsvm", lines):
        assert any(_reference("libsvm", line) is None for line in lines)


def test_the_values_are_the_parsers_floats_to_the_bit():
    rng = random.Random(7)
    texts = [repr(rng.uniform(-1e6, 1e6)) for _ in range(300)]
    texts += [f"{rng.randint(1, 10**19)}e{rng.randint(-330, 280)}" for _ in range(300)]
    texts += [f"0.{rng.randint(0, 10**25):025d}" for _ in range(100)]
    lines = [b'{"a": %s, "y": 1}' % t.encode() for t in texts]
    names, rows, _ = _scan("jsonl", lines)
    got = [x["a"] for x in _dicts(names, rows)]
    for text, value in zip(texts, got, strict=True):
        expected = float(text) if ("." in text or "e" in text) else float(int(text))
        assert math.isfinite(value) and struct.pack("<d", value) == struct.pack("<d", expected)


def _short_numbers(rng: random.Random) -> list[str]:
    """JSON numbers (and near misses) of every length around the scanner's short form (up to
    seven integer digits, up to seven fraction digits, no exponent): 0 to 9 digits each side,
    with or without a sign, a point, an exponent, leading zeros."""

    def digits(n: int) -> str:
        return "".join(rng.choice("0123456789") for _ in range(n))

    out = []
    for k in range(10):
        for n in (None, 0, 1, 2, 4, 6, 7, 8, 9):  # None: no point
            text = digits(k) if n is None else f"{digits(k)}.{digits(n)}"
            out += [sign + text + tail for sign in ("", "-") for tail in ("", "e3", "E-2")]
    return out + list(_SHORT_EDGES)


_SHORT_EDGES = (
    "0", "-0", "00", "01", "-01", "0.0", "-0.0", "00.5", "0.50", "1.", "-.5", "-", "1.e5",
    "9999999.9999999", "-1234567.7654321", "10000000.5", "0.00000001",
)  # fmt: skip


@pytest.mark.parametrize("room", [True, False], ids=["bytes-after", "at-the-block-end"])
def test_short_numbers_are_the_parsers_floats_to_the_bit_or_refused_as_parse_refuses(room):
    """The sparse JSON scanner reads a short decimal with two 8-byte loads when 16 bytes
    follow its first digit, else digit by digit: both ways give parse()'s float, and what
    parse() refuses the scanner declines."""
    rng = random.Random(43)
    other = b'{"y": 0, "b": 1}'  # another key set: the sparse scanner, not the steady one's
    for text in _short_numbers(rng):
        value = text.encode()
        line = b'{"a": %s, "y": 1, "bbbb": 2}' % value if room else b'{"y": 1, "a": %s}' % value
        if _reference("jsonl", line) is None:
            assert _scan("jsonl", [other, line]) is None, text
        else:
            assert _check_block("jsonl", [other, line]), text
            assert isinstance(_scan("jsonl", [other, line])[1], SparseRows)  # type: ignore[index]


@pytest.mark.parametrize("room", [True, False], ids=["bytes-after", "at-the-block-end"])
def test_short_strings_with_an_escape_or_a_control_character_are_read_as_parse_reads_them(room):
    """A key or string value ending within eight bytes is found with one 8-byte load when
    eight bytes follow its opening quote: an escape or a raw control character there still
    takes the long way (decoded, or refused as parse() refuses it)."""
    other = b'{"y": 0, "b": 1}'  # another key set: the sparse scanner
    texts = [b"a", b"abcdefg", b"q\\\"x", b"\\u0061b", b"a\\nb", b"\\\\", b"ab\tc",
             b"\x01", b"a\x1fb", b"\x7f", b"\xc3\xa9t\xc3\xa9"]
    for text in texts:
        tail = b', "bbbbbbbb": 2}' if room else b"}"
        for line in (b'{"y": 1, "%s": 1' % text + tail, b'{"y": 1, "k": "%s"' % text + tail):
            if _reference("jsonl", line) is None:
                assert _scan("jsonl", [other, line]) is None, line
            else:
                assert _check_block("jsonl", [other, line]), line


CSV_TAKEN = [b"1.5,1,", b",0,2e3", b",,", b" 1 ,1,-0", b"1_0,cat,0.5"]
CSV_DECLINED = [b" ,1,1", b'"1",1,1', b"1,1", b"1,1,1,1", b"nan,1,", b"1e400,,1", b"x,1,"]


def _csv(lines: list[bytes]) -> tuple[list[str], SparseRows, list[bytes]] | None:
    parser = make_parser("csv")
    parser.parse(b"a,y,b")
    parser.sparse_blocks = True
    return parser.parse_dense_block(b"\n".join(lines) + b"\n", len(lines))


@pytest.mark.parametrize("line", CSV_TAKEN)
def test_csv_lines_with_empty_cells_are_parsed_as_parse_does(line):
    got = _csv([line, b"1,0,2"])
    assert got is not None
    names, rows, cells = got
    reference = make_parser("csv")
    reference.parse(b"a,y,b")
    for x, cell, text in zip(_dicts(names, rows), cells, [line, b"1,0,2"], strict=True):
        example = reference.parse(text)
        assert _bits(x) == _bits(example.x)
        assert reference.label_cache[cell] == example.y


@pytest.mark.parametrize("line", CSV_DECLINED)
def test_a_csv_line_the_scanners_cannot_take_sends_the_block_to_the_record_path(line):
    assert _csv([b",1,2", line]) is None


@pytest.mark.parametrize("fmt", ["jsonl", "libsvm"])
def test_a_block_scanned_in_two_halves_at_once_is_the_block_scanned_whole(fmt, monkeypatch):
    # the halves number their names each their own way: the second's slots are renumbered
    rng = random.Random(11)
    names = [f"f{k}" for k in range(40)]
    lines = []
    for i in range(400):
        keys = rng.sample(names[: 10 + i // 10], 5)  # new names keep coming in both halves
        if fmt == "jsonl":
            members = [f'"{k}": {rng.uniform(-5, 5)!r}' for k in keys]
            members.append(f'"c": "{rng.choice(["red", "blue", "é"])}"')
            members.insert(rng.randrange(len(members)), f'"y": {rng.choice([0, 1])}')
            lines.append(("{" + ", ".join(members) + "}").encode())
        else:
            items = " ".join(f"{k}:{rng.uniform(-5, 5)!r}" for k in keys)
            lines.append(f"{rng.choice(['0', '1', ''])} {items}".strip().encode())
    whole = _scan(fmt, lines)
    monkeypatch.setattr(scan, "SPLIT_BYTES", 64)
    monkeypatch.setattr(scan, "_CPUS", 2)
    halves = _scan(fmt, lines)
    assert whole is not None and halves is not None
    assert len(halves[0]) == len(set(halves[0]))
    assert _dicts(halves[0], halves[1]) == _dicts(whole[0], whole[1])
    assert [list(d) for d in _dicts(halves[0], halves[1])] == [
        list(d) for d in _dicts(whole[0], whole[1])
    ]
    assert halves[2] == whole[2]
    assert _check_block(fmt, lines)
