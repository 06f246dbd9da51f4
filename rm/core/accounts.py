"""The RM's admin calls on budget accounts (Dynamic Priority's price, queue info, spending
rate and budget), checked before the policy sees them.

Each call names a leaf queue of the RM's queue tree; an unknown queue is ``NotFoundError``,
a parent queue or a number that is not finite and >= 0 is ``InvalidRequestError``, and a
policy without accounts (not an ``AccountsPolicy``) is ``ConflictError``. A call either
applies whole or changes nothing: arguments are checked before the first change.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from rm.core.state import ClusterState
from rm.policy import Policy
from rm.policy.accounts import AccountBalance, AccountInfo, AccountsPolicy
from treadle.errors import ConflictError, InvalidRequestError, NotFoundError


class Accounts:
    """The admin facade over the policy's accounts (``ResourceManager.accounts``)."""

    __slots__ = ("_policy", "_policy_name", "_state")

    def __init__(self, state: ClusterState, policy: Policy, policy_name: str) -> None:
        self._state = state
        self._policy = policy
        self._policy_name = policy_name

    @property
    def enabled(self) -> bool:
        return isinstance(self._policy, AccountsPolicy)

    def _book(self) -> AccountsPolicy:
        p = self._policy
        if not isinstance(p, AccountsPolicy):
            raise ConflictError(f"policy {self._policy_name!r} has no queue budgets")
        return p

    def _leaf(self, queue: str) -> str:
        q = self._state.queues.get(queue)
        if q is None:
            raise NotFoundError(f"unknown queue {queue!r}")
        if q.children:
            raise InvalidRequestError(f"queue {queue!r} is not a leaf queue")
        return queue

    @staticmethod
    def _amount(name: str, x: float) -> float:
        if not (isinstance(x, (int, float)) and math.isfinite(x) and x >= 0):
            raise InvalidRequestError(f"{name} must be a finite number >= 0, got {x!r}")
        return float(x)

    def _apply(self, queue: str, what: str, call: object, *args: object) -> None:
        try:
            call(*args)  # type: ignore[operator]
        except ValueError as e:  # the policy's own rule
            raise InvalidRequestError(f"queue {queue!r}: {what}: {e}") from None

    # ------------------------------------------------------------------ reads
    def price(self) -> float:
        return self._book().price()

    def infos(self) -> Sequence[AccountInfo]:
        return self._book().account_infos(self._state)

    def info(self, queue: str) -> AccountInfo:
        book = self._book()
        self._leaf(queue)
        for a in book.account_infos(self._state):
            if a.queue == queue:
                return a
        raise NotFoundError(f"queue {queue!r} has no account")

    def balances(self) -> Mapping[str, AccountBalance]:
        return self._book().balances()

    # ------------------------------------------------------------------ writes
    def set_spending_rate(self, queue: str, rate: float) -> None:
        book = self._book()
        q, r = self._leaf(queue), self._amount("spending_rate", rate)
        self._apply(q, "spending rate", book.set_spending_rate, q, r)

    def set_budget(self, queue: str, budget: float) -> None:
        book = self._book()
        q, b = self._leaf(queue), self._amount("budget", budget)
        self._apply(q, "budget", book.set_budget, q, b)

    def add_budget(self, queue: str, credits: float) -> None:
        book = self._book()
        q, c = self._leaf(queue), self._amount("credits", credits)
        self._apply(q, "budget", book.add_budget, q, c)

    def set_queue_budget(self, queue: str, budget: float, spending_rate: float) -> None:
        """Both values at once (the Client service's ``SetQueueBudget``): both are checked
        before either is set."""
        book = self._book()
        q = self._leaf(queue)
        b, r = self._amount("budget", budget), self._amount("spending_rate", spending_rate)
        old = book.balances().get(q)
        self._apply(q, "budget", book.set_budget, q, b)
        try:
            self._apply(q, "spending rate", book.set_spending_rate, q, r)
        except InvalidRequestError:
            if old is not None:
                book.set_budget(q, old.budget)
            raise

    def restore(self, balances: Mapping[str, AccountBalance]) -> None:
        """Accounts from the state store, after an RM restart (queues no longer in the tree
        are skipped)."""
        book = self._book()
        known = {q: b for q, b in balances.items() if q in self._state.queues}
        book.restore_balances(known)
