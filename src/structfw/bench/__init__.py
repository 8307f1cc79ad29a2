"""Benchmarks reproducing the papers (used by `structfw bench` and benchmarks/)."""
