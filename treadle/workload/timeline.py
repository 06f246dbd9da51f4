"""A run's changes to queue accounts as calls on ``rm.core.accounts``: the admin timeline and
per-job spending rates composed into one sequence (``AccountTimeline``).

The rule (``treadle.model.AccountAction``): a queue's *base* rate is its declared
``spending_rate``, then the timeline's last ``set_spending_rate``; its *effective* rate,
the one the policy is told, is the highest ``spending_rate`` of its jobs in the system
(submitted, not yet ended), else the base. A call goes out only when the effective rate
changes. Both hosts use it: the simulator calls ``rm.core.accounts`` directly, the live driver
through the Admin service.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from treadle.model import (
    SET_SPENDING_RATE,
    AccountAction,
    JobSpec,
    Workload,
)


@dataclass(frozen=True, slots=True)
class AccountCall:
    """One call on the RM's accounts: ``rm.core.accounts.<action>(queue, amount)``."""

    action: str  # one of treadle.model.ACCOUNT_ACTIONS
    queue: str
    amount: float


@dataclass
class AccountTimeline:
    """The host's book of each queue's base rate and boosted jobs (one run)."""

    base: dict[str, float] = field(default_factory=dict)
    boosts: dict[str, dict[str, float]] = field(default_factory=dict)  # queue -> job -> rate

    @classmethod
    def of(cls, workload: Workload) -> AccountTimeline:
        leaves = workload.leaf_queues.values()
        return cls({q.name: q.spending_rate for q in leaves if q.spending_rate is not None})

    def effective(self, queue: str) -> float | None:
        boosted = self.boosts.get(queue)
        return max(boosted.values()) if boosted else self.base.get(queue)

    def admin(self, action: AccountAction) -> list[AccountCall]:
        """The calls a timeline entry makes."""
        if action.action != SET_SPENDING_RATE:
            return [AccountCall(action.action, action.queue, action.amount)]
        before = self.effective(action.queue)
        self.base[action.queue] = action.amount
        return self._rate_change(action.queue, before)

    def job_submitted(self, job: JobSpec) -> list[AccountCall]:
        if job.spending_rate is None:
            return []
        before = self.effective(job.queue)
        self.boosts.setdefault(job.queue, {})[job.name] = job.spending_rate
        return self._rate_change(job.queue, before)

    def job_ended(self, job: JobSpec) -> list[AccountCall]:
        boosted = self.boosts.get(job.queue)
        if not boosted or job.name not in boosted:
            return []
        before = self.effective(job.queue)
        del boosted[job.name]
        return self._rate_change(job.queue, before)

    def _rate_change(self, queue: str, before: float | None) -> list[AccountCall]:
        now = self.effective(queue)
        if now is None or now == before:
            return []
        return [AccountCall(SET_SPENDING_RATE, queue, now)]


def without_accounts(workload: Workload) -> Workload:
    """``workload`` with no account changes (no timeline, no per-job rates): what a run
    under a policy without accounts, such as an alone reference, can take."""
    if not workload.has_account_timeline:
        return workload
    jobs = tuple(
        replace(j, spending_rate=None) if j.spending_rate is not None else j for j in workload.jobs
    )
    return replace(workload, jobs=jobs, admin=())
