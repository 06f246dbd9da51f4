"""Dynamic Priority's workload keys: queue accounts, the admin timeline, per-job spending
rates, and how the simulator applies them (``treadle.workload.timeline``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pytest

from plugins.policies.fifo import FifoPolicy
from rm.policy import ClusterView
from rm.policy.accounts import AccountBalance, AccountInfo
from treadle.errors import ConflictError, WorkloadError
from treadle.model import JobSpec, StageSpec, Workload
from treadle.registry import factory
from treadle.resources import Resources
from treadle.sim import Simulation
from treadle.workload import parse_workload, workload_json_schema
from treadle.workload.timeline import AccountCall, AccountTimeline, without_accounts

GreedyAsks = factory("asks", "greedy")

BASE = """
cluster:
  heartbeat_s: 1
  nodes: [{count: 2, resources: {vcores: 4}}]
queues:
  - {name: a, budget: 1000, spending_rate: 2}
  - {name: b, budget: 10000, spending_rate: 1}
  - {name: c}
admin:
  - {at_s: 30, queue: a, set_budget: 10000}
  - {at_s: 20, queue: b, add_budget: 5, set_spending_rate: 3}
generators:
  - {kind: closed_loop, user: alice, queue: a, count: 3, spending_rates: {2: 8},
     job: {stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1}}]}}
  - {kind: closed_loop, user: bob, queue: b, count: 2,
     job: {stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1}}]}}
"""


def load(text: str = BASE) -> Workload:
    return parse_workload(text, "dp.yaml")


def bad(replace: str, by: str) -> str:
    assert replace in BASE
    with pytest.raises(WorkloadError) as e:
        load(BASE.replace(replace, by))
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("dp.yaml: ")
    return message


def test_queue_accounts_timeline_and_job_rates_reach_the_model() -> None:
    wl = load()
    leaves = wl.leaf_queues
    assert (leaves["a"].budget, leaves["a"].spending_rate) == (1000.0, 2.0)
    assert (leaves["c"].budget, leaves["c"].spending_rate) == (None, None)
    # the timeline in time order; an entry's several changes in the documented order
    assert [(a.at_s, a.queue, a.action, a.amount) for a in wl.admin] == [
        (20.0, "b", "add_budget", 5.0),
        (20.0, "b", "set_spending_rate", 3.0),
        (30.0, "a", "set_budget", 10000.0),
    ]
    rates = {j.name: j.spending_rate for j in wl.jobs}
    assert rates == {"alice-1": None, "alice-2": 8.0, "alice-3": None, "bob-1": None, "bob-2": None}
    assert wl.has_account_timeline
    plain = without_accounts(wl)
    assert not plain.has_account_timeline
    assert plain.jobs[0].stages == wl.jobs[0].stages


def test_a_template_rate_applies_to_every_job_and_a_numbered_rate_wins() -> None:
    text = BASE.replace(
        "job: {stages: [{name: s, tasks: 4, duration_s: 10, resources: {vcores: 1}}]}}\n  - {kind",
        "job: {spending_rate: 5, stages: [{name: s, tasks: 4, duration_s: 10, "
        "resources: {vcores: 1}}]}}\n  - {kind",
    )
    rates = {j.name: j.spending_rate for j in load(text).jobs if j.user == "alice"}
    assert rates == {"alice-1": 5.0, "alice-2": 8.0, "alice-3": 5.0}


@pytest.mark.parametrize(
    ("replace", "by", "expected"),
    [
        ("budget: 1000,", "budget: -1,", "queues[0].budget: input should be greater than or equal"),
        ("budget: 1000,", "budget: .inf,", "queues[0].budget: input should be a finite number"),
        ("spending_rate: 2}", "spending_rate: abc}", "queues[0].spending_rate: input should be a"),
        ("spending_rate: 2}", "spending_rate: '2'}", "queues[0].spending_rate: input should be a"),
        ("set_budget: 10000", "set_budget: -5", "admin[0].set_budget: input should be greater"),
        ("set_budget: 10000", "set_budgte: 10000", "admin[0].set_budgte: unknown field; did you"),
        ("queue: a, set_budget: 10000", "queue: a", "admin[0]: give one of set_budget"),
        ("queue: a, set_budget", "queue: zz, set_budget", "admin[0].queue: unknown queue 'zz'"),
        ("at_s: 30", "at_s: -1", "admin[0].at_s: input should be greater than or equal to 0"),
        ("spending_rates: {2: 8}", "spending_rates: {4: 8}", "spending_rates: names job 4"),
        ("spending_rates: {2: 8}", "spending_rates: {2: -8}", "generators[0].spending_rates"),
        ("{name: a, budget: 1000, spending_rate: 2}", "{name: a}", "admin[0]: changes the account"),
    ],
)
def test_bad_account_values_are_one_line_naming_the_file_and_field(
    replace: str, by: str, expected: str
) -> None:
    assert expected in bad(replace, by)


def test_a_boosted_job_needs_its_queue_to_declare_an_account() -> None:
    text = BASE.replace("{name: a, budget: 1000, spending_rate: 2}", "{name: a, budget: 5}")
    text = text.replace("  - {at_s: 30, queue: a, set_budget: 10000}\n", "")
    with pytest.raises(WorkloadError, match="job 'alice-2' spending_rate: changes the account"):
        load(text)


def test_a_parent_queue_has_no_account() -> None:
    text = BASE.replace("  - {name: c}", "  - {name: c, budget: 3, queues: [{name: d}]}")
    with pytest.raises(WorkloadError, match=r"queues\[2\].budget: only a leaf queue"):
        load(text)


def test_the_json_schema_documents_the_new_keys() -> None:
    schema = workload_json_schema()
    defs = schema["$defs"]
    assert {"budget", "spending_rate"} <= set(defs["QueueFile"]["properties"])
    assert "admin" in schema["properties"]
    assert {"at_s", "queue", "set_budget", "add_budget", "set_spending_rate"} == set(
        defs["AdminFile"]["properties"]
    )
    assert "spending_rates" in defs["ClosedLoopGenerator"]["properties"]
    assert "spending_rate" in defs["JobTemplate"]["properties"]


# ---------------------------------------------------------------------------- the rule


def _job(name: str, queue: str, rate: float | None) -> JobSpec:
    stage = StageSpec("s", Resources(vcores=1), (1.0,))
    return JobSpec(name, "u", 0.0, (stage,), queue, rate)


def test_the_highest_boost_wins_and_the_timeline_moves_only_the_base() -> None:
    from treadle.model import AccountAction

    book = AccountTimeline({"a": 2.0})
    j1, j2, plain = _job("j1", "a", 8.0), _job("j2", "a", 4.0), _job("p", "a", None)
    assert book.job_submitted(plain) == []
    assert book.job_submitted(j1) == [AccountCall("set_spending_rate", "a", 8.0)]
    assert book.job_submitted(j2) == []  # 8 still the highest
    # a timeline rate change during the boost changes only what the queue returns to
    assert book.admin(AccountAction(5.0, "a", "set_spending_rate", 3.0)) == []
    assert book.job_ended(j1) == [AccountCall("set_spending_rate", "a", 4.0)]
    assert book.job_ended(plain) == []
    assert book.job_ended(j2) == [AccountCall("set_spending_rate", "a", 3.0)]
    assert book.admin(AccountAction(6.0, "a", "add_budget", 7.0)) == [
        AccountCall("add_budget", "a", 7.0)
    ]


# ------------------------------------------------------------------------ the simulator


class RecordingAccounts(FifoPolicy):
    """fifo with accounts that keep every call and the time of the last tick before it."""

    tick_interval_s = 1.0

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.calls: list[tuple[float, str, str, float]] = []
        self.books: dict[str, AccountBalance] = {}

    def tick(self, cluster: ClusterView) -> None:
        self.now = cluster.now

    def price(self) -> float:
        return 0.0

    def account_infos(self, cluster: ClusterView) -> Sequence[AccountInfo]:
        return []

    def set_spending_rate(self, queue: str, rate: float) -> None:
        self.calls.append((self.now, "set_spending_rate", queue, rate))

    def set_budget(self, queue: str, budget: float) -> None:
        self.calls.append((self.now, "set_budget", queue, budget))

    def add_budget(self, queue: str, credits: float) -> None:
        self.calls.append((self.now, "add_budget", queue, credits))

    def balances(self) -> Mapping[str, AccountBalance]:
        return self.books

    def restore_balances(self, balances: Mapping[str, AccountBalance]) -> None:
        self.books = dict(balances)


def test_the_simulator_applies_the_timeline_and_boosts_at_their_times() -> None:
    wl = load()
    policy = RecordingAccounts()
    result = Simulation(wl, policy, GreedyAsks).run()
    assert result.finished == 5
    names = {r["job"]: r["name"] for r in result.records if r["event"] == "job_submitted"}
    ends = {names[r["job"]]: r["t"] for r in result.records if r["event"] == "job_finished"}
    calls = policy.calls
    boost = [c for c in calls if c[1] == "set_spending_rate" and c[2] == "a"]
    assert [c[3] for c in boost] == [8.0, 2.0]  # alice-2's boost, then back to a's rate
    # on at alice-2's submission (alice-1's end), off at alice-2's end (the last tick before)
    assert ends["alice-1"] - 1 <= boost[0][0] <= ends["alice-1"]
    assert ends["alice-2"] - 1 <= boost[1][0] <= ends["alice-2"]
    timeline = [c for c in calls if c[1] != "set_spending_rate" or c[2] == "b"]
    assert [c[1:] for c in timeline] == [
        ("add_budget", "b", 5.0),
        ("set_spending_rate", "b", 3.0),
        ("set_budget", "a", 10000.0),
    ]
    assert [math.floor(c[0]) for c in timeline] == [19, 19, 29]  # before the tick at 20, 30


def test_a_policy_without_accounts_is_refused_before_the_run() -> None:
    with pytest.raises(ConflictError, match="policy 'fifo' keeps none"):
        Simulation(load(), FifoPolicy(), GreedyAsks, policy_name="fifo")
    # the same workload without its timeline runs under any policy
    result = Simulation(without_accounts(load()), FifoPolicy(), GreedyAsks).run()
    assert result.finished == 5


def test_queue_accounts_travel_to_a_live_rm_in_its_config_file() -> None:
    from rm.server.config import parse_rm_config
    from treadle.cluster.config import rm_config_for

    config = parse_rm_config(rm_config_for(load()), "rm.yaml")
    a = next(q for q in config.queues.walk() if q.name == "a")
    c = next(q for q in config.queues.walk() if q.name == "c")
    assert (a.budget, a.spending_rate, c.budget, c.spending_rate) == (1000.0, 2.0, None, None)


def test_under_dp_the_books_show_the_boost_and_the_reset() -> None:
    """The dp policy's own records: alice's queue spends 8 while alice-2 runs, 2 before
    and after; queue a's budget is 10,000 right after the reset at 30 s."""
    from treadle.registry import build

    wl = load()
    policy = build("policies", "dp", {"interval_s": 5})
    records = Simulation(wl, policy, GreedyAsks, policy_name="dp").run().records
    names = {r["job"]: r["name"] for r in records if r["event"] == "job_submitted"}
    ends = {names[r["job"]]: r["t"] for r in records if r["event"] == "job_finished"}
    books = [r for r in records if r["event"] == "dp_account" and r["queue"] == "a"]
    for b in books:
        boosted = ends["alice-1"] < b["t"] <= ends["alice-2"]
        assert b["spending_rate"] == (8.0 if boosted else 2.0), b
    after_reset = next(b for b in books if b["t"] >= 30)
    assert after_reset["budget"] == pytest.approx(10000.0 - after_reset["charged"])
    b_books = [r for r in records if r["event"] == "dp_account" and r["queue"] == "b"]
    assert [r["spending_rate"] for r in b_books if r["t"] <= 20][-1] == 3.0
