from __future__ import annotations

import os
from pathlib import Path

import pytest

from connectors import ConnectorError, FileSink, Sink, open_sink
from connectors import files as files_module


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Record the file descriptors passed to os.fsync (and still sync)."""
    calls: list[int] = []
    real = os.fsync

    def spy(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(files_module.os, "fsync", spy)
    return calls


def test_writes_lines_with_newlines(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    with FileSink(str(path)) as sink:
        sink.write(b'{"y": 1}')
        sink.write(b"")
        sink.write(bytearray(b"z"))
    assert path.read_bytes() == b'{"y": 1}\n\nz\n'


def test_appends_to_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_bytes(b"old\n")
    with FileSink(str(path)) as sink:
        sink.write(b"new")
    assert path.read_bytes() == b"old\nnew\n"


def test_writes_are_buffered_until_flush(tmp_path: Path, fsyncs: list[int]) -> None:
    path = tmp_path / "out.txt"
    with FileSink(str(path)) as sink:
        sink.write(b"a")
        assert path.read_bytes() == b""
        assert fsyncs == []
        sink.flush()
        assert path.read_bytes() == b"a\n"
        assert len(fsyncs) == 1
        sink.write(b"b")
        sink.flush()
        assert path.read_bytes() == b"a\nb\n"
        assert len(fsyncs) == 2


def test_close_flushes_and_syncs(tmp_path: Path, fsyncs: list[int]) -> None:
    path = tmp_path / "out.txt"
    sink = FileSink(str(path))
    sink.write(b"a")
    sink.close()
    sink.close()  # idempotent
    assert path.read_bytes() == b"a\n"
    assert len(fsyncs) == 1
    assert sink.closed


def test_dash_writes_to_stdout_without_fsync(
    capsysbinary: pytest.CaptureFixture[bytes], fsyncs: list[int]
) -> None:
    sink = open_sink("-")
    sink.write(b"p=1")
    sink.flush()
    assert capsysbinary.readouterr().out == b"p=1\n"
    sink.write(b"p=0")
    sink.close()
    assert capsysbinary.readouterr().out == b"p=0\n"
    assert fsyncs == []


def test_dash_close_keeps_stdout_open(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    import sys

    with FileSink("-"):
        pass
    assert not sys.stdout.buffer.closed


@pytest.mark.skipif(not os.path.exists("/dev/null"), reason="needs /dev/null")
def test_character_device_is_flushed_not_synced(fsyncs: list[int]) -> None:
    with FileSink("/dev/null") as sink:
        sink.write(b"x")
        sink.flush()
    assert fsyncs == []


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_write_failure_is_wrapped() -> None:
    sink = FileSink("/dev/full")
    sink.write(b"x")
    with pytest.raises(ConnectorError, match="flushing '/dev/full' failed") as info:
        sink.flush()
    assert isinstance(info.value.__cause__, OSError)
    with pytest.raises(ConnectorError):
        sink.close()  # the final flush fails too, but the file gets closed
    assert sink.closed


def test_open_failure_is_wrapped(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError, match="cannot open") as info:
        FileSink(str(tmp_path / "missing-dir" / "out.txt"))
    assert isinstance(info.value.__cause__, OSError)


def test_write_after_close_raises(tmp_path: Path) -> None:
    sink = FileSink(str(tmp_path / "out.txt"))
    sink.close()
    with pytest.raises(ConnectorError, match="closed"):
        sink.write(b"x")
    with pytest.raises(ConnectorError, match="closed"):
        sink.flush()


def test_str_line_is_rejected(tmp_path: Path) -> None:
    with FileSink(str(tmp_path / "out.txt")) as sink:
        with pytest.raises(ConnectorError, match="bytes"):
            sink.write("text")  # type: ignore[arg-type]


def test_open_sink_returns_a_sink(tmp_path: Path) -> None:
    sink = open_sink(str(tmp_path / "out.txt"))
    try:
        assert isinstance(sink, FileSink)
        assert isinstance(sink, Sink)
    finally:
        sink.close()
