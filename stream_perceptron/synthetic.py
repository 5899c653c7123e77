"""Generated streams with known structure, for tests, examples and benchmarks."""

from __future__ import annotations

from collections.abc import Iterator

from stream_perceptron.lazy_numpy import np

__all__ = ["separable_multiclass"]


def separable_multiclass(
    n: int, n_classes: int = 10, n_features: int = 20, gap: float = 0.1, seed: int = 0
) -> Iterator[tuple[dict[str, float], int]]:
    """Examples separable by an argmax of linear functions with a gap, but not one-vs-rest.

    Hidden class vectors ``V``; ``x`` is uniform in the cube [-1, 1]^d and labelled
    ``argmax_k V_k.x``, keeping only points whose best score beats the runner-up by ``gap``.
    Each class is a cone, which a single one-vs-rest hyperplane cannot cut out.

    Examples
    --------
    >>> data = list(separable_multiclass(5, n_classes=3, n_features=4, seed=1))
    >>> len(data), sorted(data[0][0])
    (5, ['x0', 'x1', 'x2', 'x3'])

    """
    rng = np.random.default_rng(seed)
    hidden = rng.normal(size=(n_classes, n_features))
    names = [f"x{j}" for j in range(n_features)]
    made = 0
    while made < n:
        X = rng.uniform(-1.0, 1.0, size=(4096, n_features))
        scores = X @ hidden.T
        top2 = np.sort(scores, axis=1)[:, -2:]
        keep = top2[:, 1] - top2[:, 0] >= gap
        for row, label in zip(X[keep], scores[keep].argmax(axis=1)):
            if made == n:
                return
            yield dict(zip(names, row.tolist())), int(label)
            made += 1
