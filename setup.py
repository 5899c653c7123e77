"""The optional C extension; everything else about the package is in pyproject.toml.

``optional=True``: without a C compiler the install still succeeds and the learners use their
pure-Python loops. ``-ffp-contract=off`` keeps every multiply and add separately rounded, as
in Python (no fused multiply-add).
"""

from __future__ import annotations

from setuptools import Extension, setup

setup(
    # the four extensions compiled at once, one thread a core (6 s of compiling on one core)
    options={"build_ext": {"parallel": True}},
    ext_modules=[
        Extension(
            "stream_perceptron._speedups",
            ["stream_perceptron/_speedups.c"],
            depends=["stream_perceptron/_rules.h"],
            optional=True,
            # -O3: the store's folds over the classes run several classes at a time (each
            # class's sum is still its own left fold; no -ffast-math, no FMA): the averaged
            # multi-class scoring 438 -> 387 ns an example at 10 classes x 20 features
            extra_compile_args=["-O3", "-ffp-contract=off"],
        ),
        # The dense fast path: block scanners and exact kernels (glue in native/; without it
        # the engine runs record by record).
        Extension(
            "stream_perceptron._dense",
            ["stream_perceptron/_dense.c"],
            depends=["stream_perceptron/_rules.h"],
            optional=True,
            extra_compile_args=["-O2", "-ffp-contract=off"],
        ),
        # Feature preprocessing: a dense block standardised in one call, MurmurHash3.
        Extension(
            "stream_perceptron._features",
            ["stream_perceptron/_features.c"],
            optional=True,
            extra_compile_args=["-O2", "-ffp-contract=off"],
        ),
        # The drift monitor's loop: ADWIN over chunks of the mistake stream, a block per call
        # (reference: stream_perceptron/adwin.py).
        Extension(
            "stream_perceptron._drift",
            ["stream_perceptron/_drift.c"],
            optional=True,
            extra_compile_args=["-O2", "-ffp-contract=off"],
        ),
    ]
)
