"""The bundle's entry script: the same command line as the ``idemview`` console script."""

import sys

from idemview.cli import main

if __name__ == "__main__":
    sys.exit(main())
