from __future__ import annotations

from collections.abc import Iterator

import pytest

from connectors import ConnectorError, MemorySink, MemorySource, Position, Record, Sink, Source


def _records(source: MemorySource) -> list[Record]:
    return [r for batch in source.batches() for r in batch]


def test_values_become_records_with_positions() -> None:
    with MemorySource([b"a", "é", b""]) as source:
        records = _records(source)
    assert records == [
        Record(b"a", Position("memory", 0)),
        Record("é".encode(), Position("memory", 1)),
        Record(b"", Position("memory", 2)),
    ]


def test_values_are_not_split_at_newlines() -> None:
    with MemorySource([b"a\nb"]) as source:
        assert [r.value for r in _records(source)] == [b"a\nb"]


def test_batches_have_at_most_batch_size_records() -> None:
    with MemorySource([str(i) for i in range(7)], name="m", batch_size=3) as source:
        batches = list(source.batches())
    assert [len(b) for b in batches] == [3, 3, 1]
    assert [str(r.position) for b in batches for r in b][-1] == "m@6"


def test_empty_values_yield_no_batches() -> None:
    with MemorySource([]) as source:
        assert list(source.batches()) == []


def test_values_are_consumed_lazily() -> None:
    produced: list[int] = []

    def gen() -> Iterator[bytes]:
        for i in range(10):
            produced.append(i)
            yield b"%d" % i

    with MemorySource(gen(), batch_size=4) as source:
        first = next(iter(source.batches()))
    assert [r.value for r in first] == [b"0", b"1", b"2", b"3"]
    assert len(produced) <= 5


def test_keys() -> None:
    with MemorySource([b"v1", "v2", b"v3"], keys=[b"k1", None, "k3"], batch_size=2) as source:
        batches = list(source.batches())
    assert [len(b) for b in batches] == [2, 1]
    got = [(r.key, r.value, r.position.offset) for b in batches for r in b]
    assert got == [(b"k1", b"v1", 0), (None, b"v2", 1), (b"k3", b"v3", 2)]


def test_keys_exact_multiple_of_batch_size() -> None:
    with MemorySource(["a", "b"], keys=["1", "2"], batch_size=2) as source:
        assert [len(b) for b in source.batches()] == [2]


@pytest.mark.parametrize("keys", [[b"k"], [b"k", b"k", b"k"]])
def test_keys_length_mismatch(keys: list[bytes]) -> None:
    with MemorySource([b"a", b"b"], keys=keys) as source:
        with pytest.raises(ConnectorError, match="differ in length"):
            _records(source)


def test_bad_value_type() -> None:
    with MemorySource([b"a", 3]) as source:  # type: ignore[list-item]
        with pytest.raises(ConnectorError, match="value must be bytes or str, got int"):
            _records(source)


def test_bad_key_type() -> None:
    with MemorySource([b"a"], keys=[1.5]) as source:  # type: ignore[list-item]
        with pytest.raises(ConnectorError, match="key must be bytes or str"):
            _records(source)


@pytest.mark.parametrize("bad", [0, -3, True])
def test_bad_batch_size(bad: int) -> None:
    with pytest.raises(ConnectorError, match="batch_size"):
        MemorySource([b"a"], batch_size=bad)


def test_source_protocol_and_single_iteration() -> None:
    source = MemorySource([b"a"])
    assert isinstance(source, Source)
    source.batches()
    with pytest.raises(ConnectorError, match="only once"):
        source.batches()


def test_close_stops_iteration() -> None:
    source = MemorySource([b"a", b"b", b"c"], batch_size=1)
    it = source.batches()
    assert [r.value for r in next(it)] == [b"a"]
    source.close()
    assert list(it) == []
    with pytest.raises(ConnectorError, match="closed"):
        source.batches()


def test_sink_collects_lines_and_counts_flushed() -> None:
    sink = MemorySink()
    assert isinstance(sink, Sink)
    sink.write(b"a")
    sink.write(bytearray(b"b"))
    assert sink.flushed == 0
    sink.flush()
    sink.write(b"c")
    assert (sink.lines, sink.flushed) == ([b"a", b"b", b"c"], 2)
    assert all(type(line) is bytes for line in sink.lines)


def test_sink_close_flushes_and_rejects_writes() -> None:
    with MemorySink() as sink:
        sink.write(b"a")
    assert (sink.closed, sink.flushed) == (True, 1)
    with pytest.raises(ConnectorError, match="closed"):
        sink.write(b"b")


def test_sink_rejects_str() -> None:
    with pytest.raises(ConnectorError, match="bytes"):
        MemorySink().write("a")  # type: ignore[arg-type]
