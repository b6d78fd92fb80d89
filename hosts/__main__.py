"""`python -m hosts ROLE ...`: every host process (hosts.roles)."""
import sys

from hosts.roles import main

if __name__ == "__main__":
    sys.exit(main())
