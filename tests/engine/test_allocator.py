"""The CLI's malloc tuning: done on glibc Linux, a no-op (never an error) elsewhere."""

from __future__ import annotations

import ctypes
import sys

import pytest

from stream_perceptron import allocator


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_tunes_glibc(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert allocator.tune_malloc() is True


def test_an_environment_choice_wins(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")
    assert allocator.tune_malloc() is False


def test_without_glibc_nothing_happens(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)

    def no_libc(*args, **kwargs):
        raise OSError("no libc here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert allocator.tune_malloc() is False
    monkeypatch.setattr(sys, "platform", "darwin")
    assert allocator.tune_malloc() is False


def test_mallopt_refusing_is_reported(monkeypatch):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)

    class Libc:
        class mallopt:  # noqa: N801 - stands for the C function
            argtypes: list = []
            restype = None

            def __new__(cls, param, value):
                return 0  # glibc's "failed"

    monkeypatch.setattr(ctypes, "CDLL", lambda name: Libc)
    if sys.platform.startswith("linux"):
        assert allocator.tune_malloc() is False
