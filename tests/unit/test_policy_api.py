"""The policy API's helpers on their own: ``QueueTreePolicy`` (against a naive walk that
re-sorts every level before every placement), the ``CachedShares`` mixin, typed
parameters and the registry's plugin kinds."""

from __future__ import annotations

import ast
import inspect
import random
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import BaseModel, ConfigDict, Field

import am.asks
import rm.policy
import rm.policy.estimator
from rm.policy import (
    AppView,
    CachedShares,
    ClusterView,
    NodeView,
    NoParams,
    OrderingPolicy,
    Placement,
    Policy,
    QueueTreePolicy,
    first_fit_ask,
)
from treadle import registry
from treadle.errors import PluginError
from treadle.messages import Ask
from treadle.resources import ZERO, Resources


def res(vcores: float) -> Resources:
    return Resources(vcores=vcores)


# ----------------------------------------------------------------------------- a tiny RM
@dataclass(eq=False)
class Queue:
    name: str
    parent: Queue | None = None
    children: list[Queue] = field(default_factory=list)
    used: Resources = ZERO
    weight: float = 1.0

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(eq=False)
class App:
    app_id: str
    user: str
    queue: str
    seq: int
    asks: dict[int, Ask]
    allocated: Resources = ZERO

    @property
    def pending(self) -> int:
        return sum(a.count for a in self.asks.values())

    def sorted_asks(self) -> Sequence[Ask]:
        return [self.asks[p] for p in sorted(self.asks)]


@dataclass(eq=False)
class User:
    name: str
    used: Resources = ZERO
    weight: float = 1.0


@dataclass(eq=False)
class Node:
    node_id: str
    free: Resources


@dataclass(eq=False)
class Cluster:
    """Just what the helpers read; ``apply`` books a placement as the RM core does."""

    queues: dict[str, Queue]
    apps: dict[str, App]
    users: dict[str, User]
    capacity: Resources = field(default_factory=lambda: res(100))
    now: float = 0.0

    @property
    def root_queue(self) -> Queue:
        return self.queues["root"]

    def pending_apps(self) -> list[App]:
        return sorted((a for a in self.apps.values() if a.pending), key=lambda a: a.seq)

    def apply(self, node: Node, p: Placement) -> None:
        app = self.apps[p.app_id]
        ask = app.asks[p.priority]
        assert ask.resources.fits_in(node.free)
        node.free = node.free - ask.resources
        app.allocated = app.allocated + ask.resources
        self.users[app.user].used = self.users[app.user].used + ask.resources
        q: Queue | None = self.queues[app.queue]
        while q is not None:
            q.used = q.used + ask.resources
            q = q.parent
        if ask.count == 1:
            del app.asks[p.priority]
        else:
            app.asks[p.priority] = Ask(p.priority, ask.resources, ask.count - 1)


def heartbeat(policy: Policy, cluster: Cluster, node: Node) -> list[str]:
    """The app ids placed on ``node``, each placement applied as it is yielded."""
    out = []
    for p in policy.on_node_heartbeat(cast(NodeView, node), cast(ClusterView, cluster)):
        cluster.apply(node, p)
        out.append(p.app_id)
    return out


def tree(spec: Mapping[str, Any], parent: Queue | None = None, name: str = "root") -> list[Queue]:
    """Queues from ``{"a": {"a1": {}, "a2": {}}, "b": {}}`` (root first)."""
    q = Queue(name, parent)
    out = [q]
    for child, sub in spec.items():
        kids = tree(sub, q, child)
        q.children.append(kids[0])
        out += kids
    return out


def make_cluster(spec: Mapping[str, Any], apps: Iterable[tuple[str, str, list[Ask]]]) -> Cluster:
    """``apps``: (user, queue, asks) in submission order."""
    queues = {q.name: q for q in tree(spec)}
    made = {
        f"app{i}": App(f"app{i}", user, queue, i, {a.priority: a for a in asks})
        for i, (user, queue, asks) in enumerate(apps)
    }
    users = {a.user: User(a.user) for a in made.values()}
    return Cluster(queues, made, users)


# ----------------------------------------------------------------------------- QueueTree
class LeastUsed(QueueTreePolicy[NoParams]):
    """The least-used queue (vcores) at each level, ties by name; FIFO inside."""

    def group_key(self, name: str, cluster: ClusterView) -> tuple[float, str]:
        return (cluster.queues[name].used["vcores"], name)


def naive(cluster: Cluster, node: Node, key: Callable[[Queue], Any]) -> list[str]:
    """The rule, spelled out: before every placement, from the root, the children of each
    level sorted by key and the first with a leaf under it whose first application (in
    submission order) has an ask that fits the node."""
    out = []

    def first_fit(q: Queue) -> tuple[App, Ask] | None:
        if q.is_leaf:
            for app in cluster.pending_apps():
                if app.queue == q.name:
                    ask = first_fit_ask(cast(AppView, app), node.free)
                    if ask is not None:
                        return app, ask
            return None
        for child in sorted(q.children, key=key):
            found = first_fit(child)
            if found is not None:
                return found
        return None

    while (found := first_fit(cluster.root_queue)) is not None:
        app, ask = found
        cluster.apply(node, Placement(app.app_id, ask.priority))
        out.append(app.app_id)
    return out


def test_queue_tree_walks_by_key_then_fifo_in_the_leaf() -> None:
    one = [Ask(0, res(1), 3)]
    cluster = make_cluster(
        {"a": {"a1": {}, "a2": {}}, "b": {}},
        [("u", "a1", one), ("u", "a2", one), ("u", "b", [Ask(0, res(1), 5)]), ("u", "a1", one)],
    )
    node = Node("n", res(7))
    # a, b tie at 0 (a by name) -> a1; b (0 < 1); a (1 = 1, by name) -> a2 (0 < 1); b; a ...
    assert heartbeat(LeastUsed(), cluster, node) == [
        "app0", "app2", "app1", "app2", "app0", "app2", "app1",
    ]  # fmt: skip
    assert node.free == res(0)


def test_queue_tree_drops_what_no_longer_fits() -> None:
    cluster = make_cluster(
        {"a": {}, "b": {}},
        [("u", "a", [Ask(0, res(3), 1)]), ("u", "a", [Ask(0, res(1), 2)]), ("u", "b", [])],
    )
    node = Node("n", res(2))
    # app0 never fits: skipped, app1 behind it in the same leaf is served.
    assert heartbeat(LeastUsed(), cluster, node) == ["app1", "app1"]


def test_queue_tree_first_fit_hook_holds_asks_back() -> None:
    class AtMostTwo(LeastUsed):
        def first_fit(
            self, app: AppView, leaf: str, node: NodeView, cluster: ClusterView
        ) -> Ask | None:
            return (
                None
                if cluster.queues[leaf].used["vcores"] >= 2
                else super().first_fit(app, leaf, node, cluster)
            )

    many = [Ask(0, res(1), 10)]
    cluster = make_cluster({"a": {}, "b": {}}, [("u", "a", many), ("u", "b", many)])
    assert heartbeat(AtMostTwo(), cluster, Node("n", res(10))) == ["app0", "app1"] * 2


def random_case(seed: int) -> tuple[Cluster, Node]:
    """A queue tree up to 3 levels deep, applications in random leaves, some usage."""
    r = random.Random(seed)

    def spec(depth: int) -> dict[str, Any]:
        n = r.randint(1, 3) if depth < 3 and r.random() < 0.7 else 0
        return {f"q{depth}.{r.randrange(10**6)}": spec(depth + 1) for _ in range(n)}

    shape = spec(0)
    leaves = [q.name for q in tree(shape) if q.is_leaf]
    apps = [
        ("u", r.choice(leaves), [Ask(p, res(r.choice([1, 2, 3])), r.randint(1, 4)) for p in (0, 1)])
        for _ in range(r.randint(1, 12))
    ]
    cluster = make_cluster(shape, apps)
    for q in reversed(list(cluster.queues.values())):  # children before their parent
        q.used = res(r.choice([0, 0, 1, 2, 5])) + sum((k.used for k in q.children), ZERO)
    return cluster, Node("n", res(r.randint(3, 20)))


@pytest.mark.parametrize("seed", range(40))
def test_queue_tree_matches_the_naive_walk(seed: int) -> None:
    cluster, node = random_case(seed)
    expected = naive(cluster, node, lambda q: (q.used["vcores"], q.name))
    cluster, node = random_case(seed)
    assert heartbeat(LeastUsed(), cluster, node) == expected


def test_flat_groups_tie_by_their_first_pending_application() -> None:
    class ByUser(QueueTreePolicy[NoParams]):
        flat = True

        def leaf_of(self, app: AppView) -> str:
            return app.user

        def group_key(self, name: str, cluster: ClusterView) -> float:
            return cluster.users[name].used["vcores"]

    two = [Ask(0, res(1), 2)]
    cluster = make_cluster({}, [("zed", "root", two), ("amy", "root", two), ("zed", "root", two)])
    # zed's first job came first; then each user in turn, zed's jobs in submission order.
    assert heartbeat(ByUser(), cluster, Node("n", res(5))) == [
        "app0", "app1", "app0", "app1", "app2",
    ]  # fmt: skip


def test_resort_recomputes_the_application_key_after_each_placement() -> None:
    class FairInside(LeastUsed):
        resort = True

        def app_key(self, app: AppView, cluster: ClusterView) -> float:
            return app.allocated["vcores"]

    many = [Ask(0, res(1), 10)]
    cluster = make_cluster({}, [("u", "root", many), ("u", "root", many)])
    cluster.apps["app0"].allocated = res(1)
    assert heartbeat(FairInside(), cluster, Node("n", res(5))) == [
        "app1", "app0", "app1", "app0", "app1",
    ]  # fmt: skip
    assert heartbeat(LeastUsed(), cluster, Node("n", res(3))) == ["app0"] * 3  # FIFO


# ----------------------------------------------------------------------------- shares
class IntervalParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    update_interval_s: float = 0.5


class Counting(CachedShares[IntervalParams], QueueTreePolicy[IntervalParams]):
    """Computes ``{app: its allocation}``, counting the computations."""

    computed = 0

    def group_key(self, name: str, cluster: ClusterView) -> int:
        return 0

    def shares_interval_s(self) -> float:
        return self.params.update_interval_s

    def compute_shares(self, cluster: ClusterView) -> dict[str, Resources]:
        self.computed += 1
        return {a.app_id: a.allocated for a in cluster.apps.values()}


def at(cluster: Cluster, t: float) -> ClusterView:
    cluster.now = t
    return cast(ClusterView, cluster)


def test_shares_are_recomputed_at_the_interval() -> None:
    cluster = make_cluster({}, [("u", "root", [Ask(0, res(1), 1)])])
    policy = Counting()
    first = policy.shares(at(cluster, 0.0))
    assert policy.shares(at(cluster, 0.49)) is first
    assert policy.computed == 1
    policy.shares(at(cluster, 0.5))
    assert policy.computed == 2
    every = Counting(IntervalParams(update_interval_s=0))
    every.shares(at(cluster, 1.0))
    every.shares(at(cluster, 1.0))
    assert every.computed == 2


def test_shares_are_invalidated_when_an_application_is_added() -> None:
    cluster = make_cluster({}, [("u", "root", [Ask(0, res(1), 1)])])
    policy = Counting()
    policy.shares(at(cluster, 0.0))
    app = cast(AppView, cluster.apps["app0"])
    policy.on_app_removed(app, at(cluster, 0.1))  # a departure waits for the interval
    policy.shares(at(cluster, 0.1))
    assert policy.computed == 1
    policy.on_app_added(app, at(cluster, 0.2))
    policy.shares(at(cluster, 0.2))
    assert policy.computed == 2


def test_shares_on_first_ask_wait_for_the_application_to_ask() -> None:
    class OnFirstAsk(Counting):
        shares_on_first_ask = True

    cluster = make_cluster({}, [("u", "root", [])])
    policy = OnFirstAsk()
    policy.shares(at(cluster, 0.0))
    app = cluster.apps["app0"]
    policy.on_app_added(cast(AppView, app), at(cluster, 0.1))
    policy.shares(at(cluster, 0.1))
    assert policy.computed == 1  # added, asks for nothing yet
    app.asks[0] = Ask(0, res(1), 1)
    policy.shares(at(cluster, 0.2))
    policy.shares(at(cluster, 0.3))
    assert policy.computed == 2  # once, when it first asked


# ----------------------------------------------------------------------------- params
class Typed(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    depth: int = Field(2, ge=1)
    mode: str = "a"


class TypedPolicy(OrderingPolicy[Typed]):
    def sort_key(self, app: AppView, cluster: ClusterView) -> int:
        depth: int = self.params.depth  # mypy: an int, not Any
        return app.seq * depth


def info(name: str, value: str = "tests:Policy") -> registry.PluginInfo:
    return registry.PluginInfo(
        "policies", name, value, "tests", EntryPoint(name, value, "treadle.policies")
    )


def test_params_come_from_the_type_argument_and_are_validated() -> None:
    assert TypedPolicy.Params is Typed
    policy = registry.instantiate(TypedPolicy, info("typed"), {"depth": "3"})
    assert isinstance(policy.params, Typed)
    assert policy.params.depth == 3
    assert policy.name == "typed"
    assert TypedPolicy().name == "TypedPolicy"  # built directly: the class name
    with pytest.raises(PluginError, match="parameter 'depth'"):
        registry.instantiate(TypedPolicy, info("typed"), {"depth": 0})


def test_a_policy_declaring_params_as_before_still_works() -> None:
    class Old(OrderingPolicy):  # no type argument: params typed as any model
        Params = Typed

        def sort_key(self, app: AppView, cluster: ClusterView) -> int:
            return app.seq

    policy = registry.instantiate(Old, info("old"), {"mode": "b"})
    assert policy.params == Typed.model_validate({"mode": "b"})
    assert Old().params == Typed.model_validate({})


def test_params_and_type_argument_must_agree() -> None:
    with pytest.raises(TypeError, match=r"Params must be Typed"):

        class Bad(OrderingPolicy[Typed]):
            Params = NoParams

            def sort_key(self, app: AppView, cluster: ClusterView) -> int:
                return 0

    with pytest.raises(TypeError, match="takes Typed, not NoParams"):
        TypedPolicy(NoParams())  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- registry
def test_each_plugin_api_declares_its_group_and_base() -> None:
    apis = {"policies": rm.policy, "estimators": rm.policy.estimator, "asks": am.asks}
    assert set(apis) == set(registry.KINDS)
    for kind, module in apis.items():
        assert registry.GROUPS[kind] == module.ENTRY_POINT_GROUP
        assert registry.base_class(kind).__module__.startswith(module.__name__)
    assert registry.base_class("policies") is Policy


def test_the_registry_imports_neither_rm_nor_am() -> None:
    code = (
        "import sys, treadle.registry as r; r.discover('policies');"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rm', 'am', 'plugins')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_plugin_of_the_wrong_kind_is_refused_by_name() -> None:
    class NotAPolicy:
        pass

    ep = EntryPoint("x", "tests:NotAPolicy", "treadle.policies")
    found = registry.PluginInfo("policies", "x", ep.value, "tests", ep)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(EntryPoint, "load", lambda self: NotAPolicy)
        with pytest.raises(PluginError, match=r"not a subclass of rm\.policy\.Policy"):
            registry.load(found)


# ----------------------------------------------------------------------------- the surface
def test_placement_makes_the_same_value_as_the_constructor() -> None:
    fast = rm.policy.placement("app_1", 3)
    assert type(fast) is Placement
    assert fast == Placement("app_1", 3)
    assert hash(fast) == hash(Placement("app_1", 3))
    with pytest.raises(AttributeError):
        fast.priority = 4  # type: ignore[misc]  # frozen, as the constructor's


def test_the_contract_is_all_and_the_toolkit_is_still_importable_from_rm_policy() -> None:
    import rm.policy.toolkit as toolkit

    contract = set(rm.policy.__all__)
    assert {"Policy", "Placement", "placement", "PluginError", "AccountsPolicy"} <= contract
    assert {"ClusterView", "NodeView", "AppView", "QueueView", "UserView"} <= contract
    assert not contract & set(toolkit.__all__)  # the toolkit is not the contract
    # Every name the shipped plugins, the third-party example and the tests import from
    # rm.policy resolves, a toolkit name to the toolkit's own object.
    root = Path(__file__).parents[2]
    imported: set[str] = set()
    for path in [*root.glob("plugins/**/*.py"), *root.glob("tests/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "rm.policy":
                imported |= {a.name for a in node.names}
    assert {"OrderingPolicy", "ByShape", "Changes", "placement"} <= imported
    for name in imported:
        assert hasattr(rm.policy, name), name
        if name in toolkit.__all__:
            assert getattr(rm.policy, name) is getattr(toolkit, name), name


def test_the_module_docstring_names_every_hook_of_policy() -> None:
    doc = rm.policy.__doc__ or ""
    hooks = [n for n, v in vars(Policy).items() if inspect.isfunction(v) and n[0] != "_"]
    assert len(hooks) == 15  # on_node_heartbeat, the one required, and 14 optional hooks
    for name in hooks:
        assert f"``{name}" in doc, f"rm.policy's docstring does not say when {name} is called"
