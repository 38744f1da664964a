"""``python -m citelock``: the same command line as ``citelock``."""

from citelock.cli import main

main()
