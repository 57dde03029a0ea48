"""``python -m perflab``: the ``perflab`` command, for environments without its script."""

import sys

from perflab.cli import main

if __name__ == "__main__":
    sys.exit(main())
