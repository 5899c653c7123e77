"""The engine command lines in the compose file and the StatefulSet are valid CLI invocations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from stream_perceptron.cli import build_parser

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _parse(argv: list[str]):
    argv = [re.sub(r"\$\((\w+)\)", "x", a) for a in argv]  # Kubernetes $(VAR) substitution
    argv = [{"--format=x": "--format=jsonl", "--model=x": "--model=binary"}.get(a, a) for a in argv]
    argv = [a.replace("--checkpoint-interval=x", "--checkpoint-interval=10") for a in argv]
    argv = [a.replace("--mix-every=x", "--mix-every=10000") for a in argv]
    return build_parser().parse_args(argv)


def test_statefulset_args_parse():
    manifest = yaml.safe_load((DEPLOY / "k8s" / "statefulset.yaml").read_text())
    container = manifest["spec"]["template"]["spec"]["containers"][0]
    args = _parse(container["args"])
    assert args.command == "run" and args.source == "kafka" and args.model_topic
    assert args.metrics_port == 9108 and args.metrics_host == "0.0.0.0"
    assert args.kafka_client == "confluent-kafka"  # librdkafka: the image has the extra


@pytest.mark.parametrize("worker", ["engine", "engine-2", "engine-3"])
def test_compose_engine_command_parses(worker):
    compose = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
    command = compose["services"][worker]["command"]
    if isinstance(command, str):
        pytest.fail("the engine command should be a list")
    args = _parse(command)
    assert args.source == "kafka" and args.model_topic and args.metrics_port == 9108
    assert args.kafka_client == "confluent-kafka"  # librdkafka: the image has the extra


def test_the_learner_flags_defaults_are_the_parsers():
    from stream_perceptron.cli.learner_flags import LearnerFlags

    assert LearnerFlags.from_args(build_parser().parse_args(["run"])) == LearnerFlags()
    given = build_parser().parse_args(["run", "--model", "pa", "--pa-variant", "pa2", "--C", "0.5"])
    flags = LearnerFlags.from_args(given)
    assert (flags.model, flags.variant, flags.C) == ("pa", "pa2", 0.5)
