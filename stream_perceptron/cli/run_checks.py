"""``run``'s flags checked together, before anything is opened: every combination that cannot
work is a usage error (exit 2) that says what to give instead."""

from __future__ import annotations

import argparse
import os

from stream_perceptron.cli.flags import Millis
from stream_perceptron.drift import REFERENCE_AFTER
from stream_perceptron.paths import (
    READ,
    REPLACE,
    STREAM,
    WRITE,
    FileRole,
    conflicts,
    file_flag_problem,
    state_file_problem,
)

__all__ = ["DEFAULT_KAFKA_METRICS_PORT", "checked_run_args"]

DEFAULT_KAFKA_METRICS_PORT = 9108
DEFAULT_MAX_PENDING = 100_000
DEFAULT_LABEL_WAIT = 1_000_000

_EXTENSIONS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl"}
_EXTENSIONS.update({".libsvm": "libsvm", ".svm": "libsvm", ".svmlight": "libsvm"})


def checked_run_args(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    """``run``'s usage errors (exit 2 through ``parser.error``), before anything is opened,
    and the defaults that follow from other flags; returns the input format."""
    fmt = _format_of(args, parser)
    if args.resume and args.checkpoint is None:  # an empty one: _check_files says so
        parser.error("--resume needs --checkpoint PATH")
    if args.fresh and args.resume:
        parser.error("give --resume or --fresh, not both")
    if args.fresh and args.checkpoint is None:
        parser.error("--fresh needs --checkpoint PATH")
    _check_files(args, parser)
    _check_join(args, parser, fmt)
    if args.model_topic:
        _check_shared_model(args, parser)
    elif args.mix_every or args.mix_interval:
        parser.error("--mix-every and --mix-interval need --model-topic")
    elif args.model_topic_key_file:
        parser.error("--model-topic-key-file needs --model-topic")
    if (args.checkpoint_every or args.checkpoint_interval) and not (
        args.checkpoint or args.model_topic
    ):
        parser.error("--checkpoint-every and --checkpoint-interval need --checkpoint PATH")
    if args.source == "kafka":
        missing = [
            flag
            for flag, value in (
                ("--bootstrap-servers", args.bootstrap_servers),
                ("--topic", args.topic),
                ("--group", args.group),
            )
            if not value
        ]
        if missing:
            parser.error(f"--source kafka needs {', '.join(missing)}")
        if args.input != "-":
            parser.error("--input is for --source stdin; Kafka input comes from --topic")
        from stream_perceptron.cli.kafka import missing_client, resolve_client

        args.kafka_client = resolve_client(args.kafka_client)
        unusable = missing_client(args.kafka_client)
        if unusable:
            parser.error(unusable)
        if args.metrics_port is None:
            args.metrics_port = DEFAULT_KAFKA_METRICS_PORT
    else:
        kafka_only = ("predictions_topic", "dead_letter_topic", "bootstrap_servers", "group",
                      "model_topic")  # fmt: skip
        given = vars(args)
        for flag in (*kafka_only, "instance_id"):
            if given[flag]:
                parser.error(f"--{flag.replace('_', '-')} needs --source kafka")
        if args.kafka_client != "auto":
            parser.error("--kafka-client needs --source kafka")
    if args.rff_gamma is not None and args.rff_components is None:  # given, even as 1
        parser.error("--rff-gamma needs --rff-components")
    if args.rff_gamma is None:
        args.rff_gamma = 1.0
    if args.on_drift != "none" and args.drift_detector == "none":
        parser.error("--on-drift needs --drift-detector adwin or reference")
    if args.drift_reference_after != REFERENCE_AFTER and args.drift_detector != "reference":
        parser.error("--drift-reference-after needs --drift-detector reference")
    if args.on_drift == "forget" and not (args.averaged and args.model in ("binary",
                                                                         "multiclass")):
        parser.error("--on-drift forget restarts the average: it needs --averaged (--model "
                     "binary or multiclass)")  # fmt: skip
    if args.on_drift != "none" and args.model_topic:
        parser.error(
            "--on-drift reset or forget is not for --model-topic: one worker would change the "
            "group's model on its own; --drift-detector adwin alone reports each worker's drifts"
        )
    if args.average_half_life is not None and not args.averaged:
        parser.error("--average-half-life needs --averaged")
    if args.model in ("pa", "pa-multiclass") and args.bias == "r2":
        parser.error("--model pa takes --bias learned or none")
    if args.ui_linger is not None and not args.ui:
        parser.error("--ui-linger needs --ui")
    if args.ui and args.metrics_port is not None and args.metrics_port < 0:
        parser.error("--ui serves its page on the metrics port: give a port, not -1")
    if args.ui and args.metrics_port is None:
        args.metrics_port = 0  # any free port; its address is printed
    if args.metrics_port is not None and args.metrics_port < 0:
        args.metrics_port = None
    return fmt


def _format_of(args: argparse.Namespace, parser: argparse.ArgumentParser) -> str:
    if args.format:
        return args.format
    ext = os.path.splitext(args.input)[1].lower() if args.input != "-" else ""
    if args.source == "kafka":
        parser.error("--format is required with --source kafka (jsonl, csv or libsvm)")
    if ext in _EXTENSIONS:
        return _EXTENSIONS[ext]
    parser.error("--format is required (jsonl, csv or libsvm) when it cannot be told from --input")
    raise AssertionError  # parser.error exits


def _check_join(args: argparse.Namespace, parser: argparse.ArgumentParser, fmt: str) -> None:
    """--join-key, --max-pending, --label-wait: usage errors, then the defaults."""
    if args.join_key is None:
        for flag, value in (("--max-pending", args.max_pending), ("--label-wait", args.label_wait),
                            ("--labels-topic", args.labels_topic),
                            ("--join-changelog-topic", args.join_changelog_topic)):  # fmt: skip
            if value is not None:
                parser.error(f"{flag} needs --join-key FIELD")
        return
    if not args.join_key.strip():
        parser.error("--join-key names a field: give its name")
    if fmt not in ("csv", "jsonl"):
        parser.error(f"--join-key needs named fields: --format csv or jsonl, not {fmt}")
    if args.join_key == args.label:
        parser.error(f"--join-key and --label both name {args.label!r}: the key is not the label")
    if args.source == "kafka":
        _check_labels_topic(args, parser)
    elif args.labels_topic:
        parser.error("--labels-topic needs --source kafka")
    if args.max_pending is None:
        args.max_pending = DEFAULT_MAX_PENDING
    if args.label_wait is None:
        args.label_wait = DEFAULT_LABEL_WAIT
    if isinstance(args.label_wait, Millis) and args.source != "kafka":
        parser.error(f"--label-wait as a duration counts the records' time, their timestamps: "
                     f"--source kafka (the lines of {args.source} have none); give a number of "
                     "records")  # fmt: skip


def _check_labels_topic(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """--join-key on Kafka: events in one --topic, outcomes in --labels-topic."""
    if not args.labels_topic:
        parser.error("--join-key with --source kafka needs --labels-topic TOPIC (the outcomes), "
                     "co-partitioned with --topic (the events)")  # fmt: skip
    if len(args.topic) != 1:
        parser.error("--labels-topic goes with one --topic: the events' topic")
    if args.labels_topic in args.topic:
        parser.error("--labels-topic and --topic name one topic: events and outcomes come in two")
    if args.join_changelog_topic and not args.model_topic:
        parser.error("--join-changelog-topic goes with --model-topic (without it, what waits "
                     "is kept in --checkpoint)")  # fmt: skip
    if args.model_topic and not args.join_changelog_topic:
        args.join_changelog_topic = f"{args.model_topic}-join"
    if args.model_topic and args.join_changelog_topic in (args.model_topic, args.labels_topic,
                                                          *args.topic):  # fmt: skip
        parser.error(f"--join-changelog-topic {args.join_changelog_topic!r} is a topic of its "
                     "own: not the model, events or labels topic")  # fmt: skip


def _check_shared_model(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """--model-topic: usage errors."""
    if args.source != "kafka":
        parser.error("--model-topic needs --source kafka")
    if args.model not in ("binary", "multiclass"):
        parser.error("--model-topic mixes perceptrons: --model binary or multiclass")
    if args.scale or args.rff_components:
        parser.error(
            "--scale and --rff-components are not for --model-topic yet: a mixture of models "
            "standardised by different running statistics is not one model (--hash-bits is: "
            "the buckets are the same in every worker)"
        )
    if args.average_half_life is not None:
        parser.error("--model-topic mixes plain averages: not with --average-half-life")
    for flag, value in (("--checkpoint", args.checkpoint), ("--predictions", args.predictions),
                        ("--dead-letter", args.dead_letter)):  # fmt: skip
        if value:
            parser.error(
                f"{flag} is not for --model-topic: the shared model and its outputs live in "
                "Kafka (--predictions-topic, --dead-letter-topic, pull-model)"
            )
    from stream_perceptron.cli.kafka import model_topic_signer

    args.model_topic_signer = model_topic_signer(args.model_topic_key_file, parser)


def _check_files(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Usage errors, before anything is read or opened for writing: a file flag naming no
    usable file (empty, in a missing directory, a dangling symlink, a FIFO where a file is
    read whole), two roles on one file, or a checkpoint that is not a regular file."""
    stdio = ("-", None)  # stdin or stdout, or not given
    problem = file_flag_problem([
        ("--input", None if args.source == "kafka" or args.input == "-" else args.input, STREAM),
        ("--checkpoint", args.checkpoint, REPLACE),
        ("--predictions", None if args.predictions in stdio else args.predictions, WRITE),
        ("--dead-letter", None if args.dead_letter in stdio else args.dead_letter, WRITE),
        ("--summary-json", args.summary_json, WRITE),
        ("--model-topic-key-file", args.model_topic_key_file, READ),
        ("--ssl-cafile", args.ssl_cafile, READ),
        ("--ssl-certfile", args.ssl_certfile, READ),
        ("--ssl-keyfile", args.ssl_keyfile, READ),
    ])  # fmt: skip
    if problem is not None:
        parser.error(problem)
    named = [
        ("--input", args.input if args.source != "kafka" else None),
        ("--predictions", args.predictions),
        ("--dead-letter", args.dead_letter),
        ("--checkpoint", args.checkpoint),
        ("--summary-json", args.summary_json),
    ]
    roles = [FileRole(flag, path) for flag, path in named if path]
    for a, b in conflicts(roles):
        parser.error(f"{a.flag} {a.path} and {b.flag} {b.path} are the same file")
    if args.checkpoint:
        problem = state_file_problem(args.checkpoint, replace=args.resume or args.fresh)
        if problem == "exists":
            problem += (
                ": give --resume to continue from it, or --fresh to start a new model that "
                "overwrites it"
            )
        if problem is not None:
            parser.error(f"--checkpoint {args.checkpoint}: {problem}")
