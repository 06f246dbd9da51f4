"""The HTML report's charts: matplotlib figures as base64 PNG data URIs (the page needs
no other file and no network).

Every time axis is in seconds from the run's first submission. A policy keeps one colour,
marker and line style in every chart (``policy_style``): matplotlib's tab20, its ten dark
colours first, then their light siblings drawn dashed, so 20 policies get 20 colours and
no two share colour and marker. Charts with one line per policy are overlays
with the legend beside the axes; per-policy charts (utilization, Jain's index over time,
the timeline, DP accounts) are small panels with shared axis limits, one per policy.
Figures use ``matplotlib.figure.Figure`` directly (no pyplot, no global backend state).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from matplotlib import colormaps, colors as mcolors
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from treadle.metrics import JobResult
from treadle.report.logdata import JainSeries
from treadle.report.series import plot_points

_TAB20 = colormaps["tab20"](np.arange(20))  # its 20 colours, as RGBA rows
#: tab20's dark colours (tab10), then the light ones: 20 distinct colours.
_COLOURS = tuple(mcolors.to_hex(c) for c in (*_TAB20[0::2], *_TAB20[1::2]))
_STYLES = ("-", "--", ":", "-.")
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*", "h")
_DPI = 90
PANEL_SIZE = (4.6, 2.5)
WIDE_SIZE = (9.5, 4.2)
#: Fixed margins (tight_layout would measure every label: half a panel's drawing time).
_PANEL_MARGINS = {"left": 0.15, "right": 0.97, "bottom": 0.2, "top": 0.88}
_WIDE_MARGINS = {"left": 0.08, "right": 0.78, "bottom": 0.13, "top": 0.92}


def policy_style(i: int) -> dict[str, Any]:
    """Colour, marker and line style of the ``i``-th policy: 20 colours, solid for the
    first ten (dark) and dashed for the next ten (light); beyond 20 the colours repeat with
    the next line styles. Markers (11, a spacing of a tenth of the axes) tell apart lines
    that overlap."""
    return {
        "color": _COLOURS[i % len(_COLOURS)],
        "linestyle": _STYLES[(i // 10) % len(_STYLES)],
        "marker": _MARKERS[i % len(_MARKERS)],
        "markevery": 0.1,
        "markersize": 4,
    }


def data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI)
    fig.clear()
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def seconds_axis(ax: Any, axis: str = "x", ticks: int | None = None) -> None:
    """Plain seconds on ``axis``: no offset, no scientific notation (and at most about
    ``ticks`` ticks: a panel's drawing time goes mostly to its ticks)."""
    fmt = ScalarFormatter(useOffset=False)
    fmt.set_scientific(False)
    target = ax.xaxis if axis == "x" else ax.yaxis
    target.set_major_formatter(fmt)
    if ticks is not None:
        target.set_major_locator(MaxNLocator(ticks))


def _fraction_axis(ax: Any) -> None:
    ax.set_ylim(0.0, 1.05)
    ax.set_yticks([0.0, 0.5, 1.0])


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def cdf(
    values: Mapping[str, Sequence[float]],
    order: Sequence[str],
    *,
    xlabel: str,
    title: str,
    log_x: bool | None = None,
    seconds: bool = True,
    mark: float | None = None,
) -> str:
    """One empirical CDF per policy (styles by position in ``order``); a log x axis when
    the positive values span more than two decades (or as ``log_x`` says)."""
    fig = Figure(figsize=WIDE_SIZE)
    fig.subplots_adjust(**_WIDE_MARGINS)
    ax = fig.add_subplot()
    lo, hi, plotted = math.inf, 0.0, 0
    for i, name in enumerate(order):
        xs = np.sort(np.asarray([v for v in values.get(name, ()) if v is not None], float))
        if not len(xs):
            continue
        ys = np.arange(1, len(xs) + 1) / len(xs)
        ax.step(
            np.r_[xs[0], xs],
            np.r_[0.0, ys],
            where="post",
            label=f"{name} ({len(xs)})",
            lw=1.4,
            **policy_style(i),
        )
        pos = xs[xs > 0]
        if len(pos):
            lo = min(lo, float(pos[0]))
        hi = max(hi, float(xs[-1]))
        plotted += 1
    if not plotted:
        _empty(ax, "no data")
    else:
        if log_x or (log_x is None and lo > 0 and hi / lo > 100):
            ax.set_xscale("log")
        elif seconds:
            seconds_axis(ax)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
        ax.set_ylim(0.0, 1.02)
        ax.grid(True, alpha=0.3)
        if mark is not None:
            ax.axvline(mark, color="#444444", lw=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of jobs")
    ax.set_title(title)
    return data_uri(fig)


def cdf_panel(
    name: str, values: Mapping[str, Sequence[float]], order: Sequence[str], *, xlabel: str
) -> str:
    """Policy ``name``'s empirical CDF in its own style over every other policy's in thin
    grey (shared limits): the overlay's one line, readable when 14 overlap."""
    fig = Figure(figsize=PANEL_SIZE)
    fig.subplots_adjust(**_PANEL_MARGINS)
    ax = fig.add_subplot()
    everything = [v for n in order for v in values.get(n, ()) if v is not None]
    for i, other in enumerate(order):
        xs = np.sort(np.asarray([v for v in values.get(other, ()) if v is not None], float))
        if not len(xs):
            continue
        ys = np.r_[0.0, np.arange(1, len(xs) + 1) / len(xs)]
        own = other == name
        style = {**policy_style(i), "lw": 2.0} if own else {"color": "#d9d9d9", "lw": 0.7}
        ax.step(np.r_[xs[0], xs], ys, where="post", zorder=3 if own else 1, **style)
    if name not in values or not values[name]:
        _empty(ax, "no data")
    elif everything:
        ax.set_xlim(min(everything), max(everything))
        ax.set_ylim(0.0, 1.02)
        ax.grid(True, alpha=0.3)
        seconds_axis(ax, ticks=6)
        ax.set_xlabel(xlabel)
    ax.set_title(name, fontsize="medium", loc="left")
    return data_uri(fig)


def utilization_panel(
    name: str, series: Mapping[str, Sequence[tuple[float, float]]], t_max: float
) -> str:
    """One policy's allocated fraction of each resource over time (seconds)."""
    fig = Figure(figsize=PANEL_SIZE)
    fig.subplots_adjust(**_PANEL_MARGINS)
    ax = fig.add_subplot()
    drawn = False
    for j, res in enumerate(sorted(series)):
        s = series[res]
        if not s:
            continue
        xs, ys = plot_points(s)
        t0 = s[0][0]
        ax.step(
            [x - t0 for x in xs],
            ys,
            where="post",
            lw=1.1,
            label=res,
            color=_COLOURS[j % 10],
            linestyle=_STYLES[j % 4],
        )
        drawn = True
    if drawn:
        ax.set_xlim(0.0, max(t_max, 1e-9))
        _fraction_axis(ax)
        ax.legend(loc="lower left", fontsize="x-small", ncol=3)
        ax.grid(True, alpha=0.3)
        seconds_axis(ax, ticks=6)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("allocated fraction")
    else:
        _empty(ax, "no utilization data")
    ax.set_title(name, fontsize="medium")
    return data_uri(fig)


def jain_panel(
    name: str, jain: JainSeries | None, means: tuple[Any, Any], t_max: float, style: int
) -> str:
    """Jain's index per window over users (solid) and jobs (thin), and the run's means."""
    fig = Figure(figsize=PANEL_SIZE)
    fig.subplots_adjust(**_PANEL_MARGINS)
    ax = fig.add_subplot()
    if jain is None:
        _empty(ax, "no event log")
    else:
        n = len(jain.users)
        xs = np.arange(n + 1) * jain.window_s
        colour = policy_style(style)["color"]
        ax.stairs(jain.users, xs, baseline=None, color=colour, lw=1.5, label="users")
        ax.stairs(
            jain.jobs, xs, baseline=None, color="#555555", lw=0.8, linestyle="--", label="jobs"
        )
        for mean, ls in zip(means, ("-", "--"), strict=True):
            if isinstance(mean, int | float):
                ax.axhline(mean, color="#999999", lw=0.7, linestyle=ls)
        ax.set_xlim(0.0, max(t_max, 1e-9))
        _fraction_axis(ax)
        ax.legend(loc="lower left", fontsize="x-small", ncol=2)
        ax.grid(True, alpha=0.3)
        seconds_axis(ax, ticks=6)
        ax.set_xlabel(f"time (s), {jain.window_s:g} s windows")
        ax.set_ylabel("Jain's index")
    ax.set_title(name, fontsize="medium")
    return data_uri(fig)


def gantt_panel(name: str, jobs: Sequence[JobResult], queues: Sequence[str], t_max: float) -> str:
    """Each job a row in submission order: waiting (grey) then running (its queue's
    colour; failed or killed: red, with a cross at its end); unfinished jobs run to the
    panel's end."""
    height = max(PANEL_SIZE[1], min(8.0, 1.2 + 0.06 * len(jobs)))
    fig = Figure(figsize=(PANEL_SIZE[0], height))
    fig.subplots_adjust(left=0.15, right=0.97, bottom=0.5 / height, top=1 - 0.3 / height)
    ax = fig.add_subplot()
    if not jobs:
        _empty(ax, "no jobs")
    else:
        t0 = min(j.submit_s for j in jobs)
        n = len(jobs)
        lw = max(0.4, min(6.0, 260.0 / n))
        y = np.arange(n)
        sub = np.array([j.submit_s - t0 for j in jobs])
        start = np.array([np.nan if j.start_s is None else j.start_s - t0 for j in jobs])
        end = np.array([t_max if j.finish_s is None else j.finish_s - t0 for j in jobs])
        waited = np.where(np.isnan(start), end, start)
        ax.hlines(y, sub, waited, color="#cccccc", lw=lw)
        colour_of = {q: _COLOURS[i % 10] for i, q in enumerate(queues)}
        ok = [j.finished for j in jobs]
        colours = [
            colour_of.get(j.queue, "#333333") if f else "#d62728"
            for j, f in zip(jobs, ok, strict=True)
        ]
        ran = ~np.isnan(start)
        ax.hlines(y[ran], start[ran], end[ran], color=np.array(colours, dtype=object)[ran], lw=lw)
        bad = np.array([not f and j.finish_s is not None for j, f in zip(jobs, ok, strict=True)])
        if bad.any():
            ax.plot(end[bad], y[bad], "x", color="#d62728", ms=4)
        if 1 < len(queues) <= 10:
            for q, c in colour_of.items():
                ax.plot([], [], color=c, lw=3, label=q)
            ax.legend(
                loc="lower right",
                bbox_to_anchor=(1.0, 1.0),
                fontsize="x-small",
                ncol=len(queues),
                frameon=False,
                handlelength=1.0,
            )
        ax.set_xlim(0.0, max(t_max, 1e-9))
        ax.set_ylim(n - 0.5, -0.5)
        seconds_axis(ax, ticks=6)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("job (by submission)")
        ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(name, fontsize="medium", loc="left")
    return data_uri(fig)


def bars(
    values: Mapping[str, Mapping[str, float | None]],
    order: Sequence[str],
    keys: Sequence[tuple[str, str]],
    title: str,
) -> str:
    """Grouped horizontal bars: per policy, one bar per (key, label)."""
    names = [n for n in order if n in values]
    height = max(2.5, 0.8 + 0.2 * len(names) * len(keys))
    fig = Figure(figsize=(WIDE_SIZE[0] * 0.8, height))
    fig.subplots_adjust(left=0.16, right=0.97, bottom=0.4 / height, top=1 - 0.35 / height)
    ax = fig.add_subplot()
    h = 0.8 / max(1, len(keys))
    for k, (key, label) in enumerate(keys):
        ys = np.arange(len(names)) + k * h
        xs = [values[n].get(key) or 0.0 for n in names]
        ax.barh(ys, xs, height=h, label=label, color=_COLOURS[k % 10])
    ax.set_yticks(np.arange(len(names)) + h * (len(keys) - 1) / 2, names)
    ax.invert_yaxis()
    ax.legend(loc="lower right", fontsize="small")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(title)
    return data_uri(fig)


def lines_panel(
    name: str,
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    ylabel: str,
    t_max: float,
    step: bool = True,
    marker: str | None = None,
) -> str:
    """One policy's series per key (queues): ``{key: (seconds, values)}``."""
    fig = Figure(figsize=PANEL_SIZE)
    fig.subplots_adjust(**_PANEL_MARGINS)
    ax = fig.add_subplot()
    if not series:
        _empty(ax, "no data")
    for j, key in enumerate(sorted(series)):
        xs, ys = series[key]
        colour = _COLOURS[j % 10]
        if marker:
            ax.plot(xs, ys, marker, ms=3, alpha=0.8, color=colour, label=key)
        elif step:
            ax.step(xs, ys, where="post", lw=1.2, linestyle=_STYLES[j % 4], color=colour, label=key)
        else:
            ax.plot(xs, ys, lw=1.2, linestyle=_STYLES[j % 4], color=colour, label=key)
    if series:
        ax.set_xlim(0.0, max(t_max, 1e-9))
        ax.legend(loc="best", fontsize="x-small", ncol=2)
        ax.grid(True, alpha=0.3)
        seconds_axis(ax, ticks=6)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(ylabel)
    ax.set_title(name, fontsize="medium")
    return data_uri(fig)
