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

import math
import os
import threading
from array import array
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from stream_perceptron import native
from stream_perceptron.formats.label_cells import LabelCells
from stream_perceptron.formats.sparse_rows import SparseRows

__all__ = [
    "parse_csv_block",
    "parse_csv_numbers",
    "parse_jsonl_block",
    "parse_sparse_jsonl_block",
    "parse_keyed_jsonl_block",
    "parse_sparse_libsvm_block",
    "parse_sparse_csv_block",
]

# The CSV scanner parse_csv_block runs; None: float() on every cell (tests set it).
scan_csv: Any = native.dense.scan_csv if native.dense is not None else None
_intern_lines: Any = native.dense.intern_lines if native.dense is not None else None
_count_lines: Any = native.dense.count_lines if native.dense is not None else None
_empty: Any = native.dense.empty if native.dense is not None else None

_SLOW_CELLS = 4096  # cells left to float() in one call, at most
_DISTINCT_CELLS = 64  # a block with more distinct label cells gives them as a list
#: A CSV block of at least this many bytes is scanned in PIECES pieces by two threads at once
#: (tests change it).
SPLIT_BYTES = 1 << 17
PIECES = 8
_CPUS: int | None = None  # CPUs this process may run on, counted at the first block
_HELPER: ThreadPoolExecutor | None = None


def parse_csv_numbers(
    values: list[bytes], ncol: int, label_col: int
) -> tuple[memoryview[float], Sequence[bytes]] | None:
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
    block: bytes, n: int | None, ncol: int, label_col: int
) -> tuple[memoryview[float], Sequence[bytes]] | None:
    """:func:`parse_csv_numbers` of the lines of one block, each ending with a newline (a line
    source's block, or lines joined): no list of lines is ever made. ``n``: how many lines the
    block holds, or ``None``: counted here (``len(X)``).

    A block of at least :data:`SPLIT_BYTES` is scanned in :data:`PIECES` pieces by two threads
    at once, this one and a helper (the scanner runs without the GIL), each taking the next
    piece when done with one, where the process may use two CPUs. The label cells come as
    :class:`~stream_perceptron.formats.label_cells.LabelCells` when the block holds at most 64
    distinct ones, else as a list.

    ``X`` is a C-contiguous 2-D ``memoryview`` of float64 (format ``"d"``, a row a line, a
    column a feature): the binary learners' block path reads it as it is, with no NumPy (whose
    import is a seventh of a million-line run, benchmarks row 4a), and ``np.asarray(X)`` is a
    NumPy view of it, no copy. A block without a feature column is left to another way (a
    ``memoryview`` has no zero in its shape).
    """
    scan = scan_csv
    if scan is None or not block or n == 0 or ncol < 2:
        return NotImplemented
    size = len(block)
    cuts = [0]
    if size >= SPLIT_BYTES and _two_cpus():
        for k in range(1, PIECES):
            cut = block.find(b"\n", max(cuts[-1], size * k // PIECES)) + 1
            if 0 < cut < size:
                cuts.append(cut)
    spans = list(zip(cuts, [*cuts[1:], size]))
    # Each span's lines (memchr: 10 ms for 1M lines), so each span scans into its own rows of X
    # and nothing is moved afterwards (moving them kept this function's own time at 34 ms of a
    # 1M-line run; 8 ms now).
    counts = [_count_lines(block, start, end) for start, end in spans]
    rows = sum(counts)
    if n is not None and rows != n:
        return None
    width = (ncol - 1) * 8  # bytes of a row of X
    X = _empty(rows * width)  # float64, written whole by the scans
    label_buf = memoryview(_empty(size))
    text = memoryview(block)
    jobs = []
    row = 0
    for (start, end), count in zip(spans, counts, strict=True):
        slow = _empty(min(_SLOW_CELLS, count * ncol) * 32)  # int64 (start, end, row, column)
        part = memoryview(X)[row * width : (row + count) * width]
        args = (text[start:end], count, ncol, label_col, part, label_buf[start:end])
        jobs.append((args, slow))
        row += count
    scanned: list[Any] = [None] * len(jobs)
    if len(jobs) == 1:
        scanned[0] = scan(*jobs[0][0], jobs[0][1])
    else:
        pending = iter(range(len(jobs)))
        taking = threading.Lock()

        def work() -> None:
            while True:
                with taking:
                    k = next(pending, None)
                if k is None:
                    return
                scanned[k] = scan(*jobs[k][0], jobs[k][1])

        helper = _helper().submit(work)
        work()
        helper.result()
    statuses = {s[0] for s in scanned}
    if 1 in statuses or 3 in statuses:  # a quote; a wrong column count
        return None
    if 2 in statuses:
        return NotImplemented
    values = memoryview(X).cast("d")
    label_parts = []
    done = 0  # rows of the spans before
    for (start, _), (_, got, n_labels, n_slow), (_, slow) in zip(spans, scanned, jobs, strict=True):
        if not _fill_slow(values, slow, n_slow, ncol - 1, block, start, done, float):
            return None
        label_parts.append(label_buf[start : start + n_labels].tobytes())
        done += got
    label_bytes = b"\n".join(label_parts)
    try:
        label_bytes.decode("utf-8")
    except UnicodeDecodeError:
        return None
    matrix = memoryview(X).cast("d", (rows, ncol - 1))
    ids = _empty(4 * rows)  # int32, a row each
    distinct = _intern_lines(label_bytes, ids, _DISTINCT_CELLS)
    if distinct is None:
        return matrix, label_bytes.split(b"\n")
    return matrix, LabelCells(distinct, memoryview(ids).cast("i"))


def _fill_slow(
    values: memoryview[float], slow: bytearray, n_slow: int, width: int, text: bytes, start: int,
    first_row: int, convert: Callable[[bytes], float],
) -> bool:  # fmt: skip
    """Write into ``values`` (a matrix of ``width`` columns, flat) the cells a scanner left to
    Python: ``slow`` holds ``n_slow`` int64 ``(start, end, row, column)``, the cell's bytes
    ``text[start + start_k : start + end_k]`` and its row counted from ``first_row``. False
    when ``convert`` refuses a cell or makes it infinite or nan (a plain cell is finite)."""
    cells = memoryview(slow).cast("q")[: 4 * n_slow].tolist()
    for k in range(0, len(cells), 4):
        s, e, row, col = cells[k : k + 4]
        try:
            value = convert(text[start + s : start + e])
        except (ValueError, OverflowError):
            return False
        if not math.isfinite(value):
            return False
        values[(first_row + row) * width + col] = value
    return True


def _json_number(text: bytes) -> float:
    """A JSON number as :class:`~stream_perceptron.formats.JsonLinesParser` reads it: an
    integer is a Python int first."""
    return float(text) if b"." in text or b"e" in text or b"E" in text else float(int(text))


def _two_cpus() -> bool:
    global _CPUS
    if _CPUS is None:
        try:
            _CPUS = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not on Linux
            _CPUS = os.cpu_count() or 1
    return _CPUS >= 2


def _helper() -> ThreadPoolExecutor:
    """The thread that scans second halves, started at the first block that has one."""
    global _HELPER
    if _HELPER is None:
        _HELPER = ThreadPoolExecutor(1, thread_name_prefix="csv-scan")
    return _HELPER


def parse_jsonl_block(
    block: bytes, n: int, keys: list[bytes], label_index: int
) -> tuple[memoryview[float], list[bytes]] | None:
    """``n`` flat JSON objects, one a line (each line ending with a newline), with exactly the
    keys ``keys`` (UTF-8, no escapes) in that order, the label at ``label_index`` and numbers or
    booleans everywhere else: ``(X, raw label values)``, ``X`` holding what
    :class:`~stream_perceptron.formats.JsonLinesParser` makes of each value (``float(int)``
    for an integer, ``float`` for a number with a fraction or exponent, 1.0/0.0 for
    true/false), a 2-D float64 ``memoryview`` as :func:`parse_csv_block` gives. ``None`` when
    a line is of another form, or without the C extension (or without a feature key)."""
    c = native.dense
    if c is None or not n or len(keys) < 2:
        return None
    width = len(keys) - 1
    X = c.empty(n * width * 8)  # float64, written whole by the scan
    label_buf = c.empty(len(block))
    slow = c.empty(min(_SLOW_CELLS, n * len(keys)) * 32)  # int64 (start, end, row, column)
    status, n_labels, n_slow = c.scan_jsonl(block, n, keys, label_index, X, label_buf, slow)
    if status != 0:
        return None
    if not _fill_slow(memoryview(X).cast("d"), slow, n_slow, width, block, 0, 0, _json_number):
        return None
    labels = memoryview(label_buf)[:n_labels].tobytes().split(b"\n")
    return memoryview(X).cast("d", (n, width)), labels


def parse_sparse_libsvm_block(
    block: bytes, n: int
) -> tuple[list[str], SparseRows, Sequence[bytes]] | None:
    """``n`` libsvm lines (each ending with a newline) as sparse rows, as
    :func:`parse_sparse_jsonl_block` gives JSON lines: the features
    :class:`~stream_perceptron.formats.LibsvmParser` gives each line, in its order, with the
    same floats; the label cells the first tokens without ``:`` (empty when a line has none).
    ``None`` when a line is of another form."""
    return parse_sparse_jsonl_block(block, n, None)


def parse_sparse_jsonl_block(
    block: bytes, n: int, label: str | None
) -> tuple[list[str], SparseRows, Sequence[bytes]] | None:
    """``n`` JSON objects, one a line (each line ending with a newline), of any key set and
    order, flat or in the nested ``{"x": {...}, "y": label}`` form, as sparse rows:
    ``(feature names, rows, raw label values)``, the features of each row those
    :class:`~stream_perceptron.formats.JsonLinesParser` gives it, in the same order, with the
    same floats (strings as ``name=value`` at 1.0, booleans 1.0/0.0, null left out); a row
    without a label has the label text ``null``; the label values come as
    :class:`~stream_perceptron.formats.label_cells.LabelCells` when the block holds at most 64
    distinct ones (no bytes object, hash or look-up a row), else as a list. ``None`` when a
    line is of another form (the record path then gives each its reason), or without the C
    extension. ``label`` None: the lines are libsvm (:func:`parse_sparse_libsvm_block`)."""
    scanned = _parse_sparse(block, n, label, None)
    if scanned is None:
        return None
    names, rows, labels, _ = scanned
    return names, rows, _label_cells(labels, n)


def parse_keyed_jsonl_block(
    block: bytes, n: int, label: str, key: str
) -> tuple[list[str], SparseRows, list[bytes], list[str | None]] | None:
    """:func:`parse_sparse_jsonl_block` of lines joined by ``key`` (``--join-key``): a string
    value of the member ``key`` is not a feature but the line's key, the fourth item (``None``:
    no such string, or an empty one); another value of it stays a feature (a number, a
    boolean: the caller decides). ``None`` also when a key's string holds an escape."""
    scanned = _parse_sparse(block, n, label, key)
    if scanned is None:
        return None
    names, rows, labels, keys = scanned
    assert keys is not None
    return names, rows, labels.split(b"\n"), keys


def _parse_sparse(
    block: bytes, n: int, label: str | None, join_key: str | None
) -> tuple[list[str], SparseRows, bytes, list[str | None] | None] | None:
    """The two above's work: ``(names, rows, label values joined by newlines, keys)``."""
    c = native.dense
    if c is None or not n:
        return None
    if not block.isascii():
        try:  # the record path refuses a line that is not UTF-8 anywhere, in a null's key too
            block.decode("utf-8")
        except UnicodeDecodeError:
            return None
    key = None if label is None else label.encode("utf-8")
    by = None if join_key is None else join_key.encode("utf-8")
    size = len(block)
    cut = block.find(b"\n", size // 2) + 1 if size >= SPLIT_BYTES and _two_cpus() else 0
    if not 0 < cut < size:
        part = _sparse_part(block, 0, size, n, key, by)
        if part is None:
            return None
        return part
    # two halves at once, this thread and the helper (the scanner runs without the GIL), each
    # with slots of its own, into one set of buffers (the second half's rows after room for the
    # first's); then the second half's slots renumbered as the block's and moved down after the
    # first's, its row starts shifted (in C: a row at a time in Python was 5 % of 15a's time)
    first_n = _count_lines(block, 0, cut)
    more_n = n - first_n
    cap = cut // 4 + first_n  # the first half's room (as _sparse_part's)
    more_cap = (size - cut) // 4 + more_n
    ip = memoryview(c.empty(8 * (n + 2)))  # the first half's n1 + 1 starts, the second's n2 + 1
    sv = memoryview(c.empty(4 * (cap + more_cap)))
    vv = memoryview(c.empty(8 * (cap + more_cap)))
    at = 8 * (first_n + 1)
    more_out = (ip[at:], sv[4 * cap :], vv[8 * cap :])
    second = _helper().submit(_sparse_part, block, cut, size, more_n, key, by, more_out)
    first = _sparse_part(block, 0, cut, first_n, key, by, (ip[:at], sv[: 4 * cap], vv[: 8 * cap]))
    rest = second.result()
    if first is None or rest is None:
        return None
    names, rows, labels, keys = first
    more_names, more_rows, more_labels, more_keys = rest
    index = {name: j for j, name in enumerate(names)}
    mapping = array("i")
    for name in more_names:
        j = index.get(name)
        if j is None:
            j = index[name] = len(names)
            names.append(name)
        mapping.append(j)
    nnz, more_nnz = rows.indptr[-1], len(more_rows.slots)
    total = nnz + more_nnz
    c.remap_slots(sv[4 * cap : 4 * (cap + more_nnz)], mapping)
    sv[4 * nnz : 4 * total] = sv[4 * cap : 4 * (cap + more_nnz)]  # memmove
    vv[8 * nnz : 8 * total] = vv[8 * cap : 8 * (cap + more_nnz)]
    c.shift_indptr(ip[at : at + 8 * more_n], ip[at + 8 : at + 8 * (more_n + 1)], nnz)
    joined = SparseRows(
        ip[: 8 * (n + 1)].cast("q"), sv[: 4 * total].cast("i"), vv[: 8 * total].cast("d")
    )
    if keys is not None and more_keys is not None:
        keys += more_keys
    return names, joined, labels + b"\n" + more_labels, keys


def _label_cells(joined: bytes, n: int) -> Sequence[bytes]:
    """The ``n`` label values joined by newlines, as :class:`LabelCells` when they are few
    distinct ones (each at most 64 bytes), else as a list."""
    ids = _empty(4 * n)  # int32, a row each
    distinct = _intern_lines(joined, ids, _DISTINCT_CELLS)
    if distinct is None:
        return joined.split(b"\n")
    return LabelCells(distinct, memoryview(ids).cast("i"))


def _sparse_part(
    block: bytes, start: int, end: int, n: int, label: bytes | None, join_key: bytes | None,
    out: tuple[memoryview, memoryview, memoryview] | None = None,
) -> tuple[list[str], SparseRows, bytes, list[str | None] | None] | None:  # fmt: skip
    """The lines of ``block[start:end]`` (``n`` of them) as sparse rows with slots of their own:
    ``(names, rows, label cells joined by newlines, keys)``, or ``None`` (see
    :func:`parse_sparse_jsonl_block`; keys: :func:`parse_keyed_jsonl_block`'s, with
    ``join_key``). ``out``: the row starts', slots' and values' buffers to scan into (bytes:
    ``8 * (n + 1)``, ``4 * cap`` and ``8 * cap``, ``cap`` as below), else new ones."""
    c = native.dense
    assert c is not None  # the caller checked
    text = memoryview(block)[start:end]
    size = end - start
    cap = size // 4 + n
    if out is None:
        indptr, slots, values = c.empty(8 * (n + 1)), c.empty(4 * cap), c.empty(8 * cap)
    else:
        indptr, slots, values = out
    label_buf = c.empty(size + 4 * n)
    slow = c.empty(min(_SLOW_CELLS, cap) * 32)
    keys = None
    if join_key is None:
        status, nnz, n_labels, n_slow, names = c.scan_sparse(
            text, n, label, indptr, slots, values, label_buf, slow
        )
    else:
        status, nnz, n_labels, n_slow, names, keys = c.scan_sparse(
            text, n, label, indptr, slots, values, label_buf, slow, join_key, c.empty(16 * n)
        )
    if status != 0 or len(set(names)) != len(names):  # "a=b" as a key and as a string
        return None
    value_view = memoryview(values).cast("d")[:nnz]
    convert = _json_number if label is not None else float
    if n_slow and not _fill_slow_items(value_view, slow, n_slow, block, convert, start):
        return None
    rows = SparseRows(memoryview(indptr).cast("q"), memoryview(slots).cast("i")[:nnz], value_view)
    return names, rows, memoryview(label_buf)[:n_labels].tobytes(), keys


def _fill_slow_items(
    values: memoryview[float], slow: bytearray, n_slow: int, text: bytes,
    convert: Callable[[bytes], float], offset: int = 0,
) -> bool:  # fmt: skip
    """The numbers a sparse scan left to Python (``slow``: int64 ``(start, end, item, 0)``,
    ``start`` and ``end`` counted from ``text[offset]``) into ``values``; False when one is not
    a finite float (the record path refuses it)."""
    cells = memoryview(slow).cast("q")[: 4 * n_slow].tolist()
    for k in range(0, len(cells), 4):
        s, e, item = cells[k : k + 3]
        try:
            value = convert(text[offset + s : offset + e])
        except (ValueError, OverflowError):
            return False
        if not math.isfinite(value):
            return False
        values[item] = value
    return True


def parse_sparse_csv_block(
    block: bytes, n: int, ncol: int, label_col: int
) -> tuple[SparseRows, Sequence[bytes]] | None:
    """``n`` CSV lines of ``ncol`` cells (each ending with a newline), the label in column
    ``label_col``, some cells empty, as sparse rows: ``(rows, label cells)``, a row's slots its
    feature columns (the label's left out) that are not empty, with ``float()``'s values, as
    :class:`~stream_perceptron.formats.CsvParser` reads them (an empty cell is a missing
    feature). ``None`` when a line is of another form (a quote, another cell count, a cell
    ``float()`` refuses or reads as inf or nan), or without the C extension."""
    c = native.dense
    if c is None or not n or ncol < 2:
        return None
    cap = n * (ncol - 1)
    indptr = c.empty(8 * (n + 1))
    slots = c.empty(4 * cap)
    values = c.empty(8 * cap)
    label_buf = c.empty(len(block))
    slow = c.empty(min(_SLOW_CELLS, cap) * 32)
    status, nnz, n_labels, n_slow = c.scan_sparse_csv(
        block, n, ncol, label_col, indptr, slots, values, label_buf, slow
    )
    if status != 0:
        return None
    value_view = memoryview(values).cast("d")[:nnz]
    if n_slow and not _fill_slow_items(value_view, slow, n_slow, block, float):
        return None
    labels = memoryview(label_buf)[:n_labels].tobytes()
    try:
        labels.decode("utf-8")
    except UnicodeDecodeError:
        return None
    rows = SparseRows(
        memoryview(indptr).cast("q"), memoryview(slots).cast("i")[:nnz], value_view
    )
    return rows, labels.split(b"\n")
