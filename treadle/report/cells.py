"""The cells of the report's tables, shared by its Markdown (``markdown``) and its HTML
(``html``, ``families``): how a number, a share, a parameter or a user is written.
They stand apart so that both renderings read them from below, not from each other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The JCT rank groups of the UWFQ paper, as the summaries name them.
GROUPS = ("0-80%", "80-95%", "95-100%")


def num(v: Any, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, int):
        return str(v)
    return f"{v:.{digits}f}"


def percent(v: Any) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def param(v: Any) -> str:
    if isinstance(v, Mapping):
        return ", ".join(f"{k}={num(v[k], 6).rstrip('0').rstrip('.')}" for k in sorted(v))
    if isinstance(v, float):
        return f"{v:g}"
    return "-" if v is None else str(v)


def user_cell(u: Any) -> str:
    return "-" if not u else f"{u['user']} ({num(u['mean_jct_s'])})"


def signed(v: Any) -> str:
    return "-" if v is None else f"{v:+.2f}"
