"""A binary perceptron learned from arrays in one call: NumPy in, a :class:`Perceptron` out."""

from __future__ import annotations

from typing import Any

from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners.perceptron import Perceptron

__all__ = ["learn_array"]


def learn_array(X: np.ndarray, y: np.ndarray, **params: Any) -> Perceptron:
    """A new :class:`Perceptron` (``params`` its hyperparameters) learned from the rows of ``X``
    (features named by column index) and labels ``y`` in {-1, +1}, one pass, exactly as the
    ``learn_one`` loop would. Needs the C extension.

    Examples
    --------
    >>> model = learn_array(np.array([[1.0, 0.0], [-1.0, 2.0]]), np.array([1, -1]))
    >>> model.weights, model.n_mistakes
    ({0: 2.0, 1: -2.0}, 2)

    """
    model = Perceptron(**params)
    model._labels.encode(-1)  # the caller's encoding: -1/+1
    X = np.asarray(X)
    if X.dtype != np.float32:  # float32 is read as it is (see learn_dense)
        X = X.astype(np.float64, copy=False)
    model.learn_dense(list(range(X.shape[1])), X, np.asarray(y, dtype=np.int8))
    return model
