import sys

from .cli import main

# guarded: process-pool workers import this module again (as __mp_main__), and must not
# run the command a second time
if __name__ == "__main__":
    sys.exit(main())
