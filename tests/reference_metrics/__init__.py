"""The metrics as they were before they became array code (one Python pass per record),
kept only as the reference that tests/unit/test_metrics_equivalence.py compares
``treadle.metrics`` with, on the golden logs and on random ones."""
