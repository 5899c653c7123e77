"""Run the docstring examples of every connectors module."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "connectors",
    "connectors.base",
    "connectors.errors",
    "connectors.files",
    "connectors.lines",
    "connectors.memory",
    "connectors.record",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
