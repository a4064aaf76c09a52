"""Client <-> agent transport: ZeroMQ ROUTER/DEALER, CURVE across machines."""
