"""The window of the last labelled examples, which the live margin metrics read."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import repeat
from typing import Any

from stream_perceptron.formats.base import LabelCache
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np

__all__ = ["RecentWindow"]


class RecentWindow:
    """The last ``size`` labelled examples, oldest first.

    The per-record path adds ``(x, y)`` pairs; the block path defers whole blocks (feature
    names, a copy of the block's last rows, their raw label cells) without building dicts or
    parsing labels, and a reader (a metrics scrape) turns them into ``((names, row), y)`` pairs
    when it asks for :meth:`examples`.

    Examples
    --------
    >>> import numpy as np
    >>> window = RecentWindow(3, LabelCache())
    >>> window.add({"a": 1.0}, 1)
    >>> window.defer(["a"], np.array([[2.0], [3.0]]), [b"0", b"1"])
    >>> [(x if isinstance(x, dict) else x[1].tolist(), y) for x, y in window.examples()]
    [({'a': 1.0}, 1), ([2.0], 0), ([3.0], 1)]

    """

    def __init__(self, size: int, labels: LabelCache | None = None) -> None:
        self.size = size
        self._labels = labels  # parses deferred label cells (the dense parser's own cache)
        self._examples: deque[tuple[Any, Any]] = deque(maxlen=size)
        # Blocks not yet added: (names, rows, label cells); never more rows than the window.
        self._pending: deque[tuple[list[str], Any, Sequence[bytes]]] = deque()
        self._pending_rows = 0

    def add(self, x: Any, y: Any) -> None:
        """One labelled example of the per-record path."""
        if self._pending:
            self._flush()
        self._examples.append((x, y))

    def defer(self, names: list[str], rows: Any, cells: Sequence[bytes]) -> None:
        """A block's labelled rows (values and raw label cells), kept until read."""
        size = self.size
        # A copy of the last rows only: the block's whole matrix is freed at once, so the next
        # block reuses its memory instead of faulting in fresh pages (measured: 9% of a run).
        if isinstance(rows, SparseRows):
            rows = rows.tail(size)
        elif isinstance(rows, memoryview):  # the C scanner's matrix (its path needs no NumPy)
            last = rows[-size:]
            rows = memoryview(last.tobytes()).cast("d", last.shape or ())
        else:
            rows = rows[-size:].copy()
        cells = cells[-size:]
        self._pending.append((names, rows, cells))
        self._pending_rows += len(cells)
        while self._pending_rows - len(self._pending[0][2]) >= size:
            self._pending_rows -= len(self._pending.popleft()[2])

    def examples(self) -> list[tuple[Any, Any]]:
        """The window's examples, oldest first."""
        if self._pending:
            self._flush()
        return list(self._examples)

    def _flush(self) -> None:
        labels = self._labels
        assert labels is not None, "only a dense parser's blocks are deferred"
        recent = self._examples
        size = self.size
        while self._pending:
            names, rows, cells = self._pending.popleft()
            start = max(0, len(cells) - size)
            if isinstance(rows, SparseRows):  # the readers take a sparse row as its dict
                xs: Any = rows.tail(len(cells) - start).dicts(names)
            else:
                xs = zip(repeat(names), np.asarray(rows)[start:])  # the readers take NumPy rows
            recent.extend(zip(xs, map(labels.__getitem__, cells[start:])))
        self._pending_rows = 0
