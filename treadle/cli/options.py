"""The options the simulating and replaying commands share (``sim``, ``compare``, ``run``),
with the checks of their values."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

import typer

from treadle.cli.common import USAGE, fail

if TYPE_CHECKING:
    from treadle.study.runner import RunOptions

AsksOpt = Annotated[
    str | None,
    typer.Option(
        "--asks",
        help="AM ask strategy [default: each policy's own: altruistic for carbyne, else greedy].",
        show_default=False,
    ),
]
AskSetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--ask-set", help="Ask-strategy parameter key=value, or STRATEGY.key=value for one."
    ),
]
SlowdownOpt = Annotated[
    bool,
    typer.Option(
        "--slowdown/--no-slowdown",
        help="Simulate each job alone on the empty cluster for slowdown figures.",
    ),
]
NoCacheOpt = Annotated[
    bool,
    typer.Option(
        "--no-cache",
        help="Simulate the alone references again; neither read nor write the on-disk cache "
        "($TREADLE_CACHE_DIR, else ~/.cache/treadle).",
    ),
]
EventsOpt = Annotated[
    str,
    typer.Option(
        "--events",
        help="The event log's file: parquet (events.parquet, written as the run goes), "
        "jsonl (events.jsonl, one JSON object per line in time order) or none.",
    ),
]


def check_events(events: str) -> str:
    if events not in ("parquet", "jsonl", "none"):
        fail(f"unknown --events {events!r}; use parquet, jsonl or none", USAGE)
    return events


LIVE_TIMEOUT_S = 3600.0
NmContainersOpt = Annotated[
    int | None,
    typer.Option(
        "--nm-containers",
        help="Docker: NM host containers to spread nodes over [default: 2, or 1 for one node].",
        show_default=False,
    ),
]
ImageOpt = Annotated[
    str,
    typer.Option("--image", help="Docker: the treadle image (deploy/build-image.sh builds it)."),
]
PhaseSeedOpt = Annotated[
    int,
    typer.Option(
        "--phase-seed",
        min=0,
        help="Simulator: draw the nodes' heartbeat phases with this seed (with the "
        "workload's). Results move a little with the phases, as a live cluster's do; vary "
        "it to see that spread.",
    ),
]
WorkersOpt = Annotated[
    int | None,
    typer.Option(
        "--workers",
        help="Simulator: run up to N policies at once, each in a process of its own "
        "[default: the machine's cores]; 1 runs them one after another in this process. "
        "Live modes run one policy at a time whatever N is (a cluster uses the machine).",
        show_default=False,
    ),
]
PartitionOpt = Annotated[
    str | None,
    typer.Option(
        "--partition",
        help="Runtime partitioning (the UWFQ paper's -P): cut every stage into equal tasks of "
        "about ATR seconds, max(N_min, ceil(work / ATR)) of them (N_min: the cluster's vcores "
        "per task's vcores), the same for every policy; or 'loopcustom' for the authors' rule.",
        metavar="ATR",
        show_default=False,
    ),
]


def partitioning(partition: str | None) -> Any:
    """``--partition``'s value as a ``Partitioning`` (None without it); a bad one fails."""
    if partition is None:
        return None
    from treadle.workload.partition import parse_partition

    try:
        return parse_partition(partition)
    except ValueError as e:
        fail(str(e), USAGE)


def partitioned(wl: Any, p: Any) -> Any:
    """``wl`` partitioned by ``p`` (unchanged when None)."""
    from treadle.workload.partition import partition_workload

    return wl if p is None else partition_workload(wl, p)


SchedulingOpt = Annotated[
    str | None,
    typer.Option(
        "--scheduling",
        help="heartbeat or event: overrides the workload's cluster.scheduling. event "
        "also places asks and calls AMs back at the instant something changes, live too "
        "(YARN's asynchronous scheduling and out-of-band heartbeats).",
        metavar="MODE",
        show_default=False,
    ),
]


def scheduled(wl: Any, scheduling: str | None) -> Any:
    """``wl`` with ``--scheduling`` in its cluster (unchanged when None); a bad one fails."""
    if scheduling is None or scheduling == wl.cluster.scheduling:
        return wl
    import dataclasses

    from treadle.model import SCHEDULING_MODES

    if scheduling not in SCHEDULING_MODES:
        fail(
            f"--scheduling must be one of {', '.join(SCHEDULING_MODES)}, got {scheduling!r}",
            USAGE,
        )
    cluster = dataclasses.replace(wl.cluster, scheduling=scheduling)
    return dataclasses.replace(wl, cluster=cluster)


TimingsOpt = Annotated[
    bool,
    typer.Option(
        "--timings",
        help="Print on stderr where the wall and CPU time went (setup, load, alone references, "
        "simulate, metrics, write, other) and the peak RSS, as one line of JSON.",
    ),
]
ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="Simulator: send the runs to the Dask scheduler at tcp://HOST:PORT (its workers "
        "need this treadle installed; the files come back here). Needs treadle[dask].",
        show_default=False,
    ),
]
TimeoutOpt = Annotated[
    float,
    typer.Option("--timeout-s", help="Live replays: give up after this many wall seconds."),
]


NodesOpt = Annotated[
    int | None,
    typer.Option(
        "--nodes",
        help="Run on N nodes: the workload's first N, or its nodes and copies of them in turn.",
        metavar="N",
        show_default=False,
    ),
]
NodesScaleOpt = Annotated[
    float | None,
    typer.Option(
        "--nodes-scale",
        help="Run on round(nodes x X) nodes (as --nodes).",
        metavar="X",
        show_default=False,
    ),
]
LoadOpt = Annotated[
    float | None,
    typer.Option(
        "--load",
        help="Stretch or compress the submission times to an offered load of X: the busiest "
        "resource's demand / (its capacity x the arrival span); after --nodes.",
        metavar="X",
        show_default=False,
    ),
]


#: ``--nodes``, ``--nodes-scale`` and ``--load`` as given (checked by ``check_scaling``).
Scaling = tuple[int | None, float | None, float | None]


def check_scaling(nodes: int | None, nodes_scale: float | None, load: float | None) -> Scaling:
    """The scaling flags' values, checked before the workload is loaded."""
    from treadle.workload import scaling
    from treadle.workload.schema import MAX_NODES

    if nodes is not None and nodes_scale is not None:
        fail("give --nodes or --nodes-scale, not both", USAGE)
    if nodes is not None and not 1 <= nodes <= MAX_NODES:
        fail(f"--nodes must be between 1 and {MAX_NODES}, got {nodes}", USAGE)
    if nodes_scale is not None and not 0 < nodes_scale <= scaling.MAX_NODES_SCALE:
        fail(
            f"--nodes-scale must be > 0 and <= {scaling.MAX_NODES_SCALE:g}, got {nodes_scale}",
            USAGE,
        )
    if load is not None and not 0 < load <= scaling.MAX_LOAD:
        fail(f"--load must be > 0 and <= {scaling.MAX_LOAD:g}, got {load}", USAGE)
    return nodes, nodes_scale, load


def scaled(wl: Any, options: RunOptions, knobs: Scaling) -> tuple[Any, RunOptions]:
    """``wl`` as --nodes or --nodes-scale, then --load, make it, and ``options`` recording
    what was done (``RunOptions.scaling``; unchanged when no flag is given)."""
    if knobs == (None, None, None):
        return wl, options
    from treadle.workload import scaling

    wl, record = scaling.scaled(wl, *knobs)
    return wl, dataclasses.replace(options, scaling=record)
