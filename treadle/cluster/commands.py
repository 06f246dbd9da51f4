"""What each role of a cluster runs: command lines, node lists, and the settings checks.

Shared by local processes and containers: the RM, NM host and AM host command lines, the
``--nodes-json`` file of an NM host, how nodes are split over NM hosts, and every check a
cluster makes before it starts anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from treadle.cluster.secrets import ACL_FILE, AM_HOST_KEY_FILE, AM_HOST_USER, NODE_SECRET_FILE
from treadle.errors import InputError
from treadle.model import ClusterSpec, NodeSpec, Workload
from treadle.registry import build
from treadle.resources import Resources

DEFAULT_EXPIRY_INTERVALS = 10
DEFAULT_MAX_AM_ATTEMPTS = 2


def parse_node_resources(text: str, where: str) -> Resources:
    """``vcores=8,memory_mb=16384`` as a resource vector (a node's capacity)."""
    amounts: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep:
            raise InputError(where, None, f"expected name=amount, got {part!r}")
        try:
            amounts[name.strip()] = float(value)
        except ValueError:
            raise InputError(where, name.strip(), f"not a number: {value!r}") from None
    try:
        res = Resources.parse(amounts, where)
    except ValueError as e:
        raise InputError(where, None, str(e)) from None
    if res.is_zero():
        raise InputError(where, None, "a node needs some resources")
    return res


def cluster_workload(
    nodes: Iterable[NodeSpec], heartbeat_s: float, like: Workload | None = None
) -> Workload:
    """A job-less workload of ``nodes`` carrying ``like``'s queues and users (for a
    cluster started without a workload to replay: ``treadle cluster up``)."""
    cluster = ClusterSpec(tuple(nodes), heartbeat_s)
    if like is None:
        return Workload("cluster", cluster, ())
    return Workload(like.name, cluster, (), like.queues, like.users, like.seed)


def split_nodes(nodes: Sequence[NodeSpec], parts: int) -> list[list[NodeSpec]]:
    """``nodes`` in ``parts`` contiguous chunks whose sizes differ by at most one."""
    q, r = divmod(len(nodes), parts)
    out, i = [], 0
    for k in range(parts):
        n = q + (1 if k < r else 0)
        out.append(list(nodes[i : i + n]))
        i += n
    return out


def nodes_json(nodes: Iterable[NodeSpec]) -> str:
    """The ``--nodes-json`` file of an NM host process: exactly these nodes."""
    rows = [
        {"node_id": n.node_id, "resources": n.resources.to_dict(), "rack": n.rack} for n in nodes
    ]
    return json.dumps(rows, indent=1) + "\n"


def am_poll_s(heartbeat_s: float, dilation: float) -> float:
    """Wall seconds between the AM host's polls for new applications: a quarter of a
    heartbeat, so that an AM starts about as soon as in the simulator (where it registers
    at submission)."""
    return min(0.2, max(0.005, heartbeat_s / dilation / 4))


def _setting(value: Any) -> str:
    # The RM reads --set values as YAML scalars; JSON is YAML and keeps the type.
    return json.dumps(value)


def rm_command(
    python: str,
    policy: str,
    params: Mapping[str, Any],
    *,
    listen: str,
    dilation: float,
    config: str,
    events: str,
    heartbeat_s: float,
    am_interval_s: float,
    expiry_intervals: int,
    max_am_attempts: int,
    log_level: str,
    secrets: str | None,
    tls: Sequence[str] = (),
    port_file: str | None = None,
    advertise: str | None = None,
    http_port: int | None = None,
    http_port_file: str | None = None,
    state_dir: str | None = None,
    event: bool = False,
) -> list[str]:
    """``event``: ``cluster: {scheduling: event}`` (asks placed after each Allocate too);
    ``secrets``: the directory holding the ACL and node secret (treadle.cluster.secrets;
    None: an RM in YARN's simple mode, ``--insecure``);
    ``tls``: certificate, key and CA paths, or nothing; ``http_port``: the RM's HTTP port
    (REST API, metrics, live page; 0: any free one, None: none); ``state_dir``: the RM's
    state store (a restarted RM reloads it)."""
    return [
        python, "-m", "rm",
        "--policy", policy,
        *(a for k, v in params.items() for a in ("--set", f"{k}={_setting(v)}")),
        "--listen", listen,
        *(("--port-file", port_file) if port_file else ()),
        *(("--advertise", advertise) if advertise else ()),
        *(("--http-port", str(http_port)) if http_port is not None else ()),
        *(("--http-port-file", http_port_file) if http_port_file else ()),
        "--dilation", repr(float(dilation)),
        "--config", config,
        "--events", events,
        *(("--state-dir", state_dir) if state_dir else ()),
        "--heartbeat-s", repr(float(heartbeat_s)),
        "--am-interval-s", repr(float(am_interval_s)),
        "--expiry-intervals", str(expiry_intervals),
        "--max-am-attempts", str(max_am_attempts),
        *(("--event",) if event else ()),
        *_rm_identity(secrets),
        *_tls_flags(tls),
        "--log-level", log_level,
    ]  # fmt: skip


def _rm_identity(secrets: str | None) -> list[str]:
    if secrets is None:
        return ["--insecure"]
    return ["--acl", f"{secrets}/{ACL_FILE}", "--node-secret-file", f"{secrets}/{NODE_SECRET_FILE}"]


def _tls_flags(tls: Sequence[str]) -> list[str]:
    if not tls:
        return []
    cert, key, ca = tls
    return ["--tls-cert", cert, "--tls-key", key, "--tls-ca", ca]


def nm_command(
    python: str,
    rm: str,
    nodes_file: str,
    *,
    listen: str,
    rm_wait_s: float,
    log_level: str,
    secrets: str | None,
    tls: Sequence[str] = (),
    port_file: str | None = None,
    advertise: str | None = None,
    work_dir: str | None = None,
    run_as: str | None = None,
    event: bool = False,
) -> list[str]:
    """``event``: ``cluster: {scheduling: event}`` (out-of-band heartbeats at starts too)."""
    return [
        python, "-m", "nm",
        "--rm", rm,
        "--nodes-json", nodes_file,
        "--batch",
        "--listen", listen,
        *(("--port-file", port_file) if port_file else ()),
        *(("--advertise", advertise) if advertise else ()),
        *(("--work-dir", work_dir) if work_dir else ()),
        *(("--run-as", run_as) if run_as else ()),
        *(("--event",) if event else ()),
        "--rm-wait-s", repr(float(rm_wait_s)),
        *(("--node-secret-file", f"{secrets}/{NODE_SECRET_FILE}") if secrets else ("--insecure",)),
        *_tls_flags(tls),
        "--log-level", log_level,
    ]  # fmt: skip


def am_host_command(
    python: str,
    rm: str,
    *,
    poll_s: float,
    log_level: str,
    secrets: str | None,
    tls: Sequence[str] = (),
    port_file: str | None = None,
    event: bool = False,
) -> list[str]:
    """``event``: ``cluster: {scheduling: event}`` (AMs that call at once on news)."""
    return [
        python, "-m", "am",
        "--rm", rm,
        *(("--user", AM_HOST_USER, "--key-file", f"{secrets}/{AM_HOST_KEY_FILE}")
          if secrets else ()),
        *_tls_flags(tls),
        *(("--port-file", port_file) if port_file else ()),
        "--poll-s", repr(poll_s),
        *(("--event",) if event else ()),
        "--log-level", log_level,
    ]  # fmt: skip


def check_cluster_settings(
    workload: Workload,
    policy: str,
    params: Mapping[str, Any],
    *,
    dilation: float,
    parts: int,
    parts_option: str,
    expiry_intervals: int,
    max_am_attempts: int,
    am_interval_s: float | None,
) -> None:
    """Every check a cluster makes before it starts anything: a bad value is a clear error
    (``parts`` is how many NM host processes or containers share the nodes)."""
    nodes = workload.cluster.nodes
    if not nodes:
        raise InputError("cluster", None, "the workload has no nodes")
    if not dilation > 0:
        raise InputError("--dilation", None, f"must be > 0, got {dilation:g}")
    if not 1 <= parts <= len(nodes):
        raise InputError(
            parts_option, None, f"must be between 1 and the {len(nodes)} node(s), got {parts}"
        )
    if expiry_intervals < 1 or max_am_attempts < 1:
        raise InputError("cluster", None, "expiry intervals and AM attempts must be >= 1")
    if am_interval_s is not None and not am_interval_s > 0:
        raise InputError("--am-interval-s", None, f"must be > 0, got {am_interval_s}")
    build("policies", policy, params)  # bad name or parameter: fail now
