"""``python -m perflab.io.kineto.helper JOB``: a helper process of a parallel Kineto load,
which takes chunk numbers on its standard input and answers on its standard output (see
:func:`perflab.io.kineto.load.run_helper`)."""

from __future__ import annotations

import json
import sys

from perflab.io.kineto.load import run_helper

if __name__ == "__main__":
    sys.exit(run_helper(json.loads(sys.argv[1]), sys.stdin.buffer, sys.stdout.buffer))
