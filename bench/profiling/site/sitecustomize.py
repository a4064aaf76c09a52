"""Loaded by every Python process started with this directory on PYTHONPATH (the
benchmark's client, and through the inherited environment each node's agent and worker).
It does nothing unless BENCH_TRACE_DIR is set."""

import os

if os.environ.get("BENCH_TRACE_DIR"):
    from bench.profiling import trace_hooks

    trace_hooks.install()
