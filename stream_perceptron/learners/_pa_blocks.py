"""What the binary passive-aggressive learner gives its C kernel (``_rules.h``'s
``pa_rule_row``): its rule's fields, the cells of a block's features, and both taken back
learned (:class:`~stream_perceptron.learners._binary_kernel.BinaryKernelModel`). A base of
:class:`~stream_perceptron.learners.PassiveAggressive`: the learner's fields stay its own."""

from __future__ import annotations

from array import array
from typing import Any

from stream_perceptron.learners import _binary_kernel as _binary

__all__ = ["VARIANT_CODES", "PaBlockModel"]

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
