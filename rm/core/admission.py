"""Which submissions the RM takes: those of a user the queue's ACLs admit
(``treadle.acl``; refused with a ``PermissionDeniedError`` naming the queue), and at most
``max_pending_tasks`` tasks of running applications not yet done, the submission's own
included (the host's limits; the other limits of a request are checked on its wire form,
before it is decoded; refused with a ``LimitExceededError`` that names the limit). Each
is refused before anything changes, so a refused submission spends no queue's budget.

The tasks held are bounded from above, cheaply: the bound grows with each admission and
is counted afresh only when it would refuse one (so rarely)."""

from __future__ import annotations

from rm.core.state import ClusterState
from treadle.acl import QueueAcls
from treadle.errors import LimitExceededError, PermissionDeniedError


class Admission:
    __slots__ = ("_bound", "_state", "acls", "max_pending_tasks")

    def __init__(
        self, state: ClusterState, acls: QueueAcls, max_pending_tasks: int | None = None
    ) -> None:
        self._state = state
        #: Who may submit to, and administer, each queue.
        self.acls = acls
        #: None: no bound (the simulator admits every job of its workload).
        self.max_pending_tasks = max_pending_tasks
        #: At least the tasks of running applications not yet done.
        self._bound = 0

    def check_queue(self, user: str, queue: str) -> None:
        """Refuse ``user``'s submission to a known ``queue`` its ACLs do not admit (an
        unknown queue is the submission's own error)."""
        if self.acls.enabled and queue in self._state.queues:
            refusal = self.acls.submit_refusal(user, queue)
            if refusal is not None:
                raise PermissionDeniedError(refusal)

    def check(self, tasks: int) -> None:
        """Refuse ``tasks`` more if the RM would then hold more than the limit."""
        cap = self.max_pending_tasks
        if cap is None or self._bound + tasks <= cap:
            return
        self._bound = sum(a.tasks - len(a.done_tasks) for a in self._state.apps.values())
        if self._bound + tasks > cap:
            raise LimitExceededError(
                f"submission has {tasks} tasks and the RM holds {self._bound} "
                f"pending; the RM's limit max_pending_tasks is {cap}"
            )

    def admit(self, tasks: int) -> None:
        """``tasks`` more were admitted (``check`` passed)."""
        self._bound += tasks
