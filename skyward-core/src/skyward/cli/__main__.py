"""``python -m skyward.cli``: the same as the ``skyward`` console script."""

from skyward.cli.app import main

main()
