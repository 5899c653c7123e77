"""What the passive-aggressive learners give their C kernels (``_rules.h``'s ``pa_rule_row``,
``pa_multi_rule_row``): the rule's fields, the cells of a block's features (and the classes),
and both taken back learned (:class:`~stream_perceptron.learners._binary_kernel.
BinaryKernelModel`, :class:`~stream_perceptron.learners._multiclass_kernel.
MulticlassKernelModel`). Bases of :class:`~stream_perceptron.learners.PassiveAggressive` and
:class:`~stream_perceptron.learners.MulticlassPassiveAggressive`: the learners' fields stay
their own."""

from __future__ import annotations

from array import array
from typing import Any

from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners import _binary_kernel as _binary

__all__ = ["VARIANT_CODES", "PaBlockModel", "PaMultiBlockModel"]

VARIANT_CODES = {"pa": 0, "pa1": 1, "pa2": 2}


class PaBlockModel:
    """The block interface of the binary passive-aggressive learner (a mixin)."""

    C: float
    variant: str
    _w: dict[Any, float]
    _b: float
    _bias_mode: str
    _max_norm: float
    _n_seen: int
    _n_mistakes: int

    def block_rule(self) -> tuple[Any, ...]:
        """The C ``PaRule``'s fields: ``(variant, C, learned_bias, b, max_norm, n_seen,
        n_mistakes)``."""
        return (
            VARIANT_CODES[self.variant], float(self.C), self._bias_mode == "learned",
            float(self._b), float(self._max_norm), int(self._n_seen), int(self._n_mistakes),
        )  # fmt: skip

    def block_cells(self, names: list[Any]) -> tuple[array, array, bytearray]:
        """The weights of ``names`` (0.0 for a key the dict lacks), no accumulators (zeros),
        and the weights' presence bits (1)."""
        wd = self._w
        w = array("d", [wd.get(k, 0.0) for k in names])
        present = bytearray([k in wd for k in names])
        return w, array("d", bytes(8 * len(names))), present

    def commit_block(
        self, names: list[Any], cells: tuple[array, array, bytes], joined: tuple[array, array],
        factors: list[float], rule: tuple[Any, ...],
    ) -> None:  # fmt: skip
        """A kernel's learned weights (``had``: the presence bits before it; ``joined``: the
        slots that joined the weights, in order) and its rule's fields."""
        _binary.write_back(self._w, names, cells[0], cells[2], 1, joined[0])
        _, _, _, self._b, self._max_norm, self._n_seen, self._n_mistakes = rule


class PaMultiBlockModel:
    """The block interface of the multi-class passive-aggressive learner (a mixin)."""

    C: float
    variant: str
    _w: dict[Any, dict[Any, float]]
    _b: dict[Any, float]
    _bias_mode: str
    _max_norm: float
    _n_seen: int
    _n_mistakes: int

    def _add_class(self, c: Any) -> None:
        raise NotImplementedError  # the learner's

    def block_classes(self) -> list[Any]:
        """The classes in the order first seen (the kernel's class codes)."""
        return list(self._w)

    def block_rule(self) -> tuple[Any, ...]:
        """The C ``PaMultiRule``'s fields: ``(variant, C, learned_bias, max_norm, n_seen,
        n_mistakes, n_active)``."""
        return (
            VARIANT_CODES[self.variant], float(self.C), self._bias_mode == "learned",
            float(self._max_norm), int(self._n_seen), int(self._n_mistakes), len(self._w),
        )  # fmt: skip

    def block_cells(self, names: list[Any], n_classes: int) -> tuple[np.ndarray, ...]:
        """``(W, U, b, ub, present)`` as the multi-class perceptron's (no accumulators: U
        empty, ub zeros): each class's weights of ``names`` (0.0 where its dict has none), its
        bias, and whether its dict has each name (bit 1)."""
        m = len(names)
        W, b = np.zeros((n_classes, m)), np.zeros(n_classes)
        present = np.zeros((n_classes, m), dtype=np.uint8)
        for i, cl in enumerate(self._w):
            wc = self._w[cl]
            b[i] = self._b[cl]
            if wc:
                W[i] = [wc.get(k, 0.0) for k in names]
                present[i] = [k in wc for k in names]
        return W, np.zeros((0, m)), b, np.zeros(n_classes), present

    def commit_block(
        self, names: list[Any], classes: list[Any], cells: tuple[np.ndarray, ...],
        joined: list[np.ndarray], factors: list[float], rule: tuple[Any, ...],
    ) -> None:  # fmt: skip
        """A kernel's learned weights and biases (``had``: the presence bits before it;
        ``joined``: per class the slots that joined its weights, in order), the classes it
        brought (the first ``n_active`` of ``classes``) and its rule's fields."""
        W, _, b, _, had = cells
        _, _, _, self._max_norm, self._n_seen, self._n_mistakes, n_active = rule
        for cl in classes[len(self._w) : n_active]:
            self._add_class(cl)
        for i, cl in enumerate(classes[:n_active]):
            _binary.write_back(self._w[cl], names, W[i], had[i].tobytes(), 1, joined[i])
            self._b[cl] = float(b[i])
