"""What parsers share: the Example type, text decoding, label and number conversion."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from stream_perceptron.errors import RecordError

__all__ = [
    "BlockParser",
    "DenseBatch",
    "DenseParser",
    "Example",
    "KeyedParser",
    "LabelCache",
    "Parser",
    "join_key",
    "decode_utf8",
    "parse_label",
    "to_number",
]

# Reasons a record is rejected: metric label values and dead-letter "reason" fields.
INVALID_UTF8 = "invalid_utf8"
INVALID_JSON = "invalid_json"
NOT_AN_OBJECT = "not_an_object"
NON_NUMERIC = "non_numeric_value"
NON_FINITE = "non_finite_value"
WRONG_COLUMN_COUNT = "wrong_column_count"
MALFORMED_TOKEN = "malformed_token"
MALFORMED_CSV = "malformed_csv"
EMPTY_RECORD = "empty_record"
LABEL_OUTSIDE_ENCODING = "label_outside_encoding"  # a third label for a binary learner
VALUE_TOO_LARGE = "value_too_large"  # a number past float64 or Python's int conversion limit
TOO_DEEP = "too_deep"  # JSON nested deeper than the parser's recursion allows
DUPLICATE_FEATURE = "duplicate_feature"  # a JSON key or libsvm index given twice in a record
UNPARSEABLE = "unparseable"  # a parser failed in a way no rule above foresaw (a bug: reported)
BAD_JOIN_KEY = "bad_join_key"  # --join-key: the key is not a string or an integer
MISSING_JOIN_KEY = "missing_join_key"  # --join-key: a label without features or a key


class Example(NamedTuple):
    """Features ``x`` (a sparse dict of floats) and a label ``y`` (``None``: unlabelled)."""

    x: dict[str, float]
    y: Any


@runtime_checkable
class Parser(Protocol):
    """A record format: one record's bytes to an :class:`Example` (``None``: a header)."""

    header_pending: bool

    def parse(self, value: bytes) -> Example | None: ...


@runtime_checkable
class KeyedParser(Parser, Protocol):
    """A format with named fields, read with a join key (``--join-key``): the key's field is
    taken out of the record before its features are made."""

    key: str | None

    def parse_keyed(self, value: bytes) -> tuple[str | None, Example] | None:
        """``(key, example)`` (key ``None``: the record has none), or ``None`` for a header."""
        ...


def join_key(value: Any) -> str | None:
    """A join key as the join holds it: a string as it is, an integer as its decimal text (so
    ``17`` and ``"17"`` are one key); ``None`` or ``""``: no key. Anything else (a float, a
    boolean, an object) is refused as ``bad_join_key``.

    Examples
    --------
    >>> join_key("order-7"), join_key(17), join_key(""), join_key(None)
    ('order-7', '17', None, None)
    >>> join_key(1.5)
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.RecordError: bad_join_key: key 1.5 is not a string or an integer

    """
    if value is None or value == "":
        return None
    if type(value) is str:
        return value
    if type(value) is int:
        return str(value)
    raise RecordError(BAD_JOIN_KEY, f"key {str(value)[:50]} is not a string or an integer")


#: ``(feature names, X, label cells)``: a batch of plain lines as one float64 matrix (one row a
#: line, the features in the names' order) and each line's raw label cell (``b""``: none), a
#: list or a :class:`~stream_perceptron.formats.label_cells.LabelCells`.
DenseBatch = tuple[list[str], Any, Sequence[bytes]]


@runtime_checkable
class DenseParser(Parser, Protocol):
    """A format whose plain lines can be parsed a batch at a time, for the engine's block path.

    ``label_cache`` turns the raw label cells of a :data:`DenseBatch` into labels, exactly as
    :meth:`parse` would give them.
    """

    @property
    def label_cache(self) -> LabelCache: ...

    def parse_dense(self, values: list[bytes]) -> DenseBatch | None:
        """The lines as one :data:`DenseBatch`, or ``None`` when any is not plain."""
        ...


@runtime_checkable
class BlockParser(DenseParser, Protocol):
    """A dense parser that also reads a :class:`~connectors.LineBlock`'s bytes whole."""

    def parse_dense_block(self, block: bytes, n: int | None) -> DenseBatch | None:
        """:meth:`DenseParser.parse_dense` of ``n`` newline-ended lines given as one block
        (``None``: as many as it holds, counted by the parser)."""
        ...


def decode_utf8(value: bytes) -> str:
    """Bytes as text, or RecordError ``invalid_utf8``."""
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as e:
        raise RecordError(INVALID_UTF8, f"byte {e.start}: {e.reason}") from None


def to_number(name: str, text: str) -> float:
    """A feature value from text, or RecordError for non-numeric and non-finite values."""
    try:
        v = float(text)
    except ValueError:
        raise RecordError(NON_NUMERIC, f"feature {name!r} has value {text[:50]!r}") from None
    if not math.isfinite(v):
        raise RecordError(NON_FINITE, f"feature {name!r} has value {text[:50]!r}")
    return v


def parse_label(text: str) -> Any:
    """A label from text: an int when it is one (``+1`` -> 1, ``1.0`` -> 1), ``true``/``false``
    as bool, otherwise the text itself (a class name). Empty text means no label.

    Examples
    --------
    >>> [parse_label(t) for t in ["+1", "-1", "0", "2.0", "true", "cat", " "]]
    [1, -1, 0, 2, True, 'cat', None]

    """
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        v = float(text)
    except ValueError:
        return text
    if v.is_integer():
        return int(v)
    return text


class LabelCache(dict):
    """Label cell (bytes) -> ``parse`` of its text (:func:`parse_label` by default), parsed once
    per distinct cell.

    Keeps at most ``limit`` cells, so a stream of ever-new class names cannot grow it without
    bound. A cell that is not UTF-8 raises ``UnicodeDecodeError``; ``parse`` may raise too.

    Examples
    --------
    >>> labels = LabelCache()
    >>> labels[b"+1"], labels[b"spam"], len(labels)
    (1, 'spam', 2)

    """

    def __init__(self, limit: int = 10_000, parse: Callable[[str], Any] = parse_label) -> None:
        super().__init__()
        self.limit = limit
        self.parse = parse

    def __missing__(self, cell: bytes) -> Any:
        label = self.parse(cell.decode("utf-8"))
        if len(self) < self.limit:
            self[cell] = label
        return label
