"""Command line: ``stream-perceptron``."""

from __future__ import annotations

import argparse
import sys

from stream_perceptron import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="stream-perceptron", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.parse_args(argv)
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
