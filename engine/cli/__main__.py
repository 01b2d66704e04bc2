"""``python -m engine.cli`` runs the command line."""

import sys

from engine.cli.app import main

if __name__ == "__main__":
    sys.exit(main())
