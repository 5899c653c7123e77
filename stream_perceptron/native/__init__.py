"""The C tier: the compiled extensions, loaded once, and whether they are there.

Two tiers compute every update rule of the package:

1. the C extensions, built by ``pip install`` when a C compiler is there (``setup.py``, optional
   extensions, compiled with ``-ffp-contract=off``):

   * :mod:`stream_perceptron._dense` (here :data:`dense`): the block kernels of the
     perceptrons and passive-aggressive learners, dense and sparse (their glue:
     ``learners/_binary_kernel.py``, ``learners/_multiclass_kernel.py``,
     ``learners/_pa_kernel.py``, ``learners/binary_blocks.py``), and the block scanners of CSV,
     JSON lines and libsvm (``formats/scan.py``; the sparse rows they give,
     ``formats/sparse_rows.py``). ``STREAM_PERCEPTRON_NO_C=1`` at import turns it off: then no
     learner is :attr:`~stream_perceptron.learners.StreamClassifier.dense_capable` and the
     engine runs per record;
   * :mod:`stream_perceptron._features` (here :data:`features`): ``scale_block`` (a dense block
     standardised, before the kernels), ``scale_dict``/``commit_dict`` (the dict API's
     standardisation), MurmurHash3 and ``rff_block`` (random Fourier features), for
     :class:`~stream_perceptron.learners.Preprocessed` (the references:
     ``learners/scaling.py``, ``learners/hashing.py``, ``learners/fourier.py``);
   * :mod:`stream_perceptron._drift` (here :data:`drift`): the drift monitor's ADWIN over a
     block of mistakes in one call (the reference: ``stream_perceptron/adwin.py``);
   * :mod:`stream_perceptron._speedups` (here :data:`speedups`): the dict API's helpers, used by
     ``Perceptron`` and ``MulticlassPerceptron`` themselves, each declining (``None``/``False``)
     whatever it does not handle. ``STREAM_PERCEPTRON_PURE_PYTHON=1`` at import turns it off;

2. the readable pure-Python reference: the learners' own per-record code
   (``learn_one``/``predict_one`` with :data:`speedups` off) and ``float()`` on each CSV cell.

The C code gives the reference's results to the last bit (same operations, same order: every
sum a plain left fold from ``0.0`` in feature order); ``tests/fast/test_tiers_equal.py`` and
the other bit-exact tests compare the two tiers.
"""

from __future__ import annotations

import os
from array import array
from types import ModuleType

__all__ = [
    "dense", "dense_error", "drift", "features", "speedups", "has_dense", "E10_MIN", "E10_MAX",
    "missing", "describe_tiers",
]  # fmt: skip

#: The C extensions not in use, by short name, and why (see :func:`missing`).
_missing: dict[str, str] = {}


def _off(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _not_built(e: ImportError) -> str:
    # the detail is "No module named ..." but for a build that does not load (a missing symbol)
    return "not built" if e.name and e.name.startswith("stream_perceptron._") else (
        f"not loadable ({e})"
    )


# -- the dict API's helpers -----------------------------------------------------------------------

speedups: ModuleType | None
if _off("STREAM_PERCEPTRON_PURE_PYTHON"):
    speedups = None
    _missing["speedups"] = "turned off by STREAM_PERCEPTRON_PURE_PYTHON"
else:
    try:
        from stream_perceptron import _speedups as speedups
    except ImportError as e:  # not built: the pure-Python loops
        speedups = None
        _missing["speedups"] = _not_built(e)

# -- feature preprocessing: a dense block standardised, MurmurHash3 (_features.c) -----------------

features: ModuleType | None
if _off("STREAM_PERCEPTRON_NO_C"):
    features = None
    _missing["features"] = "turned off by STREAM_PERCEPTRON_NO_C"
else:
    try:
        from stream_perceptron import _features as features
    except ImportError as e:  # not built: the pure-Python reference
        features = None
        _missing["features"] = _not_built(e)

# -- the drift monitor's loop: ADWIN over chunks of the mistake stream (_drift.c) -----------------

drift: ModuleType | None
if _off("STREAM_PERCEPTRON_NO_C"):
    drift = None
    _missing["drift"] = "turned off by STREAM_PERCEPTRON_NO_C"
else:
    try:
        from stream_perceptron import _drift as drift
    except ImportError as e:  # not built: the pure-Python reference (stream_perceptron/adwin.py)
        drift = None
        _missing["drift"] = _not_built(e)

# -- the dense kernels and block scanners ---------------------------------------------------------

E10_MIN, E10_MAX = -348, 347


def _powers_of_ten() -> tuple[array, array]:
    """10**e as 128-bit mantissas rounded down, top bit set (Go's detailedPowersOfTen): the
    table of the C scanner's Eisel-Lemire conversion, ``(low 64 bits, high 64 bits)``."""
    lo, hi = array("Q"), array("Q")  # uint64 (8 bytes on every platform CPython builds for)
    for e in range(E10_MIN, E10_MAX + 1):
        if e >= 0:
            v = 10**e
            shift = v.bit_length() - 128
            m = v >> shift if shift > 0 else v << -shift
        else:
            d = 10**-e
            m = (1 << (127 + d.bit_length())) // d
        lo.append(m & 0xFFFFFFFFFFFFFFFF)
        hi.append(m >> 64)
    return lo, hi


dense: ModuleType | None = None
dense_error: str | None = None
if _off("STREAM_PERCEPTRON_NO_C"):
    dense_error = "disabled by STREAM_PERCEPTRON_NO_C"
    _missing["dense"] = "turned off by STREAM_PERCEPTRON_NO_C"
else:
    try:
        from stream_perceptron import _dense as _loaded
    except ImportError as e:  # built without a C compiler: the per-record path
        dense_error = f"the C extension is not built ({e})"
        _missing["dense"] = _not_built(e)
    else:
        POW10_LO, POW10_HI = _powers_of_ten()
        _loaded.set_tables(POW10_LO, POW10_HI)
        dense = _loaded


def has_dense() -> bool:
    """Whether the dense kernels and scanners are there (read at each call: tests turn them
    off by setting :data:`dense` to ``None``)."""
    return dense is not None


_TIERS = ("dense", "speedups", "features", "drift")


def missing() -> dict[str, str]:
    """The C extensions not in use (``dense``, ``speedups``, ``features``, ``drift``) and why:
    not built (no C compiler at install), or turned off by an environment variable. Their
    work then runs in the pure-Python reference, 20-60x slower."""
    return {name: _missing[name] for name in _TIERS if name in _missing}


def describe_tiers() -> str:
    """The tiers in use, for ``stream-perceptron --version``.

    Examples
    --------
    >>> describe_tiers().startswith(("C tier: ", "pure Python"))
    True

    """
    off = missing()
    used = [name for name in _TIERS if name not in off]
    if not off:
        return f"C tier: {', '.join(used)}"
    by_reason: dict[str, list[str]] = {}
    for name, reason in off.items():
        by_reason.setdefault(reason, []).append(name)
    why = "; ".join(f"{', '.join(names)} {reason}" for reason, names in by_reason.items())
    if not used:
        return f"pure Python: the C extensions are missing: {why}"
    return f"C tier: {', '.join(used)}; pure Python for the rest: {why}"
