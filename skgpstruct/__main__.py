"""``python -m skgpstruct``: see :mod:`skgpstruct.cli`."""

import sys

from skgpstruct.cli import main

if __name__ == "__main__":
    sys.exit(main())
