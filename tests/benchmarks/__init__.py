"""Benchmarks, run by their own command (``python -m tests.benchmarks``), never by pytest."""
