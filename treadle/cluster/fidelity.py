"""Whether a live run emulated its cluster faithfully: measured lag against liveness.

Every role measures its own lag (treadle.live.lag): timer lateness and RPC queueing, in
emulated seconds. A live cluster expires an NM silent for ``node_expiry_s`` and an AM
attempt that has not called Allocate for ``am_expiry_s``; the budget of each is what a
message may be late before it expires: the expiry less one interval (a heartbeat, an
allocate interval). On an emulated cluster nothing is slow on purpose, so:

**The rule.** An expiry is a *fault* when the process that hosted the expired role was
made to stop (a test's or a user's ``expect_exit``: a killed NM host, a killed AM host).
Every other expiry happened while its role's process ran: its messages came later than
the budget allows, which is lag (CPU starvation, a stalled process, a backlogged event
loop), and the emulation was unfaithful: the run fails, stating the measured lag.
(A process stopped with SIGSTOP is such lag: its timers fire late when it resumes.)
The RM allows for its own stalls (``rm.server.service``): a node or an AM silent past its expiry
only because the RM itself could not run is kept, and counted as a *deferred* expiry in
the RM's lag summary. The jobs survive, but the timing was not the emulated cluster's,
so a deferred expiry makes the run unfaithful too.

**Which dilation would fit.** Work per wall second grows with the dilation (heartbeats,
allocates and task ends per emulated second are fixed), so each role's demand for its
CPU, ``loop_busy + cpu_wait`` (wall seconds per wall second its event loop ran or waited
to run), is taken as proportional to the dilation. The estimate is the dilation at
which the busiest role's demand would be ``TARGET_DEMAND`` (headroom for bursts, which
are what expire roles): ``dilation x TARGET_DEMAND / demand``. A saturated role's
demand reads about 1 whatever its true need, so then the estimate is an upper bound;
the message says so. The benchmark ``python -m tests.benchmarks fidelity --frontier``
measured how well it holds (see its docstring).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from treadle import events as ev
from treadle.cluster.commands import split_nodes
from treadle.model import NodeSpec

#: The busiest role's CPU demand (s per wall s) a fitting dilation should leave it at.
TARGET_DEMAND = 0.5
#: Demand at or above which a role counts as saturated (its true need is unknown).
SATURATED_DEMAND = 0.9
AM_EXPIRY_REASON = "AM missed Allocate calls"


@dataclass(frozen=True)
class Liveness:
    """A cluster's expiries and their budgets (emulated s)."""

    heartbeat_s: float
    node_expiry_s: float
    am_interval_s: float
    am_expiry_s: float

    @property
    def node_budget_s(self) -> float:
        return self.node_expiry_s - self.heartbeat_s

    @property
    def am_budget_s(self) -> float:
        return self.am_expiry_s - self.am_interval_s


@dataclass(frozen=True)
class Expiry:
    kind: str  # "node" (NM liveness) or "am" (AM liveness)
    who: str  # node id or application id
    role: str  # the process that hosted it: "nm-2", "am", "nm-*" (a managed AM)
    fault: bool  # its process was made to stop


@dataclass
class Fidelity:
    """A live run's lag per role, its expiries, the verdict and the dilation estimate."""

    dilation: float
    liveness: Liveness
    roles: dict[str, dict[str, Any]]  # role -> treadle.live.lag summary (emulated s)
    expiries: list[Expiry] = field(default_factory=list)

    @property
    def lag_expiries(self) -> list[Expiry]:
        return [e for e in self.expiries if not e.fault]

    def deferred(self) -> dict[str, int]:
        """Expiries the roles deferred for their own stalls, by kind (node, am)."""
        out = {"node": 0, "am": 0}
        for s in self.roles.values():
            for kind, n in (s.get("deferred_expiries") or {}).items():
                out[kind] = out.get(kind, 0) + int(n)
        return out

    @property
    def faithful(self) -> bool:
        return not self.lag_expiries and not any(self.deferred().values())

    def demand(self) -> tuple[str, float]:
        """The busiest role and its peak CPU demand."""
        best = ("", 0.0)
        for name, s in self.roles.items():
            d = float(s.get("peak_demand", 0.0))
            if d > best[1]:
                best = (name, d)
        return best

    def fit_dilation(self) -> float:
        """The dilation at which the busiest role's demand would be TARGET_DEMAND (at most
        this run's; rounded down to a value worth typing)."""
        _, demand = self.demand()
        if demand <= 0:
            return self.dilation
        return _round_down(min(self.dilation, self.dilation * TARGET_DEMAND / demand))

    def worst(self, key: str, stat: str = "p99") -> tuple[str, float]:
        """The role with the largest ``key`` (timer_late_s, rpc_queue_s) ``stat``."""
        best = ("", 0.0)
        for name, s in self.roles.items():
            v = float((s.get(key) or {}).get(stat, 0.0))
            if v > best[1]:
                best = (name, v)
        return best

    def lag_line(self) -> str:
        """The measured lag in one line (emulated s)."""
        parts = []
        for key, what in (("timer_late_s", "timer lateness"), ("rpc_queue_s", "RPC queueing")):
            role, p99 = self.worst(key)
            mrole, mx = self.worst(key, "max")
            if mrole:
                parts.append(f"{what} p99 {p99:.3g} s ({role or '-'}), max {mx:.3g} s ({mrole})")
        return "; ".join(parts) or "no lag measured"

    def message(self) -> str:
        """Why the run is unfaithful and which dilation would fit (one paragraph)."""
        lag = self.lag_expiries
        nodes = sum(1 for e in lag if e.kind == "node")
        ams = len(lag) - nodes
        what = ", ".join(
            x
            for x in (
                f"{nodes} NM expir{'y' if nodes == 1 else 'ies'}" if nodes else "",
                f"{ams} AM attempt expir{'y' if ams == 1 else 'ies'}" if ams else "",
            )
            if x
        )
        deferred = self.deferred()
        held = ", ".join(
            f"{n} {'NM' if kind == 'node' else 'AM attempt'} expir{'y' if n == 1 else 'ies'}"
            for kind, n in deferred.items()
            if n
        )
        causes = [f"{what} caused by lag, not by faults" if what else ""]
        causes.append(f"{held} deferred because the RM itself stalled" if held else "")
        lv = self.liveness
        role, demand = self.demand()
        bound = "at most " if demand >= SATURATED_DEMAND else ""
        return (
            f"the emulation at dilation {self.dilation:g} was unfaithful: "
            f"{'; '.join(c for c in causes if c)} (budgets: NM {lv.node_budget_s:g} s, AM "
            f"{lv.am_budget_s:g} s emulated); measured {self.lag_line()} (emulated s); "
            f"busiest role {role or '-'} wanted {demand:.0%} of a CPU at its peak; try "
            f"--dilation "
            f"{bound}{self.fit_dilation():g}"
        )

    def to_json(self) -> dict[str, Any]:
        lv = self.liveness
        role, demand = self.demand()
        return {
            "dilation": self.dilation,
            "unit": "emulated s (wall s = emulated s / dilation)",
            "processes": {k: v for k, v in self.roles.items() if k != "driver"},
            "driver": self.roles.get("driver"),
            "liveness": {
                "node_expiry_s": lv.node_expiry_s,
                "node_budget_s": lv.node_budget_s,
                "am_expiry_s": lv.am_expiry_s,
                "am_budget_s": lv.am_budget_s,
            },
            "expiries": {
                "node": sum(1 for e in self.expiries if e.kind == "node"),
                "am": sum(1 for e in self.expiries if e.kind == "am"),
                "faults": sum(1 for e in self.expiries if e.fault),
                "caused_by_lag": len(self.lag_expiries),
                "deferred_for_rm_stalls": sum(self.deferred().values()),
            },
            "busiest": {"role": role, "demand": demand},
            "faithful": self.faithful,
            "fit_dilation": self.fit_dilation(),
        }

    def markdown(self, policy: str) -> str:
        """A section of the comparison report: the lag table and the verdict."""
        rows = [
            f"### {policy}: lag per role at dilation {self.dilation:g} (emulated s)",
            "",
            "| role | timer lateness count / p50 / p90 / p99 / max | RPC queueing count / "
            "p50 / p90 / p99 / max | CPU demand run / peak |",
            "|---|---|---|---|",
        ]
        for name, s in self.roles.items():
            rows.append(
                f"| {name} | {_dist(s.get('timer_late_s'))} | {_dist(s.get('rpc_queue_s'))} "
                f"| {float(s.get('demand', 0)):.0%} / {float(s.get('peak_demand', 0)):.0%} |"
            )
        e = self.to_json()["expiries"]
        rows += [
            "",
            f"Expiries: {e['node']} NM, {e['am']} AM attempt ({e['faults']} from faults, "
            f"{e['caused_by_lag']} caused by lag, {e['deferred_for_rm_stalls']} deferred "
            "while the RM stalled).",
            "",
            (
                "Faithful: no expiry was caused or deferred by lag."
                if self.faithful
                else f"**Unfaithful**: {self.message()}."
            ),
            "",
        ]
        return "\n".join(rows)


def _dist(d: Mapping[str, Any] | None) -> str:
    if not d or not d.get("count"):
        return "-"
    return f"{int(d['count'])} / " + " / ".join(
        f"{float(d[k]):.3g}" for k in ("p50", "p90", "p99", "max")
    )


def _round_down(x: float) -> float:
    """``x`` rounded down to a value worth typing: steps of 0.1 below 1, of 0.5 below 10,
    of 1 below 20, of 5 above (never below 0.1)."""
    step = 0.1 if x < 1 else 0.5 if x < 10 else 1.0 if x < 20 else 5.0
    return max(0.1, round(math.floor(x / step + 1e-9) * step, 1))


def expiries(
    records: Iterable[Mapping[str, Any]],
    nodes: Sequence[NodeSpec],
    parts: int,
    *,
    managed_am: bool,
    stopped: Iterable[str],
) -> list[Expiry]:
    """The run's NM and AM liveness expiries, each with the process that hosted it and
    whether that process was made to stop (``stopped``: the roles expected to exit)."""
    host = {n.node_id: f"nm-{k}" for k, chunk in enumerate(split_nodes(nodes, parts), 1)
            for n in chunk}  # fmt: skip
    down = set(stopped)
    out = []
    for r in records:
        if r.get("event") == ev.NODE_LOST:
            role = host.get(str(r.get("node")), "nm-?")
            out.append(Expiry("node", str(r.get("node")), role, role in down))
        elif r.get("event") == ev.ATTEMPT_FAILED and str(r.get("reason", "")).startswith(
            AM_EXPIRY_REASON
        ):
            if managed_am:  # the AM ran in a container on some NM host
                role, fault = "nm-*", any(d.startswith("nm-") for d in down)
            else:
                role, fault = "am", "am" in down
            out.append(Expiry("am", str(r.get("job")), role, fault))
    return out
