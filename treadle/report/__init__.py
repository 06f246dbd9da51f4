"""The comparison report of several runs (``report.md`` and its plots, ``report.html``).

``write_comparison`` (in ``markdown``) loads matplotlib when first used, not when the
package is imported: worker processes use ``treadle.report.series`` without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from treadle.report.markdown import write_comparison

__all__ = ["write_comparison"]


def __getattr__(name: str) -> Any:
    if name == "write_comparison":
        from treadle.report.markdown import write_comparison

        return write_comparison
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
