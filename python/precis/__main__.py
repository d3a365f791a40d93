"""python -m precis ...: the precis command line (the same C code, the same exit codes)."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
