"""The CLI's malloc tuning: done on glibc Linux, a no-op (never an error) elsewhere."""

from __future__ import annotations

import ctypes
import sys

import pytest

from stream_perceptron import allocator, native


@pytest.fixture(params=["C", "ctypes"])
def way(request, monkeypatch):
    """Each test both ways: mallopt from the C extension, and by ctypes where it is not built."""
    if request.param == "C" and native.dense is None:
        pytest.skip("the C extension is not built")
    if request.param == "ctypes":
        monkeypatch.setattr(native, "dense", None)
    return request.param


@pytest.fixture
def by_ctypes(monkeypatch):
    """mallopt by ctypes (the C extension as if not built): the error paths mock its libc."""
    monkeypatch.setattr(native, "dense", None)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")
def test_tunes_glibc(monkeypatch, way):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert allocator.tune_malloc() is True


def test_an_environment_choice_wins(monkeypatch, way):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1000000")
    assert allocator.tune_malloc() is False


def test_without_glibc_nothing_happens(monkeypatch, by_ctypes):
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)

    def no_libc(*args, **kwargs):
        raise OSError("no libc here")

    monkeypatch.setattr(ctypes, "CDLL", no_libc)
    assert allocator.tune_malloc() is False
    monkeypatch.setattr(sys, "platform", "darwin")
    assert allocator.tune_malloc() is False


def test_mallopt_refusing_is_reported(monkeypatch, by_ctypes):
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
