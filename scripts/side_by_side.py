"""`make run`'s last lines: the prequential accuracy of each run's --summary-json, side by side.

Usage: side_by_side.py TITLE LABEL=SUMMARY.json [LABEL=SUMMARY.json ...]
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str]) -> int:
    title, runs = argv[0], [arg.split("=", 1) for arg in argv[1:]]
    summaries = [(label, json.load(open(path, encoding="utf-8"))) for label, path in runs]
    learned = summaries[0][1]["learned"]
    print(f"\n{title}: prequential accuracy, one pass over {learned} examples")
    width = max(len(label) for label, _ in summaries)
    for label, s in summaries:
        print(f"  {label:<{width}}  {100 * s['accuracy']:6.2f}%  ({s['mistakes']} mistakes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
