"""``python -m stream_perceptron.cli``: the ``stream-perceptron`` command."""

from __future__ import annotations

import sys

from stream_perceptron.cli.main import main

sys.exit(main())
