"""What a discrete-event host may ask the RM so that it skips work that would change
nothing: heartbeats of nodes on which no pending ask could fit, and AM calls that would
repeat themselves and get nothing back. Only the simulator uses these; they answer from
the RM's books and never change what a run produces (the property tests compare runs
with every hint overridden to 'do the work').

A policy that sends shares computes them when an Allocate call asks (``Scheduler.share_of``,
once per change of state) and may keep time-bound caches of them (``SharesCache``) or act
on them (carbyne's limits): when and how often they are computed can change what later
calls and heartbeats get. A skipped call of such a policy therefore still does the RM's
share bookkeeping of that call (its clock, the change of demand a request with asks
stands for, the share computed) and drops only what the AM would do with the share; so it
is skipped only for an AM whose ask strategy does not read shares
(``AskStrategy.reads_share``), and is always seen: the host may not let such an AM sleep
through its calls unseen (``unseen_skips``)."""

from __future__ import annotations

from rm.core.scheduling import Scheduler
from rm.core.state import ClusterState


class SchedulingHints:
    __slots__ = ("_capacity", "_scheduler", "_state")

    def __init__(self, state: ClusterState, scheduler: Scheduler) -> None:
        self._state = state
        self._scheduler = scheduler
        self._capacity = state.capacity

    @property
    def has_pending(self) -> bool:
        """Some application has outstanding asks."""
        return bool(self._state.pending.apps)

    @property
    def pending_epoch(self) -> int:
        """Grows when nodes that could place nothing before might place something now."""
        return self._state.pending.epoch

    def could_place_on(self, node_id: str) -> bool:
        """False when no pending ask can fit the node's free resources (a heartbeat of
        that node reporting nothing would change nothing); True may be wrong, False never."""
        node = self._state.nodes.get(node_id)
        if node is None or not node.alive:
            return False
        return self._state.pending.could_fit(node._free)

    def take_news(self) -> list[str]:
        """The applications for which ``skip_allocate`` may have turned False since the
        last call (the first call starts the watch): those that got containers, heard of
        ended ones or ended, or every application when the cluster's size changed. A
        host that stops calling for an AM whose calls are skipped calls again for the
        applications named here."""
        st = self._state
        news = st.news
        if news is None:
            st.news = {}
            self._capacity = st.capacity
            return []
        if st.capacity is not self._capacity:
            self._capacity = st.capacity
            news.clear()
            return list(st.apps)
        if not news:
            return []
        out = list(news)
        news.clear()
        return out

    @property
    def unseen_skips(self) -> bool:
        """Whether a host may skip AM calls without passing them to ``skip_allocate`` (an
        AM asleep): only when the policy sends no shares (a skipped call of one that does
        still has the RM compute them at its instant)."""
        return self._scheduler.shares_hook is None

    def skip_allocate(
        self, app_id: str, now: float, *, reads_share: bool = True, asks: bool = True
    ) -> bool:
        """For an AM whose call would repeat its last request: True (the AM counts as seen
        at ``now``) when answering it would change nothing either: nothing to deliver, the
        cluster as the AM last heard of it, and no policy shares to send or an AM that does
        not read them (``reads_share``; ``asks``: the request carries asks). With shares,
        the RM does at ``now`` what the call would have made it do with them: it notes the
        change of demand that a request with asks stands for and computes the AM's share,
        which goes nowhere. False when the call must be made."""
        app = self._state.apps.get(app_id)
        if (
            app is None
            or app.undelivered
            or app.completed_reports
            or not app.am_registered
            or app.last_response is None
            or app.last_response.cluster is not self._state.capacity
        ):
            return False
        scheduler = self._scheduler
        if scheduler.shares_hook is not None:
            if reads_share:
                return False
            # As ``Applications.allocate`` does for such a call, without the answer.
            st = self._state
            st.now = now
            if asks:
                st.version += 1
            scheduler.share_of(app_id)
        app.am_last_seen_s = now
        return True
