"""Hypothesis strategies for hostile records of every format (not a test module)."""

from __future__ import annotations

import json

from hypothesis import strategies as st

# Numbers a user can send: ordinary, tiny, huge, past float64, and the special spellings.
NUMBER_TEXT = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(min_value=-(10**30), max_value=10**30).map(str),
    st.sampled_from(
        ["1e200", "-1e200", "1e308", "1.8e308", "1e400", "-1e400", "4.9e-324", "1e-400",
         "9" * 400, "-" + "9" * 400, "9" * 5000, "nan", "NaN", "inf", "-Infinity", "0x10",
         "1_000", " 1 ", "", "+", "-", ".", "1e", "٣", "１"]
    ),
)  # fmt: skip

LABEL_TEXT = st.one_of(
    NUMBER_TEXT,
    st.sampled_from(["true", "false", "True", "1", "0", "-1", "+1", "1.0", "cat", "dog", ""]),
    st.text(max_size=8),
)

KEYS = st.sampled_from(["a", "b", "c", "y", "x", "a=b", "", "é", "\u0000", "1"])


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


JSON_VALUE = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(min_value=-(10**400), max_value=10**400),
        st.text(max_size=5),
    ),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)


@st.composite
def json_line(draw: st.DrawFn) -> bytes:
    """A JSON-lines record: mostly objects, with extreme numbers, duplicate keys, nesting,
    labels of every type, or plain garbage."""
    kind = draw(st.integers(0, 5))
    if kind == 0:
        return draw(st.binary(max_size=40))
    if kind == 1:  # deep nesting somewhere
        depth = draw(st.sampled_from([1, 10, 500, 2000, 20000]))
        return b'{"a": ' + _nested(depth).encode() + b', "y": 1}'
    if kind == 2:  # raw text numbers (past what json.dumps would write)
        pairs = draw(st.lists(st.tuples(KEYS, NUMBER_TEXT), max_size=4))
        body = ", ".join(f"{json.dumps(k)}: {v or '0'}" for k, v in pairs)
        return ("{" + body + ', "y": ' + (draw(LABEL_TEXT) or "null") + "}").encode()
    if kind == 3:  # duplicate keys
        k = draw(KEYS)
        return f'{{"{k}": 1, "{k}": 2, "y": 1}}'.encode()
    obj = draw(st.dictionaries(KEYS, JSON_VALUE, max_size=5))
    try:
        return json.dumps(obj).encode()
    except ValueError:  # an int past str()'s digit limit
        return b'{"a": 1, "y": 1}'


@st.composite
def csv_line(draw: st.DrawFn, columns: int) -> bytes:
    """A CSV row for a header of ``columns`` columns: numbers of every kind, wrong counts,
    quotes, empty cells, bytes that are not UTF-8."""
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=40)).replace(b"\n", b" ")
    n = columns if kind < 3 else draw(st.integers(0, columns + 2))
    cells = draw(st.lists(st.one_of(NUMBER_TEXT, LABEL_TEXT), min_size=n, max_size=n))
    line = ",".join(c.replace("\n", " ").replace("\r", " ") for c in cells)
    if kind == 4:
        line = '"' + line
    return line.encode("utf-8", "surrogatepass")


@st.composite
def libsvm_line(draw: st.DrawFn) -> bytes:
    """A libsvm row: ``label index:value ...`` with duplicate indices, qid, comments, garbage."""
    kind = draw(st.integers(0, 3))
    if kind == 0:
        return draw(st.binary(max_size=40)).replace(b"\n", b" ")
    label = draw(LABEL_TEXT).replace(" ", "").replace(":", "")
    tokens = [
        f"{draw(st.sampled_from(['1', '2', '3', 'qid', '', 'a']))}:{draw(NUMBER_TEXT).strip()}"
        for _ in range(draw(st.integers(0, 4)))
    ]
    if kind == 2:
        tokens.append("# a comment: 1:2")
    return " ".join([label, *tokens]).encode("utf-8", "surrogatepass")
