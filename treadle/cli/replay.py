"""``treadle run``: replay a workload on a live cluster and write what ``treadle sim``
writes. Every check of the command line and of the RM (reachable, its node count, its
policy) is made before the first submission; every job's result is written, also when the
replay times out or a job does not succeed."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from treadle.cli.cluster import (
    DEFAULT_CLUSTER_DIR,
    ClusterDirOpt,
    KeyFileOpt,
    TlsCaOpt,
    TlsCertOpt,
    TlsKeyOpt,
    UserOpt,
    identify,
)
from treadle.cli.common import (
    USAGE,
    ForceOpt,
    FormatOpt,
    LogLevelOpt,
    ManagedAmOpt,
    NodesFileOpt,
    OutOpt,
    SetOpt,
    WorkloadArg,
    check_out,
    errors,
    fail,
    load,
    num,
    progress_bars,
    say,
    tracker,
)
from treadle.cli.options import (
    LIVE_TIMEOUT_S,
    AskSetOpt,
    AsksOpt,
    EventsOpt,
    SlowdownOpt,
    TimeoutOpt,
    check_events,
)
from treadle.errors import TreadleError
from treadle.live import logs

if TYPE_CHECKING:
    from treadle.model import Workload
    from treadle.study.runner import RunOptions

RmOpt = Annotated[
    str | None,
    typer.Option(
        "--rm",
        help="The RM's host:port [default: the cluster `treadle cluster up` recorded in "
        "--cluster-dir].",
        show_default=False,
    ),
]
ExpectPolicyOpt = Annotated[
    str | None,
    typer.Option(
        "--policy",
        help="The policy the RM should run (checked with its --set values before "
        "anything else, then against the RM): a deployment's settings fail here, early.",
    ),
]
RmWaitOpt = Annotated[
    float, typer.Option("--rm-wait-s", help="Wait up to this many seconds for the RM to answer.")
]
RmAbsentOpt = Annotated[
    float,
    typer.Option(
        "--rm-absent-s",
        help="During the replay, survive the RM's absence (a restart) this many seconds.",
    ),
]
WaitNodesOpt = Annotated[
    int, typer.Option("--wait-nodes", help="Start only once the RM has this many nodes.")
]
AcceptFailuresOpt = Annotated[
    bool,
    typer.Option(
        "--accept-failures",
        help="Exit 0 even when some jobs did not succeed (failed, killed or unfinished).",
    ),
]


def run_live(
    workload: WorkloadArg,
    out_dir: OutOpt,
    rm: RmOpt = None,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    asks: AsksOpt = None,
    ask_settings: AskSetOpt = None,
    managed_am: ManagedAmOpt = False,
    timeout_s: TimeoutOpt = LIVE_TIMEOUT_S,
    slowdown: SlowdownOpt = True,
    expect_policy: ExpectPolicyOpt = None,
    settings: SetOpt = None,
    rm_wait_s: RmWaitOpt = 0.0,
    rm_absent_s: RmAbsentOpt = 120.0,
    wait_nodes: WaitNodesOpt = 0,
    events: EventsOpt = "parquet",
    log_level: LogLevelOpt = "warning",
    user: UserOpt = None,
    key_file: KeyFileOpt = None,
    tls_cert: TlsCertOpt = None,
    tls_key: TlsKeyOpt = None,
    tls_ca: TlsCaOpt = None,
    cluster_dir: ClusterDirOpt = DEFAULT_CLUSTER_DIR,
    accept_failures: AcceptFailuresOpt = False,
    force: ForceOpt = False,
) -> None:
    """Replay WORKLOAD on a live cluster (RM at --rm, else the one `treadle cluster up`
    recorded); write the files `treadle sim` does. It signs its calls as --user (or
    $TREADLE_USER), else as the driver of the cluster recorded in --cluster-dir, if that
    is the RM at --rm. It exits 1 when any job did not succeed (every job's result is
    written all the same), unless --accept-failures."""
    with errors():
        logs.configure(log_level)
        check_events(events)
        check_out(out_dir, force)  # as `treadle sim`: before the RM is asked anything
        rm = rm if rm is not None else _recorded_rm(cluster_dir)
        identify(rm, user, key_file, (tls_cert, tls_key, tls_ca), cluster_dir)
        from treadle.cluster.driver import run_async, wait_for_rm
        from treadle.registry import parse_settings
        from treadle.study.runner import RunOptions

        params = parse_settings(ask_settings or [], "--ask-set")
        _check_choices(asks, params, expect_policy, settings)
        if not rm_wait_s >= 0:
            fail(f"--rm-wait-s must be >= 0, got {rm_wait_s:g}", USAGE)
        if wait_nodes < 0:
            fail(f"--wait-nodes must be >= 0, got {wait_nodes}", USAGE)
        # An unreachable RM fails before the simulations.
        live = run_async(wait_for_rm(rm, rm_wait_s, wait_nodes))
        if expect_policy is not None and live.policy != expect_policy:
            fail(f"the RM at {rm} runs policy {live.policy!r}, not {expect_policy!r}")
        wl = load(workload, fmt, nodes_file)
        options = RunOptions(asks, params, slowdown=slowdown)
        replay_args: dict[str, Any] = dict(
            managed_am=managed_am, timeout_s=timeout_s, rm_absent_s=rm_absent_s
        )
        replay_args["rm_log"] = _recorded_rm_log(cluster_dir, rm)  # names a lost RM's cause
        s, policy = _replay(rm, wl, live.policy, options, replay_args, out_dir, events)
    say(
        f"{policy}: {s['finished']}/{s['jobs']} jobs, makespan {num(s['makespan_s'])} s, "
        f"mean JCT {num(s['mean_jct_s'])} s -> {out_dir}"
    )
    if s["finished"] < s["jobs"] and not accept_failures:
        lost = s["jobs"] - s["finished"]
        ended = f"{s['failed']} failed, {s['killed']} killed"
        fail(
            f"{lost} of {s['jobs']} jobs did not succeed ({ended}, "
            f"{lost - s['failed'] - s['killed']} unfinished); "
            f"every job's result is in {out_dir} (--accept-failures: exit 0)"
        )


def _recorded_rm(cluster_dir: Path) -> str:
    from treadle.cluster.procs import read_state

    state = read_state(cluster_dir)
    if state is None or not state.get("rm"):
        fail(f"give --rm HOST:PORT (no cluster is recorded in {cluster_dir})", USAGE)
    return str(state["rm"])


def _recorded_rm_log(cluster_dir: Path, rm: str) -> Path | None:
    """The log of the RM at ``rm`` when it is the one --cluster-dir records, else None."""
    from treadle.cluster.procs import read_state, recorded_processes

    state = read_state(cluster_dir)
    if state is None or state.get("rm") != rm:
        return None
    return next((Path(p.log) for p in recorded_processes(state) if p.name == "rm"), None)


def _check_choices(
    asks: str | None, params: dict[str, Any], expect_policy: str | None, settings: list[str] | None
) -> None:
    """Build the ask strategy and the expected policy once, so that a bad name or
    parameter fails before anything is sent."""
    from treadle.registry import build, parse_settings
    from treadle.study.runner import PolicyChoice, RunOptions, asks_for, build_policy

    if asks is not None:
        build("asks", *asks_for(None, RunOptions(asks, params)))
    if expect_policy is not None:
        expected = PolicyChoice(expect_policy, parse_settings(settings or []))
        build_policy(expected)
        build("asks", *asks_for(expected, RunOptions(asks, params)))
    elif settings:
        fail("--set needs --policy (the policy whose parameters they are)", USAGE)


def _replay(
    rm: str,
    wl: Workload,
    rm_policy: str,
    options: RunOptions,
    replay_args: dict[str, Any],
    out_dir: Path,
    events: str,
) -> tuple[dict[str, Any], str]:
    """Replay ``wl`` and write its outputs; the summary and the policy that ran. A timed
    out replay writes every job's result, then fails."""
    from treadle import metrics
    from treadle.cluster.driver import ReplayTimedOut, replay, run_async
    from treadle.metrics.summary import with_unsubmitted
    from treadle.study.runner import PolicyChoice, alone_jcts, asks_for

    # The strategy the RM's policy is designed with, unless --asks names one.
    try:
        strategy, strategy_params = asks_for(PolicyChoice(rm_policy, {}), options)
    except TreadleError:  # a policy installed on the RM only: its AMs default to greedy
        strategy, strategy_params = asks_for(None, options)
    alone = alone_jcts(wl, options) if options.slowdown else None
    timed_out: ReplayTimedOut | None = None
    with progress_bars() as progress:
        bar = tracker(progress, rm_policy or "replay", len(wl.jobs))
        run = replay(
            rm,
            wl,
            alone=alone,
            ask_strategy=strategy,
            ask_params=strategy_params,
            progress=bar,
            **replay_args,
        )
        try:
            records = run_async(run)
        except ReplayTimedOut as e:  # every job's result is written all the same
            records, timed_out = e.records, e
    policy = str(records[0].get("policy") or "unknown")
    weights = {name: u.weight for name, u in wl.users.items()}
    analyzed = metrics.analyze(records, policy=policy, user_weights=weights)
    if timed_out is not None:  # every job appears: those without records marked
        analyzed = with_unsubmitted(analyzed, timed_out.unsubmitted_rows())
        analyzed = with_unsubmitted(analyzed, timed_out.unrecorded_rows(), metrics.UNFINISHED)
    s = metrics.write_run_outputs(
        records, out_dir, policy=policy, user_weights=weights, run=analyzed, events=events
    )
    if timed_out is not None:
        fail(f"{timed_out}; every job's result written to {out_dir}")
    return dict(s), policy
