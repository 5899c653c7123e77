"""The C block scanners: a block of CSV or flat JSON lines as one float64 matrix.

:func:`parse_csv_block` is behind ``CsvParser.parse_dense_block``, :func:`parse_jsonl_block`
behind ``JsonLinesParser.parse_dense_block`` (:mod:`stream_perceptron.formats`).
The CSV scanner converts a plain decimal cell exactly (Clinger's fast path, else Eisel-Lemire,
both correctly rounded, as Go's ``strconv``) and leaves every other cell (underscores, inf,
nan, more than 19 digits, a subnormal or overflowing result, a halfway case) to ``float()``,
which decides: the reference is ``float()`` on every cell, and the values are the same bit for
bit (``tests/fast/test_fast_parse_dense.py``). Without the C extension, ``CsvParser`` calls
``float()`` on every cell itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stream_perceptron import native

__all__ = ["parse_csv_block", "parse_csv_numbers", "parse_jsonl_block"]

# The CSV scanner parse_csv_block runs; None: float() on every cell (tests set it).
scan_csv: Any = native.dense.scan_csv if native.dense is not None else None

_SLOW_CELLS = 4096  # cells left to float() in one call, at most


def parse_csv_numbers(
    values: list[bytes], ncol: int, label_col: int
) -> tuple[np.ndarray, list[bytes]] | None:
    """The work of :meth:`CsvParser.parse_dense`, with the C scanner.

    ``values``: CSV lines of ``ncol`` cells, the label in column ``label_col``. Returns
    ``(X, label cells)`` with ``float()``'s value for every feature cell; ``None`` when a line
    is not plain (a quote, a wrong column count, a cell that float() refuses or reads as inf
    or nan, a label cell that is not UTF-8); ``NotImplemented`` when this scanner cannot help
    (no C extension, no line, a line holding a newline, too many cells that need float()):
    parse another way.
    """
    n = len(values)
    if scan_csv is None or not n:
        return NotImplemented
    block = b"\n".join(values) + b"\n"
    if block.count(b"\n") != n:  # a line holds a newline: let another way say
        return NotImplemented
    return parse_csv_block(block, n, ncol, label_col)


def parse_csv_block(
    block: bytes, n: int, ncol: int, label_col: int
) -> tuple[np.ndarray, list[bytes]] | None:
    """:func:`parse_csv_numbers` of ``n`` lines given as one block, each line ending with a
    newline (a line source's block, or lines joined): no list of lines is ever made."""
    scan = scan_csv
    if scan is None or not n:
        return NotImplemented
    buf = np.frombuffer(block, dtype=np.uint8)
    X = np.empty((n, ncol - 1), dtype=np.float64)
    label_buf = np.empty(len(block), dtype=np.uint8)
    slow = np.empty((min(_SLOW_CELLS, n * ncol), 4), dtype=np.int64)
    status, n_labels, n_slow = scan(buf, n, ncol, label_col, X, label_buf, slow)
    if status == 1 or status == 3:  # a quote; a wrong column count
        return None
    if status == 2:
        return NotImplemented
    for start, end, row, col in slow[:n_slow].tolist():
        try:
            X[row, col] = float(block[start:end])
        except ValueError:
            return None
    if n_slow and not np.isfinite(X).all():  # the plain form is always finite
        return None
    label_bytes = label_buf[:n_labels].tobytes()
    try:
        label_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return X, label_bytes.split(b"\n")


def parse_jsonl_block(
    block: bytes, n: int, keys: list[bytes], label_index: int
) -> tuple[np.ndarray, list[bytes]] | None:
    """``n`` flat JSON objects, one a line (each line ending with a newline), with exactly the
    keys ``keys`` (UTF-8, no escapes) in that order, the label at ``label_index`` and numbers or
    booleans everywhere else: ``(X, raw label values)``, ``X`` holding what
    :class:`~stream_perceptron.formats.JsonLinesParser` makes of each value (``float(int)``
    for an integer, ``float`` for a number with a fraction or exponent, 1.0/0.0 for
    true/false). ``None`` when a line is of another form, or without the C extension."""
    c = native.dense
    if c is None or not n:
        return None
    buf = np.frombuffer(block, dtype=np.uint8)
    X = np.empty((n, len(keys) - 1), dtype=np.float64)
    label_buf = np.empty(len(block), dtype=np.uint8)
    slow = np.empty((min(_SLOW_CELLS, n * len(keys)), 4), dtype=np.int64)
    status, n_labels, n_slow = c.scan_jsonl(buf, n, keys, label_index, X, label_buf, slow)
    if status != 0:
        return None
    for start, end, row, col in slow[:n_slow].tolist():
        text = block[start:end]
        try:  # a JSON integer is a Python int first
            X[row, col] = float(text) if b"." in text or b"e" in text or b"E" in text else float(
                int(text)
            )
        except (ValueError, OverflowError):
            return None
    if n_slow and not np.isfinite(X).all():
        return None
    return X, label_buf[:n_labels].tobytes().split(b"\n")
