"""YARN scheduler configurations as queue trees (``--queues``, ``treadle queues``).

The SLS samples ``sls/capacity-scheduler.xml`` and ``sls/fair-scheduler-allocation.xml``
(apache/hadoop, hadoop-tools/hadoop-sls, Apache-2.0) are read in place from the shared
trace directory; the rest are small files written here.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from treadle.errors import InputError
from treadle.importers.sls import load_sls
from treadle.importers.yarnconf import load_queues
from treadle.importers.yarnqueues import QueueConfigError, apply_queues, describe_queues
from treadle.model import QUEUE_STOPPED, ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources

TRACES = Path(__file__).resolve().parents[3] / "shared" / "traces" / "sls"
CAPACITY_XML = TRACES / "capacity-scheduler.xml"
FAIR_XML = TRACES / "fair-scheduler-allocation.xml"
needs_samples = pytest.mark.skipif(
    not TRACES.is_dir(), reason=f"{TRACES} is absent (../shared is not beside the checkout)"
)
TREADLE = [sys.executable, "-m", "treadle.cli"]
TASK = Resources(vcores=1, memory_mb=1024)


def treadle(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        TREADLE + list(args), capture_output=True, text=True, timeout=300, cwd=cwd
    )


def capacity_xml(tmp_path: Path, **props: str) -> Path:
    body = "".join(
        f"<property><name>yarn.scheduler.capacity.{k}</name><value>{v}</value></property>"
        for k, v in props.items()
    )
    path = tmp_path / "capacity-scheduler.xml"
    path.write_text(f"<?xml version='1.0'?><configuration>{body}</configuration>")
    return path


def fair_xml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "fair.xml"
    path.write_text(f"<allocations>{body}</allocations>")
    return path


def workload(*jobs: tuple[str, str, str]) -> Workload:
    """Jobs (name, user, queue) of one short task each on one node."""
    stage = (StageSpec("s", TASK, (1.0,)),)
    specs = tuple(JobSpec(n, u, float(i), stage, q) for i, (n, u, q) in enumerate(jobs))
    node = NodeSpec("n1", Resources(vcores=4, memory_mb=8192))
    return Workload("w", ClusterSpec((node,)), specs)


TWO = {"root.queues": "a,b", "root.a.capacity": "40", "root.b.capacity": "60"}


# The SLS samples ---------------------------------------------------------------------


@needs_samples
def test_sls_capacity_file_is_its_three_queues_with_their_capacities() -> None:
    q = load_queues(CAPACITY_XML)
    leaves = {c.name: (c.capacity, c.max_capacity) for c in q.root.children}
    assert leaves == {
        "sls_queue_1": (25.0, 100.0),
        "sls_queue_2": (25.0, 100.0),
        "sls_queue_3": (50.0, 100.0),
    }
    assert dict(q.root.children[0].unmodelled) == {
        "reservable": "true",
        "show-reservations-as-queues": "true",
    }
    assert [w.split(": ")[1] for w in q.warnings()] == [
        "reservable (at root.sls_queue_1)",
        "show-reservations-as-queues (at root.sls_queue_1)",
    ]


@needs_samples
def test_sls_fair_file_is_its_weights_plus_root_default() -> None:
    q = load_queues(FAIR_XML)
    assert {c.name: c.weight for c in q.root.children} == {
        "sls_queue_1": 0.25,
        "sls_queue_2": 0.25,
        "sls_queue_3": 0.5,
        "default": 1.0,
    }
    third = q.root.children[2]  # its FairScheduler properties are honoured now
    assert dict(third.unmodelled) == {}
    assert third.min_resources == Resources(memory_mb=1024, vcores=1)
    assert third.scheduling_policy == "fair"
    assert third.min_share_preemption_timeout_s == 2.0
    warned = " ".join(q.warnings())
    assert "jenkins" in warned
    for name in ("minResources", "schedulingMode", "minSharePreemptionTimeout"):
        assert name not in warned
    assert [r.kind for r in q.placement] == ["specified", "user", "default"]


@needs_samples
def test_sls_trace_keeps_its_queues_under_either_file() -> None:
    wl = load_sls(TRACES / "inputsls.json")
    for xml in (CAPACITY_XML, FAIR_XML):
        placed, refused = apply_queues(wl, load_queues(xml))
        assert refused == []
        assert [j.queue for j in placed.jobs] == ["sls_queue_1", "sls_queue_2"]
        assert "sls_queue_3" in placed.leaf_queues


@needs_samples
def test_treadle_queues_prints_the_tree_and_strict_refuses_the_sample(tmp_path: Path) -> None:
    shown = treadle("queues", str(CAPACITY_XML))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[1:5] == [
        "root  capacity 100%, max 100%",
        "  sls_queue_1  capacity 25%, max 100%  "
        "[not modelled: reservable=true, show-reservations-as-queues=true]",
        "  sls_queue_2  capacity 25%, max 100%",
        "  sls_queue_3  capacity 50%, max 100%",
    ]
    assert "warning:" in shown.stderr
    assert "reservable" in shown.stderr
    strict = treadle("queues", "--strict", str(FAIR_XML))
    assert strict.returncode == 2
    assert strict.stderr.splitlines()[-1].startswith("error: ")
    assert "(--strict)" in strict.stderr.splitlines()[-1]


@needs_samples
@pytest.mark.parametrize("xml", [CAPACITY_XML, FAIR_XML], ids=["capacity", "fair"])
def test_compare_of_the_sls_trace_runs_under_either_file(tmp_path: Path, xml: Path) -> None:
    proc = treadle(
        "compare", str(TRACES / "inputsls.json"), "--out", str(tmp_path / "out"),
        "--policies", "capacity,fair", "--queues", str(xml), "--workers", "1",
        "--no-slowdown", "--events", "none",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("2/2") == 2


# Warnings and errors -----------------------------------------------------------------


def test_unknown_property_warns_naming_it_and_strict_fails(tmp_path: Path) -> None:
    path = capacity_xml(tmp_path, **TWO, **{"root.a.frobnicate": "7"})
    q = load_queues(path)
    assert len(q.warnings()) == 1
    assert "frobnicate (at root.a)" in q.warnings()[0]
    with pytest.raises(InputError, match=r"root\.a\.frobnicate: not modelled"):
        load_queues(path, strict=True)
    w = workload(("j", "u", "a"))
    proc = treadle("queues", str(path), "--strict")
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert apply_queues(w, q)[0].jobs[0].queue == "a"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"root.queues": "a,b", "root.a.capacity": "40", "root.b.capacity": "50"}, "sum to 90"),
        ({**TWO, "root.a.capacity": "forty"}, "expected a number"),
        ({**TWO, "root.a.maximum-capacity": "30"}, "exceeds maximum-capacity 30"),
        ({**TWO, "root.b.state": "PAUSED"}, "expected RUNNING or STOPPED"),
        ({"root.queues": "a,a", "root.a.capacity": "100"}, "listed twice"),
        ({**TWO, "queue-mappings": "u:alice"}, "expected u:USER:QUEUE"),
        ({"root.a.capacity": "100"}, "the root lists no queues"),
    ],
)
def test_malformed_capacity_file_is_one_line_naming_the_property(
    tmp_path: Path, props: dict[str, str], message: str
) -> None:
    path = capacity_xml(tmp_path, **props)
    with pytest.raises(InputError, match=message) as e:
        load_queues(path)
    assert str(e.value).startswith(str(path))
    assert "\n" not in str(e.value)


def test_malformed_xml_fails_with_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<configuration><property><name>x</name></configuration>")
    proc = treadle("queues", str(bad))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {bad}: line 1, column 42: not well-formed XML (mismatched tag)"
    ]


def test_entities_are_refused_before_parsing(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.xml"
    bomb.write_text(
        '<?xml version="1.0"?><!DOCTYPE c [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;">]>'
        "<configuration><property><name>&b;</name><value>1</value></property></configuration>"
    )
    with pytest.raises(InputError, match="has a DTD"):
        load_queues(bomb)


def test_neither_format_is_named(tmp_path: Path) -> None:
    path = tmp_path / "x.xml"
    path.write_text("<yarn/>")
    with pytest.raises(InputError, match=r"neither a capacity-scheduler\.xml"):
        load_queues(path)


def test_fair_root_alongside_other_queues_and_dotted_names_are_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="only top-level queue"):
        load_queues(fair_xml(tmp_path, '<queue name="root"/><queue name="x"/>'))
    with pytest.raises(InputError, match="no period"):
        load_queues(fair_xml(tmp_path, '<queue name="a.b"/>'))
    with pytest.raises(InputError, match=r"root\.a\.maxRunningApps: 'x' is not a number"):
        load_queues(
            fair_xml(tmp_path, '<queue name="a"><maxRunningApps>x</maxRunningApps></queue>')
        )


def test_same_leaf_name_under_two_parents_is_an_error(tmp_path: Path) -> None:
    body = '<queue name="p"><queue name="x"/></queue><queue name="q"><queue name="x"/></queue>'
    with pytest.raises(InputError, match=r"'x' is also root\.p\.x"):
        load_queues(fair_xml(tmp_path, body))


# What maps ---------------------------------------------------------------------------


def test_nested_capacity_tree_and_its_job_paths(tmp_path: Path) -> None:
    path = capacity_xml(
        tmp_path,
        **{"root.queues": "eng,ops", "root.eng.capacity": "70", "root.ops.capacity": "30"},
        **{"root.eng.queues": "batch,adhoc", "root.eng.batch.capacity": "80"},
        **{"root.eng.adhoc.capacity": "20", "root.eng.adhoc.maximum-capacity": "50"},
    )
    q = load_queues(path)
    eng = q.root.children[0]
    assert [(c.name, c.capacity, c.max_capacity) for c in eng.children] == [
        ("batch", 80.0, 100.0),
        ("adhoc", 20.0, 50.0),
    ]
    w = workload(("j1", "u", "batch"), ("j2", "u", "root.eng.adhoc"), ("j3", "u", "ops"))
    assert [j.queue for j in apply_queues(w, q)[0].jobs] == ["batch", "adhoc", "ops"]
    with pytest.raises(InputError, match="goes to a parent queue"):
        apply_queues(workload(("j", "u", "eng")), q)
    with pytest.raises(InputError, match="'nosuch', which the file does not define"):
        apply_queues(workload(("j", "u", "nosuch")), q)


def test_capacity_mappings_place_jobs_that_name_no_queue(tmp_path: Path) -> None:
    mappings = {"queue-mappings": "u:alice:b, u:%user:%user, g:staff:a"}
    three = {
        **TWO,
        "root.queues": "a,b,carol",
        "root.b.capacity": "30",
        "root.carol.capacity": "30",
    }
    q = load_queues(capacity_xml(tmp_path, **three, **mappings))
    w = workload(("j1", "alice", "default"), ("j2", "carol", "default"), ("j3", "alice", "a"))
    # j3 names its queue: without the override the mapping leaves it there.
    assert [j.queue for j in apply_queues(w, q)[0].jobs] == ["b", "carol", "a"]
    assert any("g:staff:a" in line for line in describe_queues(q) + q.warnings())


def test_capacity_mapping_override_moves_named_jobs(tmp_path: Path) -> None:
    props = {**TWO, "queue-mappings": "u:alice:b", "queue-mappings-override.enable": "true"}
    q = load_queues(capacity_xml(tmp_path, **props))
    w = workload(("j1", "alice", "a"), ("j2", "bob", "a"))
    assert [j.queue for j in apply_queues(w, q)[0].jobs] == ["b", "a"]


def test_fair_placement_rules_in_order(tmp_path: Path) -> None:
    body = (
        '<queue name="alice"/><queue name="etl"/>'
        "<queuePlacementPolicy>"
        '<rule name="specified" create="false"/><rule name="user" create="false"/>'
        '<rule name="primaryGroup"/><rule name="default" queue="etl"/>'
        "</queuePlacementPolicy>"
    )
    q = load_queues(fair_xml(tmp_path, body))
    w = workload(
        ("named", "bob", "etl"), ("by-user", "alice", "default"), ("fallback", "bob", "default")
    )
    assert [j.queue for j in apply_queues(w, q)[0].jobs] == ["etl", "alice", "etl"]
    assert "queuePlacementPolicy rule primaryGroup" in " ".join(q.warnings())


def test_fair_reject_rule_refuses_the_job_with_a_warning(tmp_path: Path) -> None:
    body = (
        '<queue name="etl"/><queuePlacementPolicy><rule name="specified" create="false"/>'
        '<rule name="reject"/></queuePlacementPolicy>'
    )
    placed, lines = apply_queues(
        workload(("ok", "u", "etl"), ("no", "u", "default")), load_queues(fair_xml(tmp_path, body))
    )
    assert [j.name for j in placed.jobs] == ["ok"]
    assert len(lines) == 1
    assert "1 job(s) refused" in lines[0]
    assert "no" in lines[0]


def test_stopped_queue_takes_no_submissions(tmp_path: Path) -> None:
    q = load_queues(capacity_xml(tmp_path, **TWO, **{"root.b.state": "stopped"}))
    assert q.root.children[1].state == QUEUE_STOPPED
    placed, lines = apply_queues(workload(("j1", "u", "a"), ("j2", "u", "b")), q)
    assert [j.name for j in placed.jobs] == ["j1"]
    assert "root.b is STOPPED" in lines[0]
    assert "STOPPED" in "\n".join(describe_queues(q))
    with pytest.raises(InputError, match="refuses every job"):
        apply_queues(workload(("j2", "u", "b")), q)


CLOSED_ROOT = {"root.acl_submit_applications": " ", "root.acl_administer_queue": " "}
"""The root admits nobody, to submit or to administer: the leaves' ACLs decide."""


def test_submit_acls_admit_users_up_the_path(tmp_path: Path) -> None:
    acls = {**CLOSED_ROOT, "root.a.acl_submit_applications": "alice,bob staff"}
    q = load_queues(capacity_xml(tmp_path, **TWO, **acls))
    w = workload(("j1", "alice", "a"), ("j2", "carol", "a"), ("j3", "alice", "b"))
    placed, lines = apply_queues(w, q)
    assert [j.name for j in placed.jobs] == ["j1"]
    assert [line.rpartition(": ")[2] for line in lines] == ["j2", "j3"]
    assert all("acl_administer_queue on root." in line for line in lines)
    # The root's default ACLs are everyone: a leaf's own ACL then restricts no one.
    open_root = load_queues(
        capacity_xml(tmp_path, **TWO, **{"root.a.acl_submit_applications": "x"})
    )
    assert len(apply_queues(w, open_root)[0].jobs) == 3
    # Nor does narrowing the root's submit ACL alone: everyone administers the root.
    half_closed = {"root.acl_submit_applications": " ", "root.a.acl_submit_applications": "x"}
    assert (
        len(apply_queues(w, load_queues(capacity_xml(tmp_path, **TWO, **half_closed)))[0].jobs) == 3
    )


def test_administer_acls_admit_submissions_and_groups_count(tmp_path: Path) -> None:
    """acl_administer_queue implies submitting, down the tree; a group of the workload's
    users mapping counts as a name."""
    from treadle.model import UserSpec

    acls = {
        **CLOSED_ROOT,
        "root.a.acl_administer_queue": "ops",
        "root.b.acl_submit_applications": " eng",
    }
    q = load_queues(capacity_xml(tmp_path, **TWO, **acls))
    assert "administer acl 'ops'" in "\n".join(describe_queues(q))
    assert not [w for w in q.warnings() if "acl_administer_queue" in w]  # modelled now
    w = workload(("j1", "ops", "a"), ("j2", "bea", "b"), ("j3", "bea", "a"), ("j4", "ops", "b"))
    w = dataclasses.replace(w, users={"bea": UserSpec("bea", groups=("eng",))})
    placed, lines = apply_queues(w, q)
    assert [j.name for j in placed.jobs] == ["j1", "j2"]
    assert [line.rpartition(": ")[2] for line in lines] == ["j3", "j4"]


def test_workload_without_queues_flag_is_unchanged(tmp_path: Path) -> None:
    """A run without --queues gets the workload's own tree (the golden runs' case)."""
    from treadle.cli.queues import with_queues

    w = workload(("j", "u", "default"))
    assert with_queues(w, None, False) is w


def test_a_stock_capacity_file_is_one_default_queue_and_its_warnings(tmp_path: Path) -> None:
    """The shape of the capacity-scheduler.xml Hadoop ships: scheduler-wide limits, one
    ``default`` queue with a user limit and open ACLs, empty mappings."""
    props = {
        "maximum-applications": "10000",
        "maximum-am-resource-percent": "0.1",
        "root.queues": "default",
        "root.capacity": "100",
        "root.default.capacity": "100",
        "root.default.user-limit-factor": "1",
        "root.default.state": "RUNNING",
        "root.default.acl_submit_applications": "*",
        "queue-mappings": "",
        "queue-mappings-override.enable": "false",
    }
    q = load_queues(capacity_xml(tmp_path, **props))
    assert [(c.name, c.capacity, c.submit_acl, c.user_limit_factor) for c in q.root.children] == [
        ("default", 100.0, "*", 1.0)
    ]
    assert q.placement == ()
    # The leaf's user-limit-factor is honoured, and the scheduler-wide limits are its
    # defaults (its maximum: 10000 x its absolute capacity), so nothing is warned of.
    assert q.warnings() == []
    default = q.root.children[0]
    assert (default.maximum_applications, default.maximum_am_resource_percent) == (10000, 0.1)
    placed, refused = apply_queues(workload(("j", "anyone", "default")), q)
    assert (placed.jobs[0].queue, refused) == ("default", [])


def test_fair_root_element_nesting_and_a_childless_parent(tmp_path: Path) -> None:
    body = (
        '<queue name="root"><aclSubmitApps> </aclSubmitApps>'
        "<aclAdministerApps> </aclAdministerApps>"
        '<queue name="eng"><weight>3</weight><queue name="batch"><aclSubmitApps>ann'
        '</aclSubmitApps></queue></queue><queue name="users" type="parent"/></queue>'
    )
    q = load_queues(fair_xml(tmp_path, body))
    assert [(p, s.weight) for p, s in q.paths().items()] == [
        ("root", 1.0),
        ("root.eng", 3.0),
        ("root.eng.batch", 1.0),
        ("root.users", 1.0),
        ("root.default", 1.0),
    ]
    w = workload(("j1", "ann", "eng.batch"), ("j2", "bob", "root.eng.batch"))
    placed, lines = apply_queues(w, q)
    assert [j.name for j in placed.jobs] == ["j1"]
    assert "on root.eng.batch or a parent admits" in lines[0]
    with pytest.raises(InputError, match="goes to a parent queue"):
        apply_queues(workload(("j", "ann", "users")), q)


def test_a_capacity_files_leaf_limits_are_read_and_bad_ones_named(tmp_path: Path) -> None:
    props = {
        **TWO,
        "root.a.user-limit-factor": "2",
        "root.a.minimum-user-limit-percent": "25",
        "root.a.maximum-applications": "3",
        "root.a.maximum-am-resource-percent": "0.5",
        "root.a.ordering-policy": "fair",
    }
    q = load_queues(capacity_xml(tmp_path, **props))
    a = q.root.children[0]
    assert (a.user_limit_factor, a.minimum_user_limit_percent, a.maximum_applications) == (
        2.0,
        25.0,
        3,
    )
    assert (a.maximum_am_resource_percent, a.ordering_policy, a.unmodelled) == (0.5, "fair", ())
    assert q.warnings() == []
    bad = {**TWO, "root.b.ordering-policy": "priority-utilization"}
    with pytest.raises(QueueConfigError, match=r"root.b.ordering-policy.*fifo or fair"):
        load_queues(capacity_xml(tmp_path, **bad))
    bad = {**TWO, "root.b.maximum-am-resource-percent": "10"}
    with pytest.raises(QueueConfigError, match=r"maximum-am-resource-percent.*out of range"):
        load_queues(capacity_xml(tmp_path, **bad))


def test_scheduler_wide_application_limits_default_each_leaf(tmp_path: Path) -> None:
    """YARN's ``maximum-applications`` (system) x a leaf's absolute capacity, rounded
    down, and the system's AM share, for the leaves that set neither themselves."""
    props = {
        **TWO,
        "maximum-applications": "100",
        "maximum-am-resource-percent": "0.25",
        "root.b.maximum-applications": "7",
    }
    a, b = load_queues(capacity_xml(tmp_path, **props)).root.children
    assert (a.maximum_applications, a.maximum_am_resource_percent) == (40, 0.25)
    assert (b.maximum_applications, b.maximum_am_resource_percent) == (7, 0.25)


def test_treadle_queues_prints_a_leafs_capacity_limits(tmp_path: Path) -> None:
    limits = {
        "root.a.user-limit-factor": "2",
        "root.a.minimum-user-limit-percent": "50",
        "root.b.maximum-applications": "7",
        "root.b.maximum-am-resource-percent": "0.2",
        "root.b.ordering-policy": "fair",
    }
    lines = describe_queues(load_queues(capacity_xml(tmp_path, **TWO, **limits)))
    a = next(line for line in lines if line.strip().startswith("a "))
    b = next(line for line in lines if line.strip().startswith("b "))
    assert "user limit factor 2; min user limit 50%" in a
    assert "max applications 7; AM share 0.2; ordering fair" in b
    assert "not modelled" not in a + b
