"""Tests of the skyward-aws provider against moto (marked cloud)."""
