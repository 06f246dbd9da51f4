"""The options the simulating and replaying commands share (``sim``, ``compare``, ``run``),
with the checks of their values."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from treadle.cli.common import USAGE, fail

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
        "(simulator only) also places asks and calls AMs back at the instant something "
        "changes (YARN's asynchronous scheduling and out-of-band heartbeats).",
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
