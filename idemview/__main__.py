"""``python -m idemview``: the same command line as the ``idemview`` script."""

import sys

from idemview.cli import main

if __name__ == "__main__":
    sys.exit(main())
