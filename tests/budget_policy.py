"""A small real policy with budget accounts, for tests of the RM's account calls: FIFO
placement plus ``rm.policy.accounts.AccountsPolicy`` books kept in a dict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from plugins.policies.fifo import FifoPolicy
from rm.policy.accounts import AccountBalance, AccountInfo


class BudgetPolicy(FifoPolicy):
    """FIFO plus budget accounts (``rm.policy.accounts.AccountsPolicy``)."""

    name = "budget-fifo"

    def __init__(self) -> None:
        super().__init__()
        self.budgets: dict[str, tuple[float, float]] = {}

    def price(self) -> float:
        return sum(r for _, r in self.budgets.values())

    def account_infos(self, cluster: Any) -> list[AccountInfo]:
        return [AccountInfo(q, b, r, 0.0, 0, 0) for q, (b, r) in sorted(self.budgets.items())]

    def set_spending_rate(self, queue: str, rate: float) -> None:
        self.budgets[queue] = (self.budgets.get(queue, (0.0, 0.0))[0], rate)

    def set_budget(self, queue: str, budget: float) -> None:
        self.budgets[queue] = (budget, self.budgets.get(queue, (0.0, 0.0))[1])

    def add_budget(self, queue: str, credits: float) -> None:
        b, r = self.budgets.get(queue, (0.0, 0.0))
        self.budgets[queue] = (b + credits, r)

    def balances(self) -> dict[str, AccountBalance]:
        return {q: AccountBalance(b, r) for q, (b, r) in self.budgets.items()}

    def restore_balances(self, balances: Mapping[str, AccountBalance]) -> None:
        self.budgets = {q: (b.budget, b.spending_rate) for q, b in balances.items()}
