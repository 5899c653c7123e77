# Type stub of the C extension stream_perceptron/_features.c (built by setup.py): its functions take
# numpy arrays and buffers; the reference is stream_perceptron/learners/scaling.py, hashing.py.
from typing import Any

def scale_block(
    X: Any, out: Any, learn: Any, n: Any, mean: Any, var: Any, rows: int, cols: int, /
) -> int: ...
def murmur3_32(data: bytes, seed: int, /) -> int: ...
