"""CSV: a header row, then one record per row; the label column is named by ``label``."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from typing import Any

from stream_perceptron.errors import RecordError
from stream_perceptron.formats.base import (
    EMPTY_RECORD,
    MALFORMED_CSV,
    WRONG_COLUMN_COUNT,
    Example,
    LabelCache,
    decode_utf8,
    join_key,
    parse_label,
    to_number,
)

__all__ = ["CsvParser", "CsvHeaderError"]


class CsvHeaderError(RecordError):
    """The header row is unusable (no label column, duplicate names): the stream cannot be read."""


class CsvParser:
    """Comma-separated values with a header row.

    Every column but the label is a numeric feature; an empty cell is a missing feature. An
    empty label cell leaves the record unlabelled. Quoted cells follow RFC 4180 (one line each).

    Examples
    --------
    >>> p = CsvParser("y")
    >>> p.parse(b"a,b,y") is None
    True
    >>> p.parse(b"1.5,,0")
    Example(x={'a': 1.5}, y=0)
    >>> p.parse(b"1,2")
    Traceback (most recent call last):
    ...
    stream_perceptron.errors.RecordError: wrong_column_count: 2 columns, the header has 3

    With a join ``key`` column (``--join-key``), :meth:`parse_keyed` gives it apart; it is not
    a feature (an outcome row leaves the feature cells empty):

    >>> p = CsvParser("y", key="id")
    >>> p.parse_keyed(b"id,a,y") is None
    True
    >>> p.parse_keyed(b"e1,1.5,"), p.parse_keyed(b"e1,,1")
    (('e1', Example(x={'a': 1.5}, y=None)), ('e1', Example(x={}, y=1)))

    """

    def __init__(self, label: str = "y", key: str | None = None) -> None:
        self.label = label
        self.key = key
        self.header_pending = True
        self._names: list[str] = []
        self._feature_names: list[str] = []
        self._label_index = -1
        self._key_index = -1
        self._labels = LabelCache()  # label cell -> parsed label, for the fast path
        #: Whether :meth:`parse_dense_block` gives lines with empty cells as sparse rows (the
        #: engine sets it when its learner takes them).
        self.sparse_blocks = False
        self._sparse_last = False  # the last block went sparse: try that form first

    def parse(self, value: bytes) -> Example | None:
        if self.key is not None:
            keyed = self.parse_keyed(value)
            return None if keyed is None else keyed[1]
        if not self.header_pending:
            example = self._parse_plain(value)
            if example is not None:
                return example
        return self._parse_checked(value)

    def parse_keyed(self, value: bytes) -> tuple[str | None, Example] | None:
        """``(join key, example)`` of a row (``None``: the header): the :attr:`key` column's
        cell (``""``: no key) is not a feature."""
        if self.header_pending:
            self._parse_checked(value)
            return None
        cells = value.split(b",")
        ki, li = self._key_index, self._label_index
        if len(cells) == len(self._names) and b'"' not in value:  # the common case, fast
            try:
                key = cells[ki].decode("utf-8").strip() or None
                y = self._labels[cells[li]]
                values = [float(c) for i, c in enumerate(cells) if i != ki and i != li]
            except ValueError:  # an empty or bad cell (UnicodeDecodeError is one): checked
                pass
            else:
                total = sum(values)
                if total - total == 0.0:  # no NaN or infinity
                    return key, Example(dict(zip(self._feature_names, values)), y)
        text = decode_utf8(value)
        cells_text = self._cells(text)
        return join_key(cells_text[ki].strip()), self._example(cells_text)

    def _parse_plain(self, value: bytes) -> Example | None:
        """The common case, fast: every cell a finite number, no quotes. ``None``: not that case,
        and :meth:`_parse_checked` finds out what it is (same result, or the reason it is bad)."""
        cells = value.split(b",")
        if len(cells) != len(self._names) or b'"' in value:
            return None
        label_cell = cells.pop(self._label_index)
        try:
            values = list(map(float, cells))
        except ValueError:
            return None
        total = sum(values)
        if total - total != 0.0:  # a NaN or an infinity (or an overflowing sum: re-checked)
            return None
        try:
            y = self._labels[label_cell]
        except UnicodeDecodeError:
            return None
        return Example(dict(zip(self._feature_names, values)), y)

    @property
    def label_cache(self) -> LabelCache:
        """Label cell -> parsed label, for the dense path (see :class:`DenseParser`)."""
        return self._labels

    def parse_dense(self, values: list[bytes]) -> tuple[list[str], Any, Sequence[bytes]] | None:
        """A batch of data lines (the header already parsed) as one dense float64 matrix.

        When every line is plain -- no quote, the header's column count, every feature cell a
        finite number -- return ``(feature names, X, label cells)``: ``X`` float64 of shape
        ``(len(values), len(feature names))`` in header order without the label column, the
        same floats as ``float()`` gives (so the same as :meth:`parse`), and the label cells as
        bytes (``b""``: unlabelled; parse them with ``parse_label``). Otherwise ``None``: parse
        the lines one by one with :meth:`parse` (which also reports the bad ones).

        Examples
        --------
        >>> p = CsvParser("y")
        >>> p.parse(b"a,y,b")
        >>> names, X, labels = p.parse_dense([b"1.5,1,-2", b"0,,1e3"])
        >>> names, X.tolist(), list(labels)
        (['a', 'b'], [[1.5, -2.0], [0.0, 1000.0]], [b'1', b''])
        >>> p.parse_dense([b"1.5,1,-2", b"0,,"]) is None  # an empty (missing) feature cell
        True

        """
        if self.header_pending or self.key is not None:  # a key column: row by row
            return None
        block = b"\n".join(values) + b"\n"
        if block.count(b"\n") != len(values):  # a line holds a newline
            return self._dense_by_float(values)
        return self.parse_dense_block(block, len(values), values)

    def parse_dense_block(
        self, block: bytes, n: int | None, values: list[bytes] | None = None
    ) -> tuple[list[str], Any, Sequence[bytes]] | None:
        """:meth:`parse_dense` of ``n`` lines given as one block, each line ending with a newline
        (``values``, the same lines as a list, if the caller has it; ``n`` ``None``: as many as
        the block holds, ``len(X)``).

        Examples
        --------
        >>> p = CsvParser("y")
        >>> p.parse(b"a,y,b")
        >>> names, X, labels = p.parse_dense_block(b"1.5,1,-2\\n0,,1e3\\n", 2)
        >>> X.tolist(), list(labels)
        ([[1.5, -2.0], [0.0, 1000.0]], [b'1', b''])

        """
        from stream_perceptron.formats import scan

        if self.header_pending or self.key is not None:
            return None
        tried = self._sparse_last  # the last block had empty cells: so may this one
        if tried:
            sparse = self._sparse_block(block, n)
            if sparse is not None:
                return sparse
        # The C scanner (float() for the cells it leaves), when the extension is built:
        dense = scan.parse_csv_block(block, n, len(self._names), self._label_index)
        if dense is NotImplemented:
            lines = values if values is not None else block[:-1].split(b"\n")
            by_float = self._dense_by_float(lines)
            if by_float is not None:
                return by_float
        elif dense is not None:
            return list(self._feature_names), dense[0], dense[1]
        sparse = None if tried else self._sparse_block(block, n)
        self._sparse_last = sparse is not None
        return sparse

    def _sparse_block(
        self, block: bytes, n: int | None
    ) -> tuple[list[str], Any, Sequence[bytes]] | None:
        """Lines with empty cells (missing features) as sparse rows, for a learner that takes
        them (:attr:`sparse_blocks`); ``None`` otherwise."""
        from stream_perceptron.formats import scan

        if not self.sparse_blocks:
            return None
        if n is None:
            n = block.count(b"\n")
        sparse = scan.parse_sparse_csv_block(block, n, len(self._names), self._label_index)
        if sparse is None:
            return None
        try:
            for cell in set(sparse[1]):
                self._labels[cell]  # noqa: B018 - parses it, or raises for a bad one
        except (ValueError, RecordError):
            return None
        return list(self._feature_names), sparse[0], sparse[1]

    def _dense_by_float(self, values: list[bytes]) -> tuple[list[str], Any, list[bytes]] | None:
        """:meth:`parse_dense` without the C scanner: ``float()`` on every cell (called from
        NumPy's C code), the reference the scanner is held to."""
        import numpy as np

        n = len(values)
        ncol = len(self._names)
        names = list(self._feature_names)
        commas = ncol - 1
        for value in values:  # the column count of every line (a quote is checked below)
            if value.count(b",") != commas:
                return None
        joined = b",".join(values)
        if b'"' in joined:
            return None
        cells = joined.split(b",") if values else []
        labels = cells[self._label_index :: ncol]
        del cells[self._label_index :: ncol]
        try:
            b"\n".join(labels).decode("utf-8")
            # float() on each cell, in C: np.array calls PyNumber_Float on each bytes object.
            X = np.array(cells, dtype=np.float64)
        except ValueError:  # UnicodeDecodeError is one
            return None
        X = X.reshape(n, ncol - 1)
        if not np.isfinite(X).all():
            return None
        return names, X, labels

    def _parse_checked(self, value: bytes) -> Example | None:
        text = decode_utf8(value)
        if self.header_pending:
            self._set_header(_split(text))
            return None
        return self._example(self._cells(text))

    def _cells(self, text: str) -> list[str]:
        """A data row's cells, or the RecordError that says why it has not the header's."""
        cells = _split(text)
        if len(cells) != len(self._names):
            if not text.strip():
                raise RecordError(EMPTY_RECORD, "empty line")
            raise RecordError(
                WRONG_COLUMN_COUNT, f"{len(cells)} columns, the header has {len(self._names)}"
            )
        return cells

    def _example(self, cells: list[str]) -> Example:
        x: dict[str, float] = {}
        y = None
        label_index, key_index = self._label_index, self._key_index
        for i, (name, cell) in enumerate(zip(self._names, cells)):
            if i == label_index:
                y = parse_label(cell)
            elif cell and i != key_index:
                x[name] = to_number(name, cell)
        return Example(x, y)

    def _set_header(self, cells: list[str]) -> None:
        names = [c.strip() for c in cells]
        if len(set(names)) != len(names):
            raise CsvHeaderError("bad_header", f"duplicate column names in {names}")
        if self.label not in names:
            raise CsvHeaderError(
                "bad_header", f"no label column {self.label!r} in the header {names} (see --label)"
            )
        if self.key is not None and self.key not in names:
            raise CsvHeaderError(
                "bad_header", f"no join key column {self.key!r} in the header {names} (see "
                "--join-key)"
            )  # fmt: skip
        self._names = names
        self._label_index = names.index(self.label)
        self._key_index = names.index(self.key) if self.key is not None else -1
        self._feature_names = [n for n in names if n not in (self.label, self.key)]
        self.header_pending = False


def _split(text: str) -> list[str]:
    if '"' not in text:
        return text.split(",")
    try:
        return next(csv.reader([text]))
    except csv.Error as e:  # e.g. a quoted cell with a line break inside
        raise RecordError(MALFORMED_CSV, str(e)) from None
