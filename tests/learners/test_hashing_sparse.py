"""FeatureHasher on sparse rows (the sparse block path) against its row-by-row reference:
``transform`` and ``commit`` per learned row give the same hashed values (to the bit) and the
same name cache (its order, collisions and merged counts), whether the block's names share
buckets, the cache overflows, or neither (the block-at-once commit)."""

from __future__ import annotations

import random
import struct
from array import array

import pytest

from stream_perceptron import native
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.learners import hashing
from stream_perceptron.learners.hashing import FeatureHasher

pytestmark = pytest.mark.skipif(native.features is None, reason="the C extension is not built")


def _block(rng: random.Random, names: list[str], n: int) -> tuple[SparseRows, bytes]:
    indptr, slots, values = array("q", [0]), array("i"), array("d")
    for _ in range(n):
        for j in rng.sample(range(len(names)), rng.randint(0, min(6, len(names)))):
            slots.append(j)
            values.append(rng.choice([rng.uniform(-3, 3), 1.0, -0.0, 1e-300]))
        indptr.append(len(slots))
    learn = bytes(rng.random() < 0.8 for _ in range(n))
    return SparseRows(indptr, slots, values), learn


def _state(hasher: FeatureHasher) -> tuple:
    return list(hasher._names.items()), hasher.collisions, hasher.merged


def _bits(row: dict) -> list:
    return [(k, struct.pack("<d", v)) for k, v in row.items()]


@pytest.mark.parametrize("bits", [1, 3, 18])
@pytest.mark.parametrize("cache", [4096, 6])
@pytest.mark.parametrize("seed", range(6))
def test_a_sparse_block_hashes_and_commits_as_the_row_loop(bits, cache, seed, monkeypatch):
    monkeypatch.setattr(hashing, "NAME_CACHE", cache)
    rng = random.Random(seed)
    block_hasher, row_hasher = FeatureHasher(bits), FeatureHasher(bits)
    vocabulary = [f"f{k}" for k in range(30)] + ["colour=red", "é"]
    for _ in range(4):  # blocks in turn, the cache carried over
        names = rng.sample(vocabulary, rng.randint(1, len(vocabulary)))
        rows, learn = _block(rng, names, rng.randint(1, 40))
        buckets, hashed, pending = block_hasher.transform_sparse(names, rows, learn)
        block_hasher.commit_sparse(pending)
        for i, (x, hashed_x) in enumerate(zip(rows.dicts(names), hashed.dicts(buckets))):
            expected, made = row_hasher.transform(x)
            assert _bits(hashed_x) == _bits(expected)
            if learn[i]:
                row_hasher.commit(made)
        assert _state(block_hasher) == _state(row_hasher)
