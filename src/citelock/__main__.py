"""``python -m citelock``: the same command line as ``citelock``."""

from citelock._cli import main

main()
