"""The model's flags of ``stream-perceptron run`` as one typed, frozen value, the learner they
ask for, and what a resumed run says of the flags its checkpoint's model overrides."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from typing import Any

from stream_perceptron.learners import (
    CentroidClassifier,
    MulticlassPassiveAggressive,
    MulticlassPerceptron,
    PassiveAggressive,
    Perceptron,
    Preprocessed,
    StreamClassifier,
)

__all__ = ["LearnerFlags", "make_learner", "warn_ignored_flags"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class LearnerFlags:
    """``run``'s model flags (see ``stream-perceptron run --help``, group "model")."""

    model: str = "binary"
    lr: float = 1.0
    bias: str = "learned"
    init: str = "zeros"
    seed: int | None = None
    averaged: bool = False
    average_half_life: float | None = None
    variant: str = "pa1"
    C: float = 1.0
    scale: str | None = None
    hash_bits: int | None = None
    rff_components: int | None = None
    rff_gamma: float = 1.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> LearnerFlags:
        """The flags of a parsed ``run`` command line."""
        given = vars(args)
        # None for a field whose default is not None: a flag not given (--rff-gamma is None
        # until checked, since given without --rff-components it is an error)
        return cls(**{
            f.name: given[f.name] for f in dataclasses.fields(cls)
            if given[f.name] is not None or f.default is None
        })  # fmt: skip


def make_learner(flags: LearnerFlags) -> StreamClassifier:
    """The learner the flags ask for."""
    learner: StreamClassifier
    if flags.model == "centroid":
        learner = CentroidClassifier()
    elif flags.model in ("pa", "pa-multiclass"):
        pa = PassiveAggressive if flags.model == "pa" else MulticlassPassiveAggressive
        learner = pa(C=flags.C, variant=flags.variant, bias=flags.bias)
    else:
        klass = Perceptron if flags.model == "binary" else MulticlassPerceptron
        learner = klass(
            lr=flags.lr,
            bias=flags.bias,
            init=flags.init,
            seed=flags.seed,
            averaged=flags.averaged,
            average_half_life=flags.average_half_life,
        )
    # --scale / --hash-bits / --rff-components: the features hashed, standardised and mapped
    # to random Fourier features before the learner
    rff = flags.rff_components
    if flags.scale is not None or flags.hash_bits is not None or rff is not None:
        more: dict[str, Any] = {}
        if rff is not None:
            more = {
                "rff_components": rff,
                "rff_gamma": flags.rff_gamma,
                "rff_seed": 0 if flags.seed is None else flags.seed,
            }
        learner = Preprocessed(learner, scale=flags.scale, hash_bits=flags.hash_bits, **more)
    return learner


# The flags that make the model: each sets the hyperparameter of its name.
_MODEL_FLAGS = ("lr", "bias", "init", "seed", "averaged", "average_half_life", "C", "variant")
_MODEL_CLASSES = {"binary": "Perceptron", "multiclass": "MulticlassPerceptron"}
_MODEL_CLASSES["centroid"] = "CentroidClassifier"
_MODEL_CLASSES["pa"] = "PassiveAggressive"
_MODEL_CLASSES["pa-multiclass"] = "MulticlassPassiveAggressive"


def warn_ignored_flags(flags: LearnerFlags, model: StreamClassifier) -> None:
    """--resume continues the checkpoint's model: say which model flags differ from it."""
    wrapped = model.model if isinstance(model, Preprocessed) else None
    for flag in ("scale", "hash_bits", "rff_components", "rff_gamma"):
        saved = None if wrapped is None else getattr(model, flag)
        if flag == "rff_gamma" and (flags.rff_components is None or saved is None):
            continue  # the gamma of no map
        given = getattr(flags, flag)
        if given != saved:
            logger.warning(
                "--%s %s is ignored: the checkpoint's model has %s=%r",
                flag.replace("_", "-"), given, flag, saved,
            )  # fmt: skip
    if wrapped is not None:
        model = wrapped
    if type(model).__name__ != _MODEL_CLASSES[flags.model]:
        logger.warning(
            "--model %s is ignored: the checkpoint holds a %s", flags.model, type(model).__name__
        )
        return
    params = model._get_params()
    for flag in _MODEL_FLAGS:
        given = getattr(flags, flag)
        if flag in params and given != params[flag]:
            logger.warning(
                "--%s %s is ignored: the checkpoint's model has %s=%r",
                "pa-variant" if flag == "variant" else flag.replace("_", "-"), given,
                flag,
                params[flag],
            )  # fmt: skip
