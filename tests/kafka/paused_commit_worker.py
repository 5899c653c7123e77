"""A shared-model worker that stops itself (SIGSTOP) at a chosen point of a commit. Of the
workers started with one ``PAUSED_COMMIT_CLAIM`` file, only the first to get there stops.

``PAUSED_COMMIT_AT``:

* ``end`` (default): inside the commit of its first mixture, after the consumed offsets went to
  the transaction, before the transaction's end (EndTxn);
* ``save``: at the start of a commit (its second), before it takes the group's membership for
  the offsets; once continued, it waits ``PAUSED_COMMIT_AFTER_S`` (3 s) first, time for the
  client's heartbeat to learn that the membership was lost meanwhile.

The fault is injected into the real product and the real broker: the two methods wrapped only
note the first mixture and stop the process at that point; everything else is the command line
(``python paused_commit_worker.py run ...`` is ``stream-perceptron run ...``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from connectors.kafka.kafka_python_producer import KafkaTransactions
from connectors.kafka.librdkafka_producer import RdKafkaTransactions
from stream_perceptron.sharing.coordinator import SharedModelCoordinator
from stream_perceptron.sharing.mixer import SharedMixing

CLAIM = "PAUSED_COMMIT_CLAIM"
AT = "PAUSED_COMMIT_AT"
_made: list[int] = []
_saves: list[int] = []


def _noting(fold: Any) -> Any:
    def wrapped(self: SharedMixing) -> Any:
        mixture = fold(self)
        if mixture is not None and mixture.version >= 1:
            _made.append(mixture.version)
        return mixture

    return wrapped


def _pausing(end: Any) -> Any:
    def wrapped(self: Any, producer: Any) -> None:
        if _made and not _claimed():
            sys.stderr.write(f"PAUSED-COMMIT: stopping before EndTxn, mixture {_made[-1]}\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
            sys.stderr.write("PAUSED-COMMIT: continued\n")
            sys.stderr.flush()
        end(self, producer)

    return wrapped


def _pausing_save(save: Any) -> Any:
    def wrapped(self: SharedModelCoordinator, *args: Any) -> None:
        _saves.append(1)
        if len(_saves) == 2 and not _claimed():
            sys.stderr.write("PAUSED-COMMIT: stopping at the start of a commit\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSTOP)
            time.sleep(float(os.environ.get("PAUSED_COMMIT_AFTER_S", "3")))
            sys.stderr.write("PAUSED-COMMIT: continued\n")
            sys.stderr.flush()
        save(self, *args)

    return wrapped


def _claimed() -> bool:
    """False exactly once among the workers sharing the claim file (and never again here)."""
    try:
        os.close(os.open(os.environ[CLAIM], os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return True
    return False


if os.environ.get(AT, "end") == "save":
    SharedModelCoordinator._save = _pausing_save(SharedModelCoordinator._save)  # type: ignore[method-assign]
else:
    SharedMixing._fold = _noting(SharedMixing._fold)  # type: ignore[method-assign]
    for _cls in (KafkaTransactions, RdKafkaTransactions):
        _cls._end = _pausing(_cls._end)  # type: ignore[method-assign]

if __name__ == "__main__":
    from stream_perceptron.cli.main import main

    sys.exit(main(sys.argv[1:]))
