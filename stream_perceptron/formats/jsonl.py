"""JSON lines: ``{"x": {...}, "y": label}`` or a flat object whose label field is ``label``."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from stream_perceptron.errors import RecordError
from stream_perceptron.formats.base import (
    DUPLICATE_FEATURE,
    EMPTY_RECORD,
    INVALID_JSON,
    INVALID_UTF8,
    NON_FINITE,
    NON_NUMERIC,
    NOT_AN_OBJECT,
    TOO_DEEP,
    VALUE_TOO_LARGE,
    Example,
    LabelCache,
    decode_utf8,
    join_key,
)
from stream_perceptron.formats.label_cells import distinct_cells

__all__ = ["JsonLinesParser"]


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object; a key given twice is refused (which of the two would be meant?)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        counts = Counter(k for k, _ in pairs)
        twice = next(k for k, n in counts.items() if n > 1)
        raise RecordError(DUPLICATE_FEATURE, f"key {twice!r} given twice")
    return obj


def _reject_constant(name: str) -> float:
    raise RecordError(NON_FINITE, f"JSON constant {name}")


_decoder = json.JSONDecoder(parse_constant=_reject_constant, object_pairs_hook=_object)


class JsonLinesParser:
    """One JSON object per line.

    In a flat object every field but the label is a feature: numbers as they are, booleans as
    0/1, strings as indicator features ``name=value`` (River's and Vowpal Wabbit's convention),
    null as missing. A label that is absent, null or ``""`` leaves the record unlabelled.

    Examples
    --------
    >>> p = JsonLinesParser("y")
    >>> p.parse(b'{"a": 1.5, "ok": true, "colour": "red", "gone": null, "y": "spam"}')
    Example(x={'a': 1.5, 'ok': 1.0, 'colour=red': 1.0}, y='spam')
    >>> p.parse(b'{"x": {"a": 2}, "y": 1}')
    Example(x={'a': 2.0}, y=1)

    With a join ``key`` (``--join-key``), :meth:`parse_keyed` takes the key's field out first:

    >>> JsonLinesParser("y", key="id").parse_keyed(b'{"id": "e1", "colour": "red", "y": null}')
    ('e1', Example(x={'colour=red': 1.0}, y=None))

    """

    header_pending = False

    def __init__(self, label: str = "y", key: str | None = None) -> None:
        self.label = label
        self.key = key
        self._labels = LabelCache(parse=_label_of_text)  # raw label value -> label
        # The keys of the last dense block: (keys as UTF-8, label index, feature names).
        self._schema: tuple[list[bytes], int, list[str]] | None = None
        #: Whether :meth:`parse_dense_block` also gives sparse rows (the engine sets it when
        #: its learner takes them): a block of lines of any shape the record path reads.
        self.sparse_blocks = False
        self._sparse_last = False  # the last block went sparse: try that form first

    @property
    def label_cache(self) -> LabelCache:
        """Label cell -> parsed label, for the dense path (see :class:`DenseParser`)."""
        return self._labels

    def parse_dense(self, values: list[bytes]) -> tuple[list[str], Any, Sequence[bytes]] | None:
        """:meth:`parse_dense_block` of a list of lines."""
        block = b"\n".join(values) + b"\n"
        if block.count(b"\n") != len(values):
            return None
        return self.parse_dense_block(block, len(values))

    def parse_dense_block(
        self, block: bytes, n: int | None, values: list[bytes] | None = None
    ) -> tuple[list[str], Any, Sequence[bytes]] | None:
        """``n`` lines (each ending with a newline) as one dense float64 matrix, when they are
        all flat objects with the same keys in the same order, the label among them and
        numbers or booleans as the other values: ``(feature names, X, raw label values)``,
        the same floats :meth:`parse` gives. With :attr:`sparse_blocks`, lines of any shape
        :meth:`parse` reads as numbers (any key set and order, the nested form, strings,
        nulls) come as sparse rows (``X`` a
        :class:`~stream_perceptron.formats.sparse_rows.SparseRows`, see
        :func:`~stream_perceptron.formats.scan.parse_sparse_jsonl_block`). Otherwise ``None``:
        parse the lines one by one. Needs the C extension (``None`` without it).

        Examples
        --------
        >>> p = JsonLinesParser("y")
        >>> block = b'{"a": 1, "y": "no"}\\n{"a": -2.5e0, "y": 1}\\n'
        >>> names, X, labels = p.parse_dense_block(block, 2)
        >>> names, X.tolist(), labels, [p._labels[c] for c in labels]
        (['a'], [[1.0], [-2.5]], [b'"no"', b'1'], ['no', 1])

        """
        from stream_perceptron import native
        from stream_perceptron.formats import scan

        c = native.dense
        if c is None or self.key is not None:  # a join key: row by row
            return None
        if n is None:
            n = c.count_lines(block, 0, len(block))
        if n == 0:
            return None
        dense = None
        first = not self._sparse_last  # the dense form first, until a block goes sparse
        if first:
            dense = self._dense_block(block, n)
        if dense is None and self.sparse_blocks:
            dense = scan.parse_sparse_jsonl_block(block, n, self.label)
            self._sparse_last = dense is not None
            if dense is None and not first:
                dense = self._dense_block(block, n)
        if dense is None:
            return None
        names, X, cells = dense
        try:
            for cell in distinct_cells(cells):
                self._labels[cell]  # noqa: B018 - parses it, or raises for a bad one
        except (ValueError, RecordError):  # UnicodeDecodeError and JSONDecodeError are ones
            return None
        return names, X, cells

    def _dense_block(self, block: bytes, n: int) -> tuple[list[str], Any, Sequence[bytes]] | None:
        """The block as a dense matrix, when its lines are flat objects with the same keys in
        the same order and numbers or booleans as values; ``None`` otherwise."""
        from stream_perceptron.formats import scan

        schema = self._schema
        for _ in range(2):
            if schema is None:
                schema = self._schema = self._schema_of(block[: block.index(b"\n")])
                if schema is None:
                    return None
            keys, label_index, names = schema
            dense = scan.parse_jsonl_block(block, n, keys, label_index)
            if dense is not None:
                break
            if self._schema_of(block[: block.index(b"\n")]) in (schema, None):
                return None
            schema = None  # the keys changed: once more with the new ones
        else:
            return None
        X, cells = dense
        return names, X, cells

    def _schema_of(self, line: bytes) -> tuple[list[bytes], int, list[str]] | None:
        """The keys of a flat object line the dense path can read, or ``None``."""
        try:
            obj = _decode(line.decode("utf-8"))
        except (ValueError, RecordError):  # UnicodeDecodeError is a ValueError
            return None
        if not isinstance(obj, dict) or self.label not in obj:
            return None
        for key, v in obj.items():
            if key != self.label and type(v) not in (int, float, bool):
                return None
            if json.dumps(key, ensure_ascii=False) != f'"{key}"':  # escapes in the key
                return None
        keys = list(obj)
        return [k.encode() for k in keys], keys.index(self.label), [
            k for k in keys if k != self.label
        ]

    def parse(self, value: bytes) -> Example:
        return self._example(self._object(value))

    def parse_keyed(self, value: bytes) -> tuple[str | None, Example]:
        """``(join key, example)``: the :attr:`key` field (a string or an integer, see
        :func:`~stream_perceptron.formats.base.join_key`) is not a feature."""
        obj = self._object(value)
        key = join_key(obj.pop(self.key, None)) if self.key is not None else None
        return key, self._example(obj)

    def _object(self, value: bytes) -> dict[str, Any]:
        text = decode_utf8(value)
        if not text.strip():
            raise RecordError(EMPTY_RECORD, "empty line")
        obj = _decode(text)
        if not isinstance(obj, dict):
            raise RecordError(NOT_AN_OBJECT, f"a JSON {type(obj).__name__}, not an object")
        return obj

    def _example(self, obj: dict[str, Any]) -> Example:
        nested = obj.get("x")
        if isinstance(nested, dict) and len(obj) <= 2 and (len(obj) == 1 or "y" in obj):
            return Example(_features(nested, None), _label(obj.get("y")))
        return Example(_features(obj, self.label), _label(obj.get(self.label)))


def _features(obj: dict[str, Any], label: str | None) -> dict[str, float]:
    x: dict[str, float] = {}
    for name, v in obj.items():
        if name == label or v is None:
            continue
        t = type(v)
        if t is float:
            if not math.isfinite(v):
                raise RecordError(NON_FINITE, f"feature {name!r} is {v}")
            x[name] = v
        elif t is int or t is bool:
            try:
                x[name] = float(v)
            except OverflowError:
                raise RecordError(
                    VALUE_TOO_LARGE, f"feature {name!r} is an integer past float64's range"
                ) from None
        elif t is str:
            x[f"{name}={v}"] = 1.0
        else:
            raise RecordError(NON_NUMERIC, f"feature {name!r} is a JSON {t.__name__}")
    return x


# A ``\uD800``-``\uDFFF`` escape: the only way a surrogate gets into text decoded as UTF-8.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _decode(text: str) -> Any:
    r"""One JSON value, or the :class:`RecordError` that says why it is not one we can hold.

    A string holding a lone surrogate (``"\\ud800"`` not paired with a low one) is not text:
    no exporter could write it as UTF-8, so the record is refused as ``invalid_utf8``, like a
    byte sequence that does not decode (a pair of escapes is one character, and is kept).

    Examples
    --------
    >>> _decode('{"\\ud83d\\ude00": 1}')
    {'😀': 1}
    >>> _decode('{"x": {"\\ud800": 1.0}}')
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.RecordError: invalid_utf8: a lone surrogate escape (\ud800)

    """
    try:
        obj = _decoder.decode(text)
    except json.JSONDecodeError as e:
        where = "column" if e.msg.endswith(" at") else "at column"  # "... starting at"
        raise RecordError(INVALID_JSON, f"{e.msg} {where} {e.colno}") from None
    except RecordError:  # NaN or Infinity (a ValueError too)
        raise
    except RecursionError:
        raise RecordError(TOO_DEEP, "nested deeper than the parser allows") from None
    except ValueError as e:  # an integer over Python's digit limit for str -> int
        raise RecordError(VALUE_TOO_LARGE, str(e)) from None
    if _SURROGATE_ESCAPE.search(text) is not None:
        try:
            json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as e:
            bad = e.object[e.start : e.end].encode("unicode_escape").decode("ascii")
            raise RecordError(INVALID_UTF8, f"a lone surrogate escape ({bad})") from None
    return obj


def _label_of_text(text: str) -> Any:
    """A raw JSON label value (as the dense path copies it) -> the label :meth:`parse` gives."""
    return _label(_decode(text))


def _label(y: Any) -> Any:
    if y is None or y == "":
        return None
    if isinstance(y, (dict, list)):
        raise RecordError(NON_NUMERIC, f"label is a JSON {type(y).__name__}")
    if isinstance(y, float):
        if not math.isfinite(y):
            raise RecordError(NON_FINITE, f"label is {y}")
        if y.is_integer():
            return int(y)
    return y
