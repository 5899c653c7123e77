"""A block's rows as sparse (slot, value) pairs: what the sparse scanners give the learners.

CSR in three flat buffers: row ``i``'s features are ``slots[indptr[i]:indptr[i + 1]]`` with
their ``values``, in the record's own order; a slot indexes the block's feature names (the
:data:`~stream_perceptron.formats.base.DenseBatch`'s first item), each name once in a block.
A :class:`SparseRows` stands where a dense block has its matrix ``X``.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

__all__ = ["SparseRows"]


class SparseRows:
    """``n`` rows in CSR form: ``indptr`` int64 (``n + 1``), ``slots`` int32 and ``values``
    float64 (``indptr[n]`` each), as buffers (``memoryview`` or ``array``).

    Examples
    --------
    >>> indptr, slots = array("q", [0, 2, 3]), array("i", [0, 1, 1])
    >>> rows = SparseRows(indptr, slots, array("d", [1.5, 2.0, -1.0]))
    >>> len(rows), rows.dicts(["a", "b"])
    (2, [{'a': 1.5, 'b': 2.0}, {'b': -1.0}])
    >>> rows.take([1]).dicts(["a", "b"])
    [{'b': -1.0}]

    """

    __slots__ = ("indptr", "slots", "values")

    def __init__(self, indptr: Any, slots: Any, values: Any) -> None:
        self.indptr = indptr
        self.slots = slots
        self.values = values

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def take(self, rows: Sequence[int]) -> SparseRows:
        """A copy of the rows ``rows``, in that order."""
        indptr, slots, values = self.indptr, self.slots, self.values
        new_indptr = array("q", [0])
        new_slots = array("i")
        new_values = array("d")
        for i in rows:
            start, end = indptr[i], indptr[i + 1]
            new_slots.extend(slots[start:end])
            new_values.extend(values[start:end])
            new_indptr.append(len(new_slots))
        return SparseRows(new_indptr, new_slots, new_values)

    def tail(self, count: int) -> SparseRows:
        """A copy of the last ``count`` rows (all when there are fewer)."""
        n = len(self)
        return self.take(range(max(0, n - count), n))

    def dicts(self, names: Sequence[str]) -> list[dict[str, float]]:
        """Each row as the record path's feature dict."""
        indptr = self.indptr.tolist()
        slots = self.slots.tolist()
        values = self.values.tolist()
        return [
            {names[slots[k]]: values[k] for k in range(indptr[i], indptr[i + 1])}
            for i in range(len(indptr) - 1)
        ]
