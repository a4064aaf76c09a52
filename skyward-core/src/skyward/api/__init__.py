"""The user-facing programming model: lazy computations and the pools that run them."""
