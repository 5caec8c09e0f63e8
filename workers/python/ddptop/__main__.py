"""python -m ddptop SCRIPT.py ARGS: run a torch script watched and steered by ddptop (runner.py)."""
import sys

from .runner import main

sys.exit(main(sys.argv[1:]))
