"""``python -m skgpstruct``: the command line of :mod:`skgpstruct.cli`."""

import sys

from skgpstruct.cli import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m skgpstruct"))
