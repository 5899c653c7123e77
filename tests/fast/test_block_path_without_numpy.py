"""The binary learners' CSV and JSON-lines block path runs without importing NumPy (issue 25,
row 4a: NumPy's import was a seventh of a million-line ``cat data.csv | stream-perceptron
run``), and ``lazy_numpy`` brings NumPy in on first use for every other path."""

from __future__ import annotations

import subprocess
import sys
from array import array

import numpy as np
import pytest

from stream_perceptron import lazy_numpy, native

#: The CLI run in a fresh interpreter, then whether NumPy was imported.
PROBE = (
    "import sys\n"
    "from stream_perceptron.cli.main import main\n"
    "sys.argv = ['stream-perceptron', *sys.argv[1:]]\n"
    "code = main()\n"
    "print('numpy imported:', 'numpy' in sys.modules, file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def _csv(rows: int, classes: int = 2) -> bytes:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(rows, 4))
    y = X @ [1.0, -2.0, 0.5, 1.0] > 0 if classes == 2 else rng.integers(0, classes, rows)
    lines = ["a,b,c,d,y"] + [",".join([*(f"{v:.5f}" for v in row), str(int(t))])
                             for row, t in zip(X.tolist(), y.tolist())]  # fmt: skip
    return ("\n".join(lines) + "\n").encode()


def _jsonl(rows: int) -> bytes:
    rng = np.random.default_rng(4)
    X = rng.normal(size=(rows, 3))
    return b"".join(
        b'{"a": %r, "b": %r, "c": %r, "y": %d}\n' % (*row, int(row[0] - row[1] > 0))
        for row in X.tolist()
    )


def _numpy_imported(data: bytes, *flags: str, fmt: str = "csv") -> bool:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "run", "--format", fmt, "--quiet", *flags],
        input=data, capture_output=True, timeout=120, check=True,
    )  # fmt: skip
    last = done.stderr.decode().strip().splitlines()[-1]
    assert last.startswith("numpy imported:"), done.stderr.decode()
    return last.endswith("True")


@pytest.mark.skipif(native.dense is None, reason="the block path needs the C extension")
@pytest.mark.parametrize(
    "flags", [(), ("--averaged",), ("--averaged", "--average-half-life", "500"), ("--model", "pa")]
)
def test_the_binary_csv_block_path_never_imports_numpy(flags):
    assert not _numpy_imported(_csv(30_000), *flags)


@pytest.mark.skipif(native.dense is None, reason="the block path needs the C extension")
def test_the_binary_json_lines_block_path_never_imports_numpy():
    assert not _numpy_imported(_jsonl(20_000), fmt="jsonl")
    assert _numpy_imported(_jsonl(2_000), "--model", "multiclass", fmt="jsonl")


@pytest.mark.skipif(native.dense is None, reason="the block path needs the C extension")
@pytest.mark.parametrize(
    "data,flags",
    [
        (_csv(3_000, classes=3), ("--model", "multiclass")),  # its glue is NumPy's
        (_csv(3_000), ("--scale", "standard")),  # so is the scaler's
        (_csv(3_000), ("--predictions", "/dev/null")),  # the outputs' codes too
    ],
)
def test_the_other_paths_bring_numpy_in_when_they_need_it(data, flags):
    assert _numpy_imported(data, *flags)


def test_the_stand_in_imports_numpy_at_first_use_and_then_holds_its_names():
    stand_in = lazy_numpy._OnFirstUse("numpy")
    assert "empty" not in vars(stand_in)
    assert stand_in.empty is np.empty  # numpy is imported by this test module already
    assert vars(stand_in)["float64"] is np.float64  # later lookups are plain dict hits
    assert stand_in.__name__ == "numpy" and stand_in.__doc__ is None
    with pytest.raises(AttributeError):
        stand_in.no_such_name  # noqa: B018


def test_bool_checks_know_numpy_booleans_only_once_numpy_is_there():
    assert lazy_numpy.is_bool(True) and lazy_numpy.is_bool(np.True_)
    assert not lazy_numpy.is_bool(1) and not lazy_numpy.is_bool(np.int8(1))
    assert lazy_numpy.bool_types() == (bool, np.bool_)
    assert isinstance(np.False_, lazy_numpy.bool_types())


@pytest.mark.skipif(native.dense is None, reason="the C extension")
def test_the_block_buffers_helpers():
    c = native.dense
    assert len(c.empty(5)) == 5 and type(c.empty(0)) is bytearray
    with pytest.raises(ValueError):
        c.empty(-1)
    signs = c.take(array("b", [1, -1, 0]), array("i", [2, 0, 1, 1]))
    assert memoryview(signs).cast("b").tolist() == [0, 1, -1, -1]
    with pytest.raises(ValueError, match="outside the table"):
        c.take(array("b", [1]), array("i", [0, 1]))
    with pytest.raises(ValueError, match="outside the table"):
        c.take(array("b", [1]), array("i", [-1]))
    predicted = array("b", [1, -1, 1, -1, 1])
    labels = array("b", [1, 1, 0, -1, -1])
    assert c.mistakes(predicted, labels) == ([False, True, False, True], 1)
    with pytest.raises(ValueError):
        c.mistakes(predicted, array("b", [1]))  # shorter than the predictions
