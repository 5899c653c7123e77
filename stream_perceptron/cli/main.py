"""Command line: ``stream-perceptron run | inspect | pull-model | example-data``.

Exit codes: 0 done, 1 failure, 2 usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import io
import logging
import signal
import sys
import threading
from typing import Any

from stream_perceptron import __version__
from stream_perceptron.cli.flags import (
    add_client_flag,
    add_security_flags,
    logging_options,
    positive_int,
    text,
)
from stream_perceptron.cli.run_args import add_run
from stream_perceptron.formats import FORMATS

__all__ = ["main", "build_parser"]

logger = logging.getLogger(__name__)


class _Version(argparse.Action):
    """``--version``: the version and the tiers in use (a missing C extension makes every run
    20-60x slower), found only when asked: the parser is built for every command."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any, **_kwargs: Any) -> None:
        from stream_perceptron.native import describe_tiers

        print(f"{parser.prog} {__version__} ({describe_tiers()})")  # stdout, as argparse's
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="stream-perceptron",
        description="A streaming perceptron: learns from records on stdin or Kafka.",
    )
    parser.add_argument("--version", action=_Version, help="show the version and the tiers in use")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more log output")
    parser.add_argument("-q", "--quiet", action="store_true", help="errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_run(sub)
    inspect = sub.add_parser(
        "inspect", help="show a checkpoint's model", parents=[logging_options()]
    )
    inspect.add_argument("checkpoint", metavar="CHECKPOINT")
    inspect.add_argument("--top", type=positive_int, default=10, help="largest weights to show")
    pull = sub.add_parser(
        "pull-model",
        parents=[logging_options()],
        help="write a shared model's current mixture as a checkpoint",
        description="Read a shared-model topic to its end and write the cluster's current "
        "mixed model as a checkpoint JSON (for inspect, StreamClassifier.from_state, or "
        "--checkpoint PATH --resume).",
    )
    pull.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,...]")
    pull.add_argument("--model-topic", type=text, required=True, metavar="TOPIC")
    add_client_flag(pull)
    pull.add_argument(
        "--output",
        required=True,
        metavar="PATH",
        help="checkpoint file to write (a regular file; an existing one only with --force)",
    )
    pull.add_argument("--force", action="store_true", help="replace an existing --output file")
    pull.add_argument(
        "--allow-incomplete",
        action="store_true",
        help="write --output even when its model holds another number of examples than the "
        "partition records count (learned examples missing from it); without it, exit 1 "
        "and write nothing",
    )
    pull.add_argument(
        "--model-topic-key-file",
        metavar="PATH",
        help="the group's key: only records signed with it count (as the workers' flag)",
    )
    add_security_flags(pull)
    data = sub.add_parser(
        "example-data", help="write a bundled data set to stdout", parents=[logging_options()]
    )
    data.add_argument("name", choices=("phishing", "image-segments", "bananas"))
    data.add_argument("--format", choices=FORMATS, default="csv")
    data.add_argument("--label", default="y")
    data.add_argument(
        "--delayed",
        action="store_true",
        help="each row as an event (id and features) and, 0 to 100 events later, its outcome "
        "(id and label): for run --join-key id (csv or jsonl)",
    )
    data.add_argument("--seed", type=int, default=0, help="seed of --delayed's delays")
    return parser


def _configure_logging(verbose: int, quiet: bool) -> None:
    level = logging.ERROR if quiet else (logging.DEBUG if verbose > 1 else logging.INFO)
    if not verbose and not quiet:
        level = logging.WARNING
    logging.basicConfig(
        level=level, format="stream-perceptron: %(levelname)s: %(message)s", stream=sys.stderr
    )


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _configure_logging(args.verbose, args.quiet)
    if hasattr(signal, "SIGUSR1") and threading.current_thread() is threading.main_thread():
        # `kill -USR1 PID`: every thread's stack on stderr (a worker that seems stuck)
        with contextlib.suppress(io.UnsupportedOperation, OSError, ValueError):
            faulthandler.register(signal.SIGUSR1, all_threads=True)  # stderr without a fd: not
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "run":
        from stream_perceptron.cli._gc import imports_without_gc

        with imports_without_gc(freeze=True):  # the modules never garbage: out of its sight
            from stream_perceptron.allocator import tune_malloc
            from stream_perceptron.cli.run import run_command

        tune_malloc()
        return run_command(args, parser)
    if args.command == "inspect":
        from stream_perceptron.cli.inspect import inspect_command

        return inspect_command(args)
    if args.command == "pull-model":
        from stream_perceptron.cli.kafka import pull_model_command

        return pull_model_command(args)
    from stream_perceptron.cli._gc import imports_without

    with imports_without("sklearn"):  # river's data sets import it when installed: 1.1 s
        from stream_perceptron.example_data import write_dataset

    if args.delayed and args.format == "libsvm":
        parser.error("--delayed needs named fields: --format csv or jsonl")
    try:
        write_dataset(args.name, args.format, sys.stdout, args.label, args.delayed, args.seed)
    except BrokenPipeError:
        return 0
    return 0
