"""The node agent: one supervisor per node owning that node's worker processes."""
