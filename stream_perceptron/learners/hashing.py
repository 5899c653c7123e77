"""Feature hashing (Vowpal Wabbit's ``-b``): names to ``2**bits`` buckets by MurmurHash3.

The hash is MurmurHash3_x86_32 with seed 0 of the name's UTF-8 bytes (a name that is not a
string: of ``str(name)``), taken unsigned; the bucket is its low ``bits`` bits (VW's mask).
scikit-learn's ``FeatureHasher`` uses the same hash (``sklearn.utils.murmurhash3_32``), with
``abs()`` of the signed value modulo the size and a sign trick; here there is no sign trick:
features that collide add up.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from stream_perceptron import native
from stream_perceptron.errors import StateError
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._state import to_json_key
from stream_perceptron.state import count, json_key, keyed, short

__all__ = ["FeatureHasher", "murmur3_32", "murmur3_32_reference"]

_MASK32 = 0xFFFFFFFF

#: Names remembered per bucket for display (the most recent), and name -> bucket memo size.
NAME_CACHE = 4096
_MEMO = 1 << 16


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def murmur3_32_reference(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of ``data`` (Austin Appleby's reference), as an unsigned int.

    >>> murmur3_32_reference(b"foo")
    4138058784
    """
    c1, c2 = 0xCC9E2D51, 0x1B873593
    h = seed & _MASK32
    n = len(data)
    end = n - n % 4
    for i in range(0, end, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * c1) & _MASK32
        k = _rotl(k, 15)
        k = (k * c2) & _MASK32
        h ^= k
        h = _rotl(h, 13)
        h = (h * 5 + 0xE6546B64) & _MASK32
    k = int.from_bytes(data[end:], "little") if end < n else 0
    if end < n:
        k = (k * c1) & _MASK32
        k = _rotl(k, 15)
        k = (k * c2) & _MASK32
        h ^= k
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _MASK32
    h ^= h >> 16
    return h


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3_x86_32 of ``data``, unsigned: the C extension's, else the reference."""
    kernel = native.features
    if kernel is not None:
        return int(kernel.murmur3_32(data, seed))
    return murmur3_32_reference(data, seed)


_hash = native.features.murmur3_32 if native.features is not None else murmur3_32_reference


class FeatureHasher:
    """Feature names to buckets ``0 .. 2**bits - 1``; the values of colliding features add up.

    Keeps, for display, the most recent name of up to :data:`NAME_CACHE` buckets (the least
    recently learned bucket is forgotten first), and counts ``collisions`` (a name learned into
    a bucket whose remembered name was another one: exact while the names fit the cache, a
    lower bound beyond) and ``merged`` (features added to another of the same example).

    Examples
    --------
    >>> hasher = FeatureHasher(4)
    >>> values, names = hasher.transform({"colour=red": 1.0, "size": 2.5})
    >>> values
    {1: 1.0, 10: 2.5}
    >>> hasher.commit(names); hasher.name_of(1)
    'colour=red'

    """

    __slots__ = ("bits", "_mask", "_memo", "_names", "collisions", "merged")

    def __init__(self, bits: int) -> None:
        if not (isinstance(bits, int) and 1 <= bits <= 32):
            raise ValueError(f"hash_bits must be an int from 1 to 32, got {bits!r}")
        self.bits = bits
        self._mask = (1 << bits) - 1
        self._memo: dict[Any, int] = {}
        self._names: OrderedDict[int, Any] = OrderedDict()
        self.collisions = 0
        self.merged = 0

    def bucket(self, name: Any) -> int:
        """The bucket of the feature ``name``."""
        b = self._memo.get(name)
        if b is None:
            text = name if name.__class__ is str else str(name)
            b = _hash(text.encode("utf-8", "surrogatepass"), 0) & self._mask
            memo = self._memo
            if len(memo) >= _MEMO:
                memo.clear()
            memo[name] = b
        return b

    def transform(self, x: dict) -> tuple[dict, list[tuple[int, Any]]]:
        """``x`` with its names hashed (values of one bucket added in x's order), and the
        ``(bucket, name)`` pairs to :meth:`commit` once the example is learned (the first name
        of each bucket; more than one name in a bucket counts as merged)."""
        out: dict[int, Any] = {}
        names: list[tuple[int, Any]] = []
        memo = self._memo
        for k, v in x.items():
            b = memo.get(k)
            if b is None:
                b = self.bucket(k)
            if b in out:
                out[b] = out[b] + v
                names.append((-1, None))
            else:
                out[b] = v
                names.append((b, k))
        return out, names

    def commit(self, names: list[tuple[int, Any]], times: int = 1) -> None:
        """Remember the names of one learned example (``times``: as many identical ones)."""
        cache = self._names
        merged = 0
        for b, k in names:
            if b < 0:
                merged += 1
                continue
            old = cache.get(b, _ABSENT)
            if old is _ABSENT:
                cache[b] = k
                if len(cache) > NAME_CACHE:
                    cache.popitem(last=False)  # the least recently learned bucket
                continue
            if old != k:
                self.collisions += 1
                cache[b] = k
            cache.move_to_end(b)
        self.merged += merged * times

    def transform_block(
        self, features: Sequence[Any], X: np.ndarray
    ) -> tuple[list[int], np.ndarray, list[tuple[int, Any]]]:
        """A dense block's columns hashed: ``(buckets, X', names)``, the columns of one bucket
        added left to right (the same float operations as :meth:`transform` row by row)."""
        buckets: list[int] = []
        where: dict[int, int] = {}
        names: list[tuple[int, Any]] = []
        sources: list[list[int]] = []
        for j, k in enumerate(features):
            b = self.bucket(k)
            col = where.get(b)
            if col is None:
                where[b] = len(buckets)
                buckets.append(b)
                sources.append([j])
                names.append((b, k))
            else:
                sources[col].append(j)
                names.append((-1, None))
        if len(buckets) == len(features):
            return buckets, X, names
        out = np.empty((X.shape[0], len(buckets)), dtype=np.float64)
        for col, js in enumerate(sources):
            out[:, col] = X[:, js[0]]
            for j in js[1:]:
                out[:, col] += X[:, j]
        return buckets, out, names

    def transform_sparse(
        self, features: Sequence[Any], rows: SparseRows, learn: bytes
    ) -> tuple[list[int], SparseRows, SparseNames]:
        """Sparse rows hashed (``features``: the names their slots index): ``(buckets, rows',
        names)``, each row's values of one bucket added at the first one's place, left to
        right (the same float operations as :meth:`transform` row by row); ``names`` what
        :meth:`commit_sparse` needs once the rows whose ``learn`` byte is set are learned."""
        assert native.features is not None
        where: dict[int, int] = {}
        buckets: list[int] = []
        mapping = array("i")
        for k in features:
            b = self.bucket(k)
            slot = where.get(b)
            if slot is None:
                slot = where[b] = len(buckets)
                buckets.append(b)
            mapping.append(slot)
        n, nnz = len(rows), len(rows.slots)
        indptr, slots, values = array("q", bytes(8 * (n + 1))), array("i", bytes(4 * nnz)), array(
            "d", bytes(8 * nnz)
        )
        last = array("q", bytes(8 * len(mapping)))
        size, merged = native.features.hash_rows(
            rows.indptr, rows.slots, rows.values, mapping, len(buckets), learn, indptr, slots,
            values, last,
        )  # fmt: skip
        hashed = SparseRows(indptr, slots[:size], values[:size])
        return buckets, hashed, SparseNames(list(features), mapping, buckets, rows, learn, last,
                                            merged)  # fmt: skip

    def commit_sparse(self, names: SparseNames) -> None:
        """:meth:`commit` of each learned row of a block :meth:`transform_sparse` hashed, in
        order: at once from each name's last use when no bucket holds two of the block's names
        and the cache cannot overflow, else row by row."""
        cache = self._names
        used = [(t, j) for j, t in enumerate(names.last.tolist()) if t >= 0]
        bucket_of = [names.buckets[s] for s in names.mapping]
        touched = {bucket_of[j] for _, j in used}
        if len(touched) != len(used) or len(cache) + len(touched - cache.keys()) > NAME_CACHE:
            self._commit_rows(names, bucket_of)
            return
        used.sort()
        for _, j in used:
            b, k = bucket_of[j], names.features[j]
            old = cache.get(b, _ABSENT)
            if old is not _ABSENT and old != k:
                self.collisions += 1
            cache[b] = k
            cache.move_to_end(b)
        self.merged += names.merged

    def _commit_rows(self, names: SparseNames, bucket_of: list[int]) -> None:
        rows, learn, features = names.rows, names.learn, names.features
        indptr, slots = rows.indptr.tolist(), rows.slots.tolist()
        for i in range(len(indptr) - 1):
            if not learn[i]:
                continue
            seen: set[int] = set()
            made: list[tuple[int, Any]] = []
            for k in range(indptr[i], indptr[i + 1]):
                j = slots[k]
                b = bucket_of[j]
                if b in seen:
                    made.append((-1, None))
                else:
                    seen.add(b)
                    made.append((b, features[j]))
            self.commit(made)

    def name_of(self, bucket: int) -> Any:
        """The most recent name learned into ``bucket``, or the bucket number itself."""
        return self._names.get(bucket, bucket)

    # -- state ---------------------------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        return {
            "names": [[b, to_json_key(k)] for b, k in self._names.items()],
            "collisions": self.collisions,
            "merged": self.merged,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`get_state`; :class:`StateError` naming the field for what it
        never gives (a bucket past ``2**bits``, one twice, more names than it keeps)."""
        if not isinstance(state, dict):
            raise StateError(f"hasher is {short(state)}, not a feature hasher's state")
        names = keyed(state["names"], "hasher.names", json_key)
        if len(names) > NAME_CACHE:
            raise StateError(f"hasher.names holds {len(names)} names, more than {NAME_CACHE}")
        self._names = OrderedDict(
            (count(b, "hasher.names: a bucket", self._mask), k) for b, k in names.items()
        )
        self.collisions = count(state["collisions"], "hasher.collisions")
        self.merged = count(state["merged"], "hasher.merged")


_ABSENT = object()


class SparseNames:
    """What :meth:`FeatureHasher.commit_sparse` needs of a block
    :meth:`FeatureHasher.transform_sparse` hashed."""

    __slots__ = ("features", "mapping", "buckets", "rows", "learn", "last", "merged")

    def __init__(
        self, features: list[Any], mapping: array, buckets: list[int], rows: SparseRows,
        learn: bytes, last: array, merged: int,
    ) -> None:  # fmt: skip
        self.features = features  # the block's names
        self.mapping = mapping  # name -> its bucket's slot
        self.buckets = buckets  # slot -> bucket
        self.rows = rows  # the rows before hashing
        self.learn = learn  # a byte a row: learned
        self.last = last  # name -> the index of its last use in a learned row (-1: none)
        self.merged = merged  # features merged in learned rows
