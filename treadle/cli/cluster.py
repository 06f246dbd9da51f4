"""``treadle cluster``: start, inspect and stop a detached local cluster; an RM's config."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from treadle.cli.common import (
    DilationOpt,
    FormatOpt,
    LogLevelOpt,
    ManagedAmOpt,
    NmProcessesOpt,
    NodesFileOpt,
    SetOpt,
    WorkloadArg,
    err,
    errors,
    fail,
    load,
    out,
    say,
)
from treadle.cli.queues import QueuesOpt, StrictOpt, with_queues
from treadle.errors import TreadleError
from treadle.live import logs

if TYPE_CHECKING:
    from treadle.live.rpcutil import TlsFiles

cluster_app = typer.Typer(
    no_args_is_help=True,
    help="Start, inspect and stop a detached local cluster; write an RM's configuration.",
)

DirOpt = Annotated[
    Path, typer.Option("--dir", help="Directory of the cluster's state file and logs.")
]
DEFAULT_CLUSTER_DIR = Path(".treadle/cluster")
ClusterDirOpt = Annotated[
    Path,
    typer.Option("--cluster-dir", help="A `treadle cluster up` directory whose driver key to use."),
]
UserOpt = Annotated[
    str | None, typer.Option("--user", help="Sign calls as this user (or $TREADLE_USER).")
]
KeyFileOpt = Annotated[
    str | None,
    typer.Option("--key-file", help="That user's key (or $TREADLE_KEY_FILE, $TREADLE_KEY)."),
]
TlsCertOpt = Annotated[str | None, typer.Option("--tls-cert", help="TLS certificate (PEM).")]
TlsKeyOpt = Annotated[str | None, typer.Option("--tls-key", help="Its private key (PEM).")]
TlsCaOpt = Annotated[str | None, typer.Option("--tls-ca", help="The cluster's CA (PEM).")]


def tls_files(paths: tuple[str | None, str | None, str | None]) -> TlsFiles | None:
    if not any(paths):
        return None
    if not all(paths):
        fail("--tls-cert, --tls-key and --tls-ca go together", 2)
    from treadle.live.rpcutil import TlsFiles

    cert, key, ca = (str(p) for p in paths)
    return TlsFiles(cert, key, ca)


def identify(
    rm: str,
    user: str | None,
    key_file: str | None,
    tls: tuple[str | None, str | None, str | None],
    cluster_dir: Path,
) -> None:
    """Make this process's channels to ``rm`` signed as the user chosen by
    treadle.cluster.secrets.client_peer (flags, environment, or the recorded cluster)."""
    from treadle.cluster.secrets import client_peer
    from treadle.live.rpcutil import remember_peer

    peer = client_peer(
        rm,
        user=user,
        key_file=key_file,
        tls=tls_files(tls),
        cluster_dir=cluster_dir,
        env=os.environ,
    )
    remember_peer(rm, peer)


ClusterNodesOpt = Annotated[
    int | None, typer.Option("--nodes", help="Number of nodes (default: the workload's).")
]
ResourcesOpt = Annotated[
    str, typer.Option("--resources", help="Each node's capacity as name=amount,...")
]
RackOpt = Annotated[str, typer.Option("--rack", help="Rack of the --nodes nodes.")]
HeartbeatOpt = Annotated[
    float | None,
    typer.Option("--heartbeat-s", help="NM heartbeat (emulated s; default: workload's or 1)."),
]
LikeWorkloadOpt = Annotated[
    str | None,
    typer.Option("--workload", help="Workload whose queues and users (and nodes) to use."),
]
HttpPortOpt = Annotated[
    int,
    typer.Option(
        "--http-port",
        help="The RM's HTTP port: YARN REST API, /metrics, live page (0: any free port).",
    ),
]
NoHttpOpt = Annotated[bool, typer.Option("--no-http", help="No HTTP port on the RM.")]
MaxRestartsOpt = Annotated[
    int,
    typer.Option(
        "--max-restarts",
        help="Restarts allowed per role within --restart-window-s; one more death and "
        "the cluster is declared failed (0: no supervision).",
    ),
]
HostOpt = Annotated[
    str,
    typer.Option(
        "--host",
        help="Address the RM listens on, gRPC and HTTP (127.0.0.1: this "
        "machine only; 0.0.0.0: every interface).",
    ),
]
InsecureOpt = Annotated[
    bool,
    typer.Option(
        "--insecure",
        help="YARN's simple mode: nothing signed, ?user.name= names the REST caller (for "
        "trying YARN clients and curl on this machine; --host widens it).",
    ),
]
RestartWindowOpt = Annotated[
    float, typer.Option("--restart-window-s", help="The restart budget's window (wall s).")
]


@cluster_app.command("up")
def cluster_up(
    policy: Annotated[str, typer.Option("--policy", help="Policy name (see `treadle policies`).")],
    nodes: ClusterNodesOpt = None,
    settings: SetOpt = None,
    dilation: DilationOpt = 10.0,
    resources: ResourcesOpt = "vcores=8,memory_mb=16384",
    rack: RackOpt = "default-rack",
    heartbeat_s: HeartbeatOpt = None,
    workload: LikeWorkloadOpt = None,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    nm_processes: NmProcessesOpt = 1,
    managed_am: ManagedAmOpt = False,
    cluster_dir: DirOpt = DEFAULT_CLUSTER_DIR,
    log_level: LogLevelOpt = "warning",
    tls_cert: TlsCertOpt = None,
    tls_key: TlsKeyOpt = None,
    tls_ca: TlsCaOpt = None,
    http_port: HttpPortOpt = 0,
    no_http: NoHttpOpt = False,
    max_restarts: MaxRestartsOpt = 3,
    restart_window_s: RestartWindowOpt = 60.0,
    queues_file: QueuesOpt = None,
    strict: StrictOpt = False,
    insecure: InsecureOpt = False,
    host: HostOpt = "127.0.0.1",
) -> None:
    """Start a local cluster that keeps running after this command; print the RM address.
    Its secrets are made fresh in --dir/secrets; `treadle run --rm ADDR` from this
    directory signs its calls with them (see docs/security.md); --insecure runs YARN's
    simple mode instead (docs/http-api.md). A supervisor process
    restarts a role that dies (the RM from its store, on its address; see docs/emulation.md,
    Supervision)."""
    with errors():
        logs.configure(log_level)
        from treadle.cluster.commands import cluster_workload
        from treadle.cluster.driver import run_async
        from treadle.cluster.local import LocalCluster
        from treadle.registry import parse_settings

        params = parse_settings(settings or [])
        like = load(workload, fmt, nodes_file) if workload else None
        specs = _cluster_nodes(nodes, resources, rack, like)
        hb = heartbeat_s or (like.cluster.heartbeat_s if like is not None else 1.0)
        tls = tls_files((tls_cert, tls_key, tls_ca))
        if not 0 <= http_port <= 65535:
            fail(f"--http-port must be between 0 and 65535, got {http_port}", 2)
        if max_restarts < 0:
            fail(f"--max-restarts must be >= 0, got {max_restarts}", 2)
        if not restart_window_s > 0:
            fail(f"--restart-window-s must be > 0, got {restart_window_s:g}", 2)
        cluster = LocalCluster(
            with_queues(cluster_workload(specs, hb, like), queues_file, strict),
            policy,
            params,
            workdir=cluster_dir,
            dilation=dilation,
            nm_processes=nm_processes,
            managed_am=managed_am,
            detached=True,
            tls=tls,
            http_port=None if no_http else http_port,
            supervise=max_restarts > 0,
            max_restarts=max_restarts,
            restart_window_s=restart_window_s,
            insecure=insecure,
            rm_host=host,
        )
        if insecure:
            _warn_insecure(host)
        address = run_async(cluster.start())
    say(address)
    web = f"; web (REST API, /metrics, live page) at {cluster.http_url}" if cluster.http_url else ""
    err.print(
        f"cluster up: {len(specs)} nodes, policy {policy}, dilation {dilation:g}{web}; state in "
        f"{cluster_dir}; stop it with: treadle cluster down --dir {cluster_dir}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _warn_insecure(host: str) -> None:
    """The one line ``cluster up --insecure`` says about it, on stderr."""
    only = " only" if host == "127.0.0.1" else ""
    err.print(
        "treadle: warning: --insecure: simple mode, every call unauthenticated "
        f"(?user.name= is trusted as sent); the RM listens on {host}{only}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )


def _cluster_nodes(nodes: int | None, resources: str, rack: str, like: Any) -> list[Any]:
    """The nodes of ``cluster up``: --nodes of --resources on --rack, else the workload's."""
    from treadle.cluster.commands import parse_node_resources
    from treadle.model import NodeSpec

    if nodes is not None:
        if nodes < 1:
            fail(f"--nodes must be >= 1, got {nodes}", 2)
        res = parse_node_resources(resources, "--resources")
        return [NodeSpec(f"node{i}", res, rack) for i in range(1, nodes + 1)]
    if like is not None:
        return list(like.cluster.nodes)
    fail("give --nodes N (and --resources) or --workload WL for the cluster's nodes", 2)


@cluster_app.command("secrets")
def cluster_secrets(
    directory: Annotated[Path, typer.Argument(help="Where to write acl, node-secret and keys.")],
) -> None:
    """Write a deployment's secrets unless DIR holds them already: the ACL (admins
    `treadle` and `am-host`), the node secret and the two keys. Each comes from
    $TREADLE_NODE_SECRET, $TREADLE_ADMIN_KEY, $TREADLE_AM_HOST_KEY (or the file named by
    the same variable with _FILE, e.g. a Docker secret) or is made fresh."""
    with errors():
        from treadle.cluster.secrets import write_if_missing

        wrote = write_if_missing(directory, os.environ)
    say(f"{'wrote' if wrote else 'kept'} the cluster secrets in {directory}")


@cluster_app.command("add-user")
def cluster_add_user(
    user: Annotated[str, typer.Argument(help="The user's name (its queue under dp).")],
    role: Annotated[str, typer.Option("--role", help="user or admin.")] = "user",
    cluster_dir: DirOpt = DEFAULT_CLUSTER_DIR,
) -> None:
    """Give USER a key on the cluster recorded in --dir: writes USER.key in its secrets
    directory (replacing a stale one, left by an earlier cluster in the same --dir) and
    adds USER to the RM's ACL (reloaded on the RM's next call). Prints the key file's
    path, for --key-file or $TREADLE_KEY_FILE."""
    with errors():
        from treadle.cluster.secrets import add_user, cluster_secrets_dir

        key_path, stale = add_user(cluster_secrets_dir(cluster_dir), user, role)
    say(str(key_path))
    note = " (it replaced a stale key file, of a user this cluster's ACL did not list)"
    err.print(
        f"{user} ({role}) signs its calls with {key_path}{note if stale else ''}",
        markup=False,
        highlight=False,
    )


@cluster_app.command("status")
def cluster_status(
    cluster_dir: DirOpt = DEFAULT_CLUSTER_DIR,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Show the cluster recorded in --dir: its processes (with the lag each last logged)
    and, if it runs, its RM's view."""
    with errors():
        from treadle.cluster.driver import probe, run_async
        from treadle.cluster.procs import (
            lag_summary,
            pid_alive,
            read_state,
            recorded_processes,
            recorded_supervisor,
        )

        state = read_state(cluster_dir)
        if state is None:
            fail(f"no cluster is recorded in {cluster_dir}")
        procs = recorded_processes(state)
        alive = {p.name: pid_alive(p.pid, p.started) for p in procs}
        sup = recorded_supervisor(state)
        supervisor = (
            None if sup is None else {"pid": sup.pid, "alive": pid_alive(sup.pid, sup.started)}
        )
        metrics_: dict[str, Any] | None = None
        if alive.get("rm"):
            identify(str(state.get("rm")), None, None, (None, None, None), cluster_dir)
            try:
                m = run_async(probe(str(state.get("rm")), timeout_s=3.0))
                metrics_ = {
                    "nodes": m.nodes,
                    "lost_nodes": m.lost_nodes,
                    "running_apps": m.running_apps,
                    "finished_apps": m.finished_apps,
                    "now_s": round(m.now_s, 3),
                }
            except TreadleError:
                metrics_ = None
    if as_json:
        roles = {p.name: {"pid": p.pid, "alive": alive[p.name], "restarts": p.restarts}
                 for p in procs}  # fmt: skip
        data = dict(state, alive=alive, roles=roles, supervisor=supervisor, rm_metrics=metrics_)
        out.print_json(json.dumps(data, default=str))
        return
    running = sum(alive.values())
    say(
        f"rm {state.get('rm')}  policy {state.get('policy')}  dilation {state.get('dilation')}  "
        f"nodes {state.get('nodes')}  ({running}/{len(procs)} processes running)"
    )
    if state.get("failed"):
        say(f"  FAILED: {state['failed']}")
    if supervisor is not None:
        up = "running" if supervisor["alive"] else "exited"
        say(f"  supervisor pid {supervisor['pid']} {up}  budget {state.get('budget')}")
    if state.get("http"):
        say(f"  web    {state.get('http')}  (YARN REST API /ws/v1/cluster, /metrics, live page)")
    for p in procs:
        again = f"  restarts {p.restarts}" if p.restarts else ""
        say(
            f"  {p.name:<6} pid {p.pid:<8} {'running' if alive[p.name] else 'exited'}{again}  "
            f"{p.log}"
        )
        lag = lag_summary(p.log)  # the last one it logged (every few seconds, and on exit)
        if lag is not None:
            timer, queue = lag.get("timer_late_s") or {}, lag.get("rpc_queue_s") or {}
            say(
                f"         lag (emulated s): timer lateness p99 {timer.get('p99', 0):.3g} "
                f"max {timer.get('max', 0):.3g}; RPC queueing p99 {queue.get('p99', 0):.3g} "
                f"max {queue.get('max', 0):.3g}; peak CPU demand "
                f"{lag.get('peak_demand', 0):.0%}"
            )
    if metrics_ is not None:
        say(
            f"  rm view: {metrics_['nodes']} nodes up, {metrics_['lost_nodes']} lost, "
            f"{metrics_['running_apps']} apps running, {metrics_['finished_apps']} finished, "
            f"t={metrics_['now_s']:.1f} s"
        )


@cluster_app.command("down")
def cluster_down(cluster_dir: DirOpt = DEFAULT_CLUSTER_DIR) -> None:
    """Stop the cluster recorded in --dir (SIGTERM, then SIGKILL) and remove its state."""
    with errors():
        from treadle.cluster.procs import stop_recorded

        state = stop_recorded(cluster_dir)
    say(f"stopped the cluster in {cluster_dir} (rm was at {state.get('rm')})")


@cluster_app.command("config")
def cluster_config(
    workload: WorkloadArg,
    fmt: FormatOpt = None,
    nodes_file: NodesFileOpt = None,
    out_file: Annotated[
        Path | None, typer.Option("--out", help="Write it to this file (default: stdout).")
    ] = None,
) -> None:
    """Print WORKLOAD's queues, users and heartbeat as an RM configuration file (the
    `python -m rm --config FILE` that a cluster of WORKLOAD's shape is given)."""
    with errors():
        from treadle.cluster.config import rm_config_for

        wl = load(workload, fmt, nodes_file)
        text = rm_config_for(wl, f"RM configuration of workload {wl.name!r}")
        if out_file is not None:
            out_file.write_text(text, encoding="utf-8")
    if out_file is None:
        print(text, end="")
