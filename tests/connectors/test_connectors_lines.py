from __future__ import annotations

import io
import tracemalloc
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from connectors_testutil import PieceStream, collect, values

from connectors import (
    LINE_TOO_LONG,
    ConnectorError,
    LineSource,
    Position,
    Source,
    open_line_source,
)
from connectors import open_lines as lines_module

BOM = b"\xef\xbb\xbf"


# --- splitting -------------------------------------------------------------


def test_lf_lines() -> None:
    assert values(b"a\nbb\nccc\n") == [b"a", b"bb", b"ccc"]


def test_crlf_is_stripped() -> None:
    assert values(b"a,b\r\n1,2\r\n") == [b"a,b", b"1,2"]


def test_mixed_line_endings() -> None:
    assert values(b"a\r\nb\nc\r\n") == [b"a", b"b", b"c"]


def test_only_one_cr_before_lf_is_stripped() -> None:
    assert values(b"a\r\r\nb\n") == [b"a\r", b"b"]


def test_lone_cr_inside_line_is_kept() -> None:
    assert values(b"a\rb\n") == [b"a\rb"]


def test_missing_final_newline() -> None:
    assert values(b"a\nlast") == [b"a", b"last"]


def test_missing_final_newline_after_crlf_lines() -> None:
    assert values(b"a\r\nlast") == [b"a", b"last"]


def test_trailing_cr_at_end_of_input_is_stripped() -> None:
    assert values(b"a\r\nb\r") == [b"a", b"b"]


def test_empty_input_yields_no_batches() -> None:
    with LineSource(io.BytesIO(b"")) as source:
        assert list(source.batches()) == []


def test_bom_only_input_yields_no_batches() -> None:
    with LineSource(io.BytesIO(BOM)) as source:
        assert list(source.batches()) == []


def test_empty_lines_are_kept() -> None:
    assert values(b"\na\n\n\nb\n\n") == [b"", b"a", b"", b"", b"b", b""]


def test_single_newline_is_one_empty_record() -> None:
    assert values(b"\n") == [b""]


def test_crlf_empty_lines_are_kept() -> None:
    assert values(b"\r\n\r\nx\r\n") == [b"", b"", b"x"]


def test_bom_is_stripped_from_first_line() -> None:
    assert values(BOM + b"a,b\n1,2\n") == [b"a,b", b"1,2"]


def test_bom_split_over_reads_is_stripped() -> None:
    stream = PieceStream(BOM + b"h\nx\n", [1])
    with LineSource(stream, chunk_size=64) as source:
        assert [v for _, v, _ in collect(source)] == [b"h", b"x"]


def test_bom_is_stripped_with_chunk_size_one() -> None:
    assert values(BOM + b"h\n", chunk_size=1) == [b"h"]


def test_bom_later_in_stream_is_kept() -> None:
    assert values(b"a\n" + BOM + b"b\n") == [b"a", BOM + b"b"]


def test_partial_bom_is_data() -> None:
    assert values(b"\xef\xbbz\n") == [b"\xef\xbbz"]


def test_non_utf8_bytes_pass_through() -> None:
    assert values(b"\xff\xfe\x00\n") == [b"\xff\xfe\x00"]


def test_lines_split_across_tiny_chunks() -> None:
    data = b"alpha\r\nbeta\n\ngamma\r\n"
    for size in range(1, 10):
        assert values(data, chunk_size=size) == [b"alpha", b"beta", b"", b"gamma"], size


def test_crlf_split_between_reads_is_stripped() -> None:
    stream = PieceStream(b"ab\r\ncd\r\n", [3, 1, 3, 1])
    with LineSource(stream, chunk_size=64) as source:
        assert [v for _, v, _ in collect(source)] == [b"ab", b"cd"]


def test_cr_before_crlf_split_between_reads_is_kept() -> None:
    # "ab\r" | "\r\n": the first \r belongs to the line.
    stream = PieceStream(b"ab\r\r\ncd\n", [3, 8])
    with LineSource(stream, chunk_size=64) as source:
        assert [v for _, v, _ in collect(source)] == [b"ab\r", b"cd"]


# --- offsets and batches -----------------------------------------------------


def test_offsets_are_line_numbers_counting_every_line() -> None:
    data = BOM + b"header\r\n\nrow1\n" + b"x" * 10 + b"\nrow3"
    with LineSource(io.BytesIO(data), chunk_size=4, max_line_bytes=6) as source:
        got = collect(source)
    assert got == [
        (0, b"header", None),
        (1, b"", None),
        (2, b"row1", None),
        (3, b"xxxxxx", LINE_TOO_LONG),
        (4, b"row3", None),
    ]


def test_positions_carry_source_name() -> None:
    with LineSource(io.BytesIO(b"a\nb\n"), name="in.csv") as source:
        positions = [r.position for batch in source.batches() for r in batch]
    assert positions == [Position("in.csv", 0), Position("in.csv", 1)]
    assert str(positions[1]) == "in.csv@1"


def test_batches_respect_batch_size_and_order() -> None:
    data = b"".join(b"%d\n" % i for i in range(1000))
    with LineSource(io.BytesIO(data), batch_size=64) as source:
        batches = list(source.batches())
    assert max(len(b) for b in batches) == 64
    assert [r.value for b in batches for r in b] == [b"%d" % i for i in range(1000)]
    assert [r.position.offset for b in batches for r in b] == list(range(1000))


def test_one_read_gives_one_batch() -> None:
    stream = PieceStream(b"a\nb\nc\nd\n", [4, 4])
    with LineSource(stream, chunk_size=1 << 20) as source:
        sizes = [len(b) for b in source.batches()]
    assert sizes == [2, 2]


def test_read1_is_preferred_over_read() -> None:
    class Recorder(io.BytesIO):
        def __init__(self, data: bytes) -> None:
            super().__init__(data)
            self.calls: list[str] = []

        def read(self, size: int | None = -1) -> bytes:
            self.calls.append("read")
            return super().read(size)

        def read1(self, size: int = -1) -> bytes:
            self.calls.append("read1")
            return super().read1(size)

    stream = Recorder(b"a\nb\n")
    with LineSource(stream) as source:
        collect(source)
    assert stream.calls and set(stream.calls) == {"read1"}


def test_falls_back_to_read_when_read1_unsupported() -> None:
    class OnlyRead(io.BufferedIOBase):
        def __init__(self, data: bytes) -> None:
            self._inner = io.BytesIO(data)

        def readable(self) -> bool:
            return True

        def read(self, size: int | None = -1) -> bytes:
            return self._inner.read(size)

    assert values_of(OnlyRead(b"a\nb")) == [b"a", b"b"]


def values_of(stream: io.IOBase) -> list[bytes]:
    with LineSource(stream, chunk_size=1) as source:  # type: ignore[arg-type]
        return [v for _, v, _ in collect(source)]


def test_bytearray_reads_are_accepted() -> None:
    class ByteArrayReads(io.RawIOBase):
        def __init__(self) -> None:
            self._done = False

        def read(self, size: int = -1) -> bytearray:  # type: ignore[override]
            if self._done:
                return bytearray()
            self._done = True
            return bytearray(b"x\ny\n")

    assert values_of(ByteArrayReads()) == [b"x", b"y"]


# --- long lines --------------------------------------------------------------


def test_long_line_is_truncated_and_flagged() -> None:
    data = b"ok\n" + b"y" * 100 + b"\nnext\n"
    with LineSource(io.BytesIO(data), chunk_size=7, max_line_bytes=10) as source:
        got = collect(source)
    assert got == [(0, b"ok", None), (1, b"y" * 10, LINE_TOO_LONG), (2, b"next", None)]


def test_long_line_inside_one_big_chunk() -> None:
    data = b"a\n" + b"0123456789" + b"\nb\n"
    with LineSource(io.BytesIO(data), chunk_size=1 << 20, max_line_bytes=5) as source:
        got = collect(source)
    assert got == [(0, b"a", None), (1, b"01234", LINE_TOO_LONG), (2, b"b", None)]


def test_long_last_line_without_newline() -> None:
    with LineSource(io.BytesIO(b"a\n" + b"z" * 50), chunk_size=3, max_line_bytes=4) as source:
        assert collect(source) == [(0, b"a", None), (1, b"zzzz", LINE_TOO_LONG)]


def test_line_of_exactly_the_limit_is_accepted() -> None:
    for size in (1, 3, 4, 5, 64):
        got = values(b"abcd\r\nabcd\nabcd", chunk_size=size, max_line_bytes=4)
        assert got == [b"abcd", b"abcd", b"abcd"], size


def test_line_one_over_the_limit_is_rejected() -> None:
    for size in (1, 3, 4, 5, 64):
        with LineSource(io.BytesIO(b"abcde\r\nok\n"), chunk_size=size, max_line_bytes=4) as src:
            got = collect(src)
        assert got == [(0, b"abcd", LINE_TOO_LONG), (1, b"ok", None)], size


def test_long_line_with_crlf_terminator_followed_by_lines() -> None:
    data = b"x" * 30 + b"\r\n\r\nlast\r\n"
    with LineSource(io.BytesIO(data), chunk_size=4, max_line_bytes=8) as source:
        got = collect(source)
    assert got == [(0, b"x" * 8, LINE_TOO_LONG), (1, b"", None), (2, b"last", None)]


class LongLineStream(io.RawIOBase):
    """Raw stream yielding ``head``, ``n`` filler bytes, then ``rest``.

    The long line is produced block by block and never exists as a whole.
    """

    def __init__(self, head: bytes, n: int, rest: bytes) -> None:
        self._parts: Iterator[memoryview] = self._generate(head, n, rest)
        self._current = memoryview(b"")

    @staticmethod
    def _generate(head: bytes, n: int, rest: bytes) -> Iterator[memoryview]:
        yield memoryview(head)
        block = memoryview(b"x" * (1 << 16))
        while n > 0:
            yield block[: min(n, len(block))]
            n -= len(block)
        yield memoryview(rest)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._current:
            nxt = next(self._parts, None)
            if nxt is None:
                return 0
            self._current = nxt
        n = min(len(buffer), len(self._current))
        buffer[:n] = self._current[:n]
        self._current = self._current[n:]
        return n


@pytest.mark.parametrize("buffered", [False, True], ids=["raw-read", "buffered-read1"])
def test_fifty_megabyte_line_keeps_memory_bounded(buffered: bool) -> None:
    size = 50 * (1 << 20)
    limit = 1 << 20
    raw = LongLineStream(b"first\n", size, b"\r\nlast\n")
    stream: io.IOBase = io.BufferedReader(raw) if buffered else raw
    got: list[tuple[int, int, bytes, str | None]] = []
    tracemalloc.start()
    try:
        with LineSource(stream, max_line_bytes=limit) as source:  # type: ignore[arg-type]
            for batch in source.batches():
                got.extend((r.position.offset, len(r.value), r.value[:5], r.error) for r in batch)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        stream.close()
    assert got == [
        (0, 5, b"first", None),
        (1, limit, b"xxxxx", LINE_TOO_LONG),
        (2, 4, b"last", None),
    ]
    # chunk (1 MiB) + pending line (<= limit + 1) + a join and a slice of it.
    assert peak < 8 * (1 << 20), f"peak {peak / (1 << 20):.1f} MiB"


# --- lifecycle and errors ---------------------------------------------------


def test_is_a_source() -> None:
    with LineSource(io.BytesIO(b"")) as source:
        assert isinstance(source, Source)


def test_batches_can_be_iterated_only_once() -> None:
    with LineSource(io.BytesIO(b"a\n")) as source:
        source.batches()
        with pytest.raises(ConnectorError, match="only once"):
            source.batches()


def test_batches_after_close_raises() -> None:
    source = LineSource(io.BytesIO(b"a\n"))
    source.close()
    with pytest.raises(ConnectorError, match="closed"):
        source.batches()


def test_close_stops_iteration_and_keeps_unowned_stream_open() -> None:
    stream = io.BytesIO(b"a\nb\n" + b"c" * 10)
    source = LineSource(stream, chunk_size=2)
    it = source.batches()
    assert [r.value for r in next(it)] == [b"a"]
    source.close()
    source.close()  # idempotent
    assert list(it) == []
    assert not stream.closed


def test_close_stops_iteration_within_one_read() -> None:
    source = LineSource(io.BytesIO(b"a\nb\nc\n"), batch_size=1)
    it = source.batches()
    assert [r.value for r in next(it)] == [b"a"]
    source.close()
    assert list(it) == []


def test_default_batch_size_bounds_batches() -> None:
    with LineSource(io.BytesIO(b"x\n" * 1000)) as source:
        sizes = [len(b) for b in source.batches()]
    assert sum(sizes) == 1000
    assert max(sizes) == source.batch_size == 256


def test_close_stream_option_closes_stream() -> None:
    stream = io.BytesIO(b"a\n")
    with LineSource(stream, close_stream=True):
        pass
    assert stream.closed


@pytest.mark.parametrize("option", ["chunk_size", "max_line_bytes", "batch_size"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_invalid_sizes_are_rejected(option: str, bad: object) -> None:
    with pytest.raises(ConnectorError, match=option):
        LineSource(io.BytesIO(b""), **{option: bad})  # type: ignore[arg-type]


def test_text_stream_is_rejected() -> None:
    source = LineSource(io.StringIO("a\n"))  # type: ignore[arg-type]
    with pytest.raises(ConnectorError, match="binary"):
        list(source.batches())


def test_non_blocking_stream_is_rejected() -> None:
    class WouldBlock(io.RawIOBase):
        def readinto(self, buffer: memoryview) -> None:  # type: ignore[override]
            return None

        def readable(self) -> bool:
            return True

    with LineSource(WouldBlock()) as source:  # type: ignore[arg-type]
        with pytest.raises(ConnectorError, match="non-blocking"):
            list(source.batches())


def test_read_errors_are_wrapped() -> None:
    class Failing(io.RawIOBase):
        def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
            raise OSError(5, "Input/output error")

        def readable(self) -> bool:
            return True

    with LineSource(Failing(), name="disk") as source:  # type: ignore[arg-type]
        with pytest.raises(ConnectorError, match="reading 'disk' failed") as info:
            list(source.batches())
    assert isinstance(info.value.__cause__, OSError)


# --- open_line_source -------------------------------------------------------


def test_open_line_source_reads_file_and_closes_it(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(BOM + b"h\r\n1\r\n2")
    source = open_line_source(str(path), chunk_size=2)
    with source:
        got = [(str(r.position), r.value) for b in source.batches() for r in b]
    assert got == [(f"{path}@0", b"h"), (f"{path}@1", b"1"), (f"{path}@2", b"2")]
    assert source._stream.closed


def test_open_line_source_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="cannot open") as info:
        open_line_source(str(tmp_path / "missing.csv"))
    assert isinstance(info.value.__cause__, FileNotFoundError)


def test_open_line_source_invalid_option_closes_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "data.csv"
    path.write_bytes(b"a\n")
    opened: list[io.RawIOBase] = []

    def spy(*args: object, **kwargs: object) -> io.RawIOBase:
        stream = open(*args, **kwargs)  # type: ignore[call-overload]
        opened.append(stream)
        return stream

    monkeypatch.setattr(lines_module, "open", spy, raising=False)
    with pytest.raises(ConnectorError, match="chunk_size"):
        open_line_source(str(path), chunk_size=0)
    assert len(opened) == 1
    assert opened[0].closed


def test_open_line_source_dash_is_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    buffer = io.BytesIO(b"a\nb\n")
    monkeypatch.setattr("sys.stdin", types.SimpleNamespace(buffer=buffer))
    with open_line_source("-") as source:
        got = [str(r.position) for b in source.batches() for r in b]
    assert got == ["stdin@0", "stdin@1"]
    assert not buffer.closed


def test_open_line_source_without_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin", None)
    with pytest.raises(ConnectorError, match="stdin"):
        open_line_source("-")
