"""`fp8lab` (the console script pip installs) and `python -m fp8lab`: runs the fp8lab program
shipped inside this package with the same arguments, in place of this process."""
import os
import sys

from . import executable


def main():
    try:
        exe = executable()
    except FileNotFoundError as e:
        sys.stderr.write("%s\n" % e)
        return 1
    os.execv(exe, [exe] + sys.argv[1:])  # does not return
    return 1


if __name__ == "__main__":
    sys.exit(main())
