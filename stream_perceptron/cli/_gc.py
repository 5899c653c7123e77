"""The command's imports without the cyclic garbage collector (:func:`imports_without_gc`),
and without an optional package another one imports when it can (:func:`imports_without`).

Importing the modules of a run allocates tens of thousands of objects that stay alive (the
modules' classes, functions and constants), and the collector, counting allocations, walks them
again and again: about 30 collections during an empty run's start, and once more at the
interpreter's exit. They free nothing: what an import makes is not garbage. The collector is off
while the command imports, back on (as it was: a program that turned it off keeps it off) as
soon as it is done; with ``freeze``, what exists then is moved out of its sight for good
(:func:`gc.freeze`), so the exit's collection walks only what the run made. Measured by
callgrind on ``echo -n | stream-perceptron run --format jsonl``: 377M instructions before,
of which 12M in the collections of the imports and 22M in the exit's.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator

__all__ = ["imports_without", "imports_without_gc"]


@contextlib.contextmanager
def imports_without_gc(freeze: bool = False) -> Iterator[None]:
    """The collector off inside the block, as it was after it (exceptions included); with
    ``freeze``, every object tracked at the block's end frozen (when the block succeeded)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
        if freeze:
            gc.freeze()
    finally:
        if was_on:
            gc.enable()


@contextlib.contextmanager
def imports_without(name: str) -> Iterator[None]:
    """Inside the block, ``import name`` fails as if the package were not installed (unless it
    is imported already); after it, the package imports again.

    For a package another one imports only when it can, for a part the command never uses:
    river's ``river.stream`` imports scikit-learn when it is installed (for its reader of
    scikit-learn's data sets), which took ``stream-perceptron example-data phishing`` from
    0.35 s to 1.5 s of CPU, measured, where scikit-learn is installed (the test environment).
    """
    if name in sys.modules:
        yield
        return
    sys.modules[name] = None  # type: ignore[assignment]  # the import system's "not found"
    try:
        yield
    finally:
        if name in sys.modules and sys.modules[name] is None:
            del sys.modules[name]
