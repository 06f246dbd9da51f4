"""Queue ACLs (issue 26, item 5): YARN's ACL strings, inherited down the tree, administer
implying submit; the RM core refuses a submission its queue's ACLs do not admit, before
anything changes, so no Dynamic Priority budget moves; workload and RM configuration
files carry the ACLs and the users' groups."""

from __future__ import annotations

import dataclasses

import pytest

from plugins.policies.dp import DpPolicy
from rm.core.facade import ResourceManager
from rm.server.config import parse_rm_config
from treadle import events as ev, registry
from treadle.acl import Acl, QueueAcls
from treadle.cluster.config import rm_config_for
from treadle.errors import InputError, PermissionDeniedError, WorkloadError
from treadle.messages import AllocateRequest, AppSubmission, Ask, NodeHeartbeat, NodeRegistration
from treadle.model import ROOT_QUEUE, QueueSpec, UserSpec
from treadle.resources import Resources
from treadle.workload import parse_workload

TASK = Resources(vcores=1, memory_mb=1024)


# ------------------------------------------------------------------ the ACL string
@pytest.mark.parametrize(
    ("text", "users", "groups"),
    [
        ("alice,bob eng,ops", {"alice", "bob"}, {"eng", "ops"}),
        ("alice", {"alice"}, set()),
        (" eng", set(), {"eng"}),
        (" alice , bob ", set(), {"alice", "bob"}),  # a leading space: all groups
        ("alice, bob", {"alice"}, {"bob"}),  # YARN splits at the first space
        (" ", set(), set()),
        ("", set(), set()),
    ],
)
def test_an_acl_names_users_then_groups(text: str, users: set[str], groups: set[str]) -> None:
    acl = Acl.parse(text)
    assert (acl.users, acl.groups, acl.everyone) == (users, groups, False)


def test_a_star_in_either_part_is_everyone_and_groups_match_a_users_groups() -> None:
    for text in ("*", " * ", "alice *", "* eng"):
        assert Acl.parse(text).admits("anyone")
    acl = Acl.parse("alice eng")
    assert acl.admits("alice")
    assert acl.admits("bea", ("dev", "eng"))
    assert not acl.admits("bea", ("dev",))
    assert not acl.admits("eng")
    assert not Acl.parse(" ").admits("alice", ("eng",))


def tree(**acls: tuple[str | None, str | None]) -> QueueSpec:
    """root -> eng -> (batch, adhoc), and ops; ``acls``: queue -> (submit, administer)."""

    def q(name: str, *children: QueueSpec) -> QueueSpec:
        submit, admin = acls.get(name, (None, None))
        return QueueSpec(name, children=children, submit_acl=submit, admin_acl=admin)

    return q(ROOT_QUEUE, q("eng", q("batch"), q("adhoc")), q("ops"))


def test_a_parent_grants_its_queues_and_administer_implies_submit() -> None:
    acls = QueueAcls(
        tree(eng=("ann", "lead"), batch=("bob", None), ops=(None, " admins")),
        {"carl": ("admins",)},
    )
    assert acls.may_submit("ann", "batch")
    assert acls.may_submit("ann", "adhoc")
    assert acls.may_submit("bob", "batch")
    assert not acls.may_submit("bob", "adhoc")
    assert acls.may_submit("lead", "adhoc")
    assert acls.may_administer("lead", "batch")
    assert not acls.may_administer("ann", "batch")  # submitting is not administering
    assert acls.may_submit("carl", "ops")
    assert acls.may_administer("carl", "ops")
    assert not acls.may_submit("carl", "batch")
    assert not acls.may_submit("ann", "ops")
    refusal = acls.submit_refusal("bob", "adhoc")
    assert refusal is not None
    assert "'root.eng.adhoc'" in refusal


def test_no_acl_in_the_tree_admits_everyone_and_a_root_star_admits_everyone() -> None:
    open_tree = QueueAcls(tree(), {})
    assert not open_tree.enabled
    assert open_tree.may_submit("anyone", "batch")
    assert open_tree.may_administer("x", "ops")
    yarn_root = QueueAcls(tree(root=("*", "*"), batch=("bob", None)), {})
    assert yarn_root.may_submit("anyone", "batch")  # why YARN's root must be narrowed
    root_admin = QueueAcls(tree(root=(" ", "*"), batch=("bob", None)), {})
    assert root_admin.may_submit("anyone", "batch")  # everyone administers the root


# ------------------------------------------------------------------ the RM core
def two_user_rm() -> ResourceManager:
    """DP on one node: queues alice and bob, each open to its user only, with budgets."""
    queues = QueueSpec(
        ROOT_QUEUE,
        children=(
            QueueSpec("alice", budget=100_000.0, spending_rate=1.0, submit_acl="alice"),
            QueueSpec("bob", budget=100_000.0, spending_rate=1.0, submit_acl="bob"),
        ),
    )
    rm = ResourceManager(registry.build("policies", "dp", {"interval_s": 1.0}), queues=queues)
    rm.register_node(NodeRegistration("n1", Resources(vcores=4, memory_mb=4096)), 0.0)
    return rm


def heartbeats(rm: ResourceManager, times: range) -> None:
    for t in times:
        rm.node_heartbeat(NodeHeartbeat("n1", t), float(t))
        rm.tick(float(t))


def test_a_submission_to_a_queue_its_user_may_not_use_is_refused_and_spends_nothing() -> None:
    rm = two_user_rm()
    before = rm.accounts.balances()
    with pytest.raises(
        PermissionDeniedError, match=r"user 'bob' may not submit to queue 'root\.alice'"
    ):
        rm.submit_application(AppSubmission("steal", "bob", "alice", 1), 0.0)
    assert rm.state.apps == {}
    assert rm.log.of(ev.JOB_SUBMITTED) == []
    heartbeats(rm, range(1, 4))
    assert rm.accounts.balances() == before
    # The owner's own submission runs and spends its own budget, as before.
    app = rm.submit_application(AppSubmission("mine", "alice", "alice", 1), 4.0)
    rm.register_application_master(app, 4.0)
    rm.on_allocate(AllocateRequest(app, [Ask(0, TASK, 1)]), 4.0)
    heartbeats(rm, range(5, 8))
    after = rm.accounts.balances()
    assert after["alice"].budget < before["alice"].budget
    assert after["bob"] == before["bob"]


def test_a_tree_without_acls_admits_every_user_as_before() -> None:
    rm = ResourceManager(DpPolicy(), queues=QueueSpec(ROOT_QUEUE, children=(QueueSpec("alice"),)))
    assert rm.submit_application(AppSubmission("j", "bob", "alice", 1), 0.0)


# ------------------------------------------------------------------ the files
WORKLOAD = """\
cluster: {nodes: [{resources: {vcores: 4, memory_mb: 4096}}]}
users:
  alice: {groups: [analysts]}
  bob: {}
queues:
  - {name: alice, budget: 100000, spending_rate: 1, acl_submit_applications: " analysts"}
  - {name: shared, acl_submit_applications: "*"}
jobs:
  - name: a
    user: alice
    queue: alice
    submit_s: 0
    stages: [&stage {name: s, tasks: 1, duration_s: 1, resources: {vcores: 1, memory_mb: 1024}}]
  - {name: b, user: bob, queue: shared, submit_s: 0, stages: [*stage]}
"""


def test_a_workload_carries_acls_and_groups_and_refuses_a_job_its_rm_would() -> None:
    wl = parse_workload(WORKLOAD, "w.yaml")
    assert wl.queues.children[0].submit_acl == " analysts"
    assert wl.users["alice"].groups == ("analysts",)
    config = parse_rm_config(rm_config_for(wl), "rm.yaml")  # what a cluster's RM gets
    assert config.queues == wl.queues
    assert config.users == wl.users
    bad = WORKLOAD.replace("user: bob, queue: shared", "user: bob, queue: alice")
    with pytest.raises(WorkloadError, match=r"w\.yaml: job 'b': user 'bob' may not submit"):
        parse_workload(bad, "w.yaml")


def test_an_rm_configuration_sets_both_acls() -> None:
    config = parse_rm_config(
        "queues: [{name: a, acl_administer_queue: 'dana ops', acl_submit_applications: ' '}]\n"
        "users: {carl: {groups: [ops]}}\n",
        "rm.yaml",
    )
    acls = QueueAcls(config.queues, {"carl": config.users["carl"].groups})
    assert acls.may_submit("dana", "a")
    assert acls.may_administer("carl", "a")
    assert not acls.may_submit("ops", "a")
    assert not acls.may_submit("bob", "a")
    assert config.users["carl"] == UserSpec("carl", groups=("ops",))


def test_a_root_entry_gives_the_roots_acls_and_an_rm_configuration_keeps_them() -> None:
    """A YAML tree's root is implicit, so sets no ACL (names nobody); an only entry named
    ``root`` sets its ACLs, and a cluster's RM configuration writes them back."""
    config = parse_rm_config(
        "queues:\n"
        "  - name: root\n"
        "    acl_administer_queue: ops\n"
        "    queues: [{name: a, acl_submit_applications: ann}, {name: b}]\n",
        "rm.yaml",
    )
    assert (config.queues.admin_acl, config.queues.submit_acl) == ("ops", None)
    acls = QueueAcls(config.queues, {})
    assert acls.may_submit("ops", "b")
    assert acls.may_submit("ann", "a")
    assert not acls.may_submit("ann", "b")
    wl = parse_workload(WORKLOAD, "w.yaml")
    with_root = dataclasses.replace(wl, queues=config.queues)
    assert parse_rm_config(rm_config_for(with_root), "again.yaml").queues == config.queues
    with pytest.raises(InputError, match=r"rm\.yaml: queues\[0\]: the root takes no weight"):
        parse_rm_config("queues: [{name: root, weight: 2, queues: [{name: a}]}]\n", "rm.yaml")
