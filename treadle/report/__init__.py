"""The comparison report of several runs (``report.md`` and its plots)."""

from treadle.report.markdown import write_comparison

__all__ = ["write_comparison"]
