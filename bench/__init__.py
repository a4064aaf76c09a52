"""Skyward's benchmark suite: the Local provider against the tools a user would pick instead.

Run it with ``python bench/run.py --quick`` (CI) or ``python bench/run.py --full``; see
bench/README.md.
"""
