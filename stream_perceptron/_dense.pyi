# Type stub of the C extension stream_perceptron/_dense.c (built by setup.py): its functions take
# and return buffers and Python numbers as documented in their docstrings.
from typing import Any

def __getattr__(name: str) -> Any: ...
