"""Property tests: LineSource agrees with a naive splitter for any chunking."""

from __future__ import annotations

import io

from connectors_testutil import PieceStream, collect
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors import LINE_TOO_LONG, LineSource
from connectors.line_block import LineBlock

BOM = b"\xef\xbb\xbf"

# Fragments chosen to hit every special case: terminators, lone \r, BOM bytes.
fragments = st.sampled_from([b"a", b"bc", b"\r", b"\n", b"\r\n", b"\r\r\n", BOM, b"\xef", b"\xbb"])
streams = st.builds(
    lambda bom, parts: (BOM if bom else b"") + b"".join(parts),
    st.booleans(),
    st.lists(fragments, max_size=40),
)


def reference(data: bytes, limit: int) -> list[tuple[int, bytes, str | None]]:
    """Obviously-correct (and slow) version of the LineSource rules."""
    if data.startswith(BOM):
        data = data[len(BOM) :]
    if not data:
        return []
    lines = data.split(b"\n")
    if lines[-1] == b"":  # the input ended with a terminator
        lines.pop()
    out: list[tuple[int, bytes, str | None]] = []
    for offset, line in enumerate(lines):
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line) > limit:
            out.append((offset, line[:limit], LINE_TOO_LONG))
        else:
            out.append((offset, line, None))
    return out


@settings(max_examples=400, deadline=None)
@given(
    data=streams,
    chunk_size=st.integers(1, 7),
    limit=st.one_of(st.integers(1, 6), st.just(1 << 20)),
    batch_size=st.integers(1, 5),
)
def test_any_chunk_size_matches_reference(
    data: bytes, chunk_size: int, limit: int, batch_size: int
) -> None:
    source = LineSource(
        io.BytesIO(data), chunk_size=chunk_size, max_line_bytes=limit, batch_size=batch_size
    )
    with source:
        batches = list(source.batches())
    assert all(0 < len(batch) <= batch_size for batch in batches)
    got = [(r.position.offset, r.value, r.error) for batch in batches for r in batch]
    assert got == reference(data, limit)


@settings(max_examples=400, deadline=None)
@given(
    data=streams,
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=10),
    chunk_size=st.integers(1, 64),
    limit=st.one_of(st.integers(1, 6), st.just(1 << 20)),
)
def test_short_reads_match_reference(
    data: bytes, sizes: list[int], chunk_size: int, limit: int
) -> None:
    # Reads return fewer bytes than asked for, as pipes do.
    with LineSource(PieceStream(data, sizes), chunk_size=chunk_size, max_line_bytes=limit) as src:
        assert collect(src) == reference(data, limit)


@settings(max_examples=200, deadline=None)
@given(data=streams, chunk_size=st.integers(1, 7))
def test_final_newline_does_not_change_records(data: bytes, chunk_size: int) -> None:
    def run(payload: bytes) -> list[tuple[int, bytes, str | None]]:
        with LineSource(io.BytesIO(payload), chunk_size=chunk_size) as source:
            return collect(source)

    if data.endswith(b"\n") or data in (b"", BOM):
        return
    assert run(data) == run(data + b"\n")


def flatten_blocks(source: LineSource) -> list[tuple[int, bytes, str | None]]:
    """The lines of ``source.blocks()``, blocks checked and expanded into records."""
    out = []
    for unit in source.blocks():
        if isinstance(unit, LineBlock):
            assert unit.count > 0 and unit.data.endswith(b"\n")
            assert unit.data.count(b"\n") == unit.count
            assert max(map(len, unit.data[:-1].split(b"\n"))) <= source.max_line_bytes
            records = unit.records()
            assert [r.position.offset for r in records] == list(range(unit.start, unit.end))
        else:
            records = unit
        assert out == [] or records[0].position.offset == out[-1][0] + 1
        out += [(r.position.offset, r.value, r.error) for r in records]
    return out


@settings(max_examples=600, deadline=None)
@given(
    data=streams,
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=10),
    chunk_size=st.integers(1, 64),
    limit=st.one_of(st.integers(1, 6), st.just(1 << 20)),
)
def test_blocks_match_reference(data: bytes, sizes: list[int], chunk_size: int, limit: int) -> None:
    # The same lines, values, offsets and errors as batches(), for any chunking and limit.
    with LineSource(PieceStream(data, sizes), chunk_size=chunk_size, max_line_bytes=limit) as src:
        assert flatten_blocks(src) == reference(data, limit)


def test_blocks_hold_whole_reads() -> None:
    data = b"".join(b"%d,%d\n" % (i, -i) for i in range(10000))
    with LineSource(io.BytesIO(data), chunk_size=1 << 16) as src:
        units = list(src.blocks())
    assert all(isinstance(u, LineBlock) for u in units)
    assert 2 <= len(units) <= len(data) // (1 << 15)
    assert b"".join(u.data for u in units) == data
