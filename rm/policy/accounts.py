"""Budget accounts: what a policy with per-queue budgets (Dynamic Priority) offers the RM.

A policy that keeps accounts implements ``AccountsPolicy``; the RM's admin calls
(``rm.core.accounts.Accounts``) check every argument first (known leaf queue, finite numbers
>= 0) and only then call these methods, so an implementation may assume valid input and
raises ``ValueError`` only for a rule of its own. Every method changes all it changes or
nothing. Amounts are credits; a spending rate is credits per slot per allocation interval.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from rm.policy.views import ClusterView


@dataclass(frozen=True, slots=True)
class AccountInfo:
    """One queue's account as the last allocation interval left it."""

    queue: str
    budget: float
    spending_rate: float
    #: Fraction of the cluster's slots granted this interval (0 when not eligible).
    share: float
    #: Slots the queue holds now (containers).
    used: int
    #: Tasks the queue's applications still ask for.
    pending: int


@dataclass(frozen=True, slots=True)
class AccountBalance:
    """What survives an RM restart: a queue's budget and spending rate."""

    budget: float
    spending_rate: float


@dataclass(frozen=True, slots=True)
class AccountBook:
    """One account's books for one allocation interval (a ``dp_account`` event): the
    price and the queue's share for the interval that begins, its budget after the charge
    for the interval that ended."""

    queue: str
    price: float
    budget: float
    spending_rate: float
    share: float
    #: Slots charged for (held during the interval, capped at the quota).
    used: float
    #: Tasks the queue's applications ask for.
    pending: int
    charged: float


@runtime_checkable
class AccountsPolicy(Protocol):
    """A policy with per-queue budget accounts (one account per leaf queue)."""

    def price(self) -> float:
        """The current price: the sum of the spending rates of the eligible accounts."""
        ...

    def account_infos(self, cluster: ClusterView) -> Sequence[AccountInfo]:
        """Every account, in queue-name order."""
        ...

    def set_spending_rate(self, queue: str, rate: float) -> None: ...

    def set_budget(self, queue: str, budget: float) -> None: ...

    def add_budget(self, queue: str, credits: float) -> None: ...

    def balances(self) -> Mapping[str, AccountBalance]:
        """Every account's budget and rate (what the RM's state store keeps)."""
        ...

    def restore_balances(self, balances: Mapping[str, AccountBalance]) -> None:
        """Set the accounts from a stored snapshot (after an RM restart)."""
        ...
