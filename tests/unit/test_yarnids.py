"""treadle.yarnids: YARN's ids written and read as Hadoop's records do, and the RM core
naming its applications, attempts and containers with them."""

from __future__ import annotations

import random

import pytest

from plugins.policies.fifo import FifoPolicy
from rm.core.facade import ResourceManager
from treadle.messages import AppSubmission, NodeHeartbeat, NodeRegistration
from treadle.resources import Resources
from treadle.yarnids import (
    APP_ID_SHAPE,
    CONTAINER_ID_SHAPE,
    SIM_CLUSTER_TIMESTAMP,
    AppId,
    app_sort_key,
    container_sort_key,
    format_app_id,
    format_attempt_id,
    format_container_id,
    format_node_id,
    parse_app_id,
    parse_attempt_id,
    parse_container_id,
    parse_node_id,
)

TS = 1410901177871  # the timestamp of Hadoop's own example ids
NODE = Resources(vcores=4, memory_mb=8192)


def test_ids_are_written_as_hadoops_to_string() -> None:
    assert format_app_id(TS, 1) == "application_1410901177871_0001"
    assert format_app_id(TS, 12345) == "application_1410901177871_12345"  # wider when needed
    assert format_attempt_id(format_app_id(TS, 7), 2) == "appattempt_1410901177871_0007_000002"
    assert format_attempt_id("application_00007", 2) == "appattempt_00007_000002"  # an old store's
    # ContainerId.toString's own examples: the epoch only when it is above 0.
    assert format_container_id(AppId(TS, 1), 1, 5) == "container_1410901177871_0001_01_000005"
    assert (
        format_container_id(AppId(TS, 1), 1, 5, epoch=17)
        == "container_e17_1410901177871_0001_01_000005"
    )
    assert format_container_id(AppId(TS, 1), 1, 5, epoch=1).startswith("container_e01_")
    assert format_container_id(AppId(TS, 1), 123, 1234567).endswith("_0001_123_1234567")


def test_ids_read_back_as_they_were_written_and_bad_ones_say_so() -> None:
    rng = random.Random(3)
    for _ in range(200):
        app = AppId(rng.randrange(10**13), rng.randrange(1, 10**6))
        attempt, n, epoch = rng.randrange(1, 200), rng.randrange(1, 10**7), rng.randrange(3)
        assert parse_app_id(str(app)) == app
        assert parse_attempt_id(format_attempt_id(app, attempt)) == (app, attempt)
        c = parse_container_id(format_container_id(app, attempt, n, epoch))
        assert (c.app, c.attempt.attempt, c.n, c.epoch) == (app, attempt, n, epoch)
        assert str(c) == format_container_id(app, attempt, n, epoch)
    for bad in ("application_00001", "application_1_", "application_+1_0001", "app_1_0001",
                "application_\uff11_0001", " application_1_0001"):  # fmt: skip
        with pytest.raises(ValueError, match="invalid ApplicationId"):
            parse_app_id(bad)
    with pytest.raises(ValueError, match="invalid ContainerId"):
        parse_container_id("container_00001_000001")  # treadle's ids before YARN's
    with pytest.raises(ValueError, match="invalid ApplicationAttemptId"):
        parse_attempt_id("appattempt_1_0001")


def test_ids_sort_by_their_numbers_not_as_strings() -> None:
    apps = [format_app_id(TS, n) for n in (10000, 9999, 2, 1)]
    assert sorted(apps) != sorted(apps, key=app_sort_key)  # as strings, 10000 < 9999
    assert sorted(apps, key=app_sort_key) == [format_app_id(TS, n) for n in (1, 2, 9999, 10000)]
    assert sorted(["x", apps[0]], key=app_sort_key) == ["x", apps[0]]
    cs = [
        format_container_id(AppId(TS, 10000), 1, 1),
        format_container_id(AppId(TS, 9999), 2, 1),
        format_container_id(AppId(TS, 9999), 1, 1, epoch=1),
        format_container_id(AppId(TS, 9999), 1, 1000000),
        format_container_id(AppId(TS, 9999), 1, 2),
    ]
    # ContainerId.compareTo: application, attempt, then epoch and number.
    assert sorted(cs, key=container_sort_key) == [cs[4], cs[3], cs[2], cs[1], cs[0]]
    assert container_sort_key("container_x")[-1] == "container_x"


def test_nodes_are_shown_as_host_and_port() -> None:
    assert format_node_id("node1") == "node1:8041"
    assert format_node_id("host-7.example:45454") == "host-7.example:45454"  # kept
    assert format_node_id("") == ""
    assert parse_node_id("node1:8041") == ("node1", 8041)
    with pytest.raises(ValueError, match="invalid NodeId"):
        parse_node_id("node1")


def _containers(rm: ResourceManager, now: float) -> list[str]:
    rm.node_heartbeat(NodeHeartbeat("n1", int(now)), now)
    return [c.container_id for c in rm.take_effects().am_launches]


def test_each_attempt_numbers_its_containers_from_one_in_the_rms_epoch() -> None:
    """YARN's ContainerId: the attempt in the id, each attempt's AM container 000001; a
    restarted RM's containers carry its epoch, its new applications its timestamp."""
    rm = ResourceManager(FifoPolicy(), am_resources=Resources(vcores=1, memory_mb=512))
    rm.register_node(NodeRegistration("n1", NODE), 0.0)
    sub = AppSubmission("j", "alice", "default", 1, managed_am=True)
    app = rm.submit_application(sub, 0.0)
    assert app == f"application_{SIM_CLUSTER_TIMESTAMP}_0001"
    assert _containers(rm, 1.0) == [f"container_{SIM_CLUSTER_TIMESTAMP}_0001_01_000001"]
    rm.register_application_master(app, 1.5)
    rm.fail_attempt(app, "test", 2.0)
    assert _containers(rm, 3.0) == [f"container_{SIM_CLUSTER_TIMESTAMP}_0001_02_000001"]

    again = ResourceManager(
        FifoPolicy(), am_resources=Resources(vcores=1, memory_mb=512), cluster_timestamp=TS
    )
    again.restore(rm.app_records(), 4.0, rm_epoch=1, next_seq=rm.apps.next_seq)
    again.register_node(NodeRegistration("n1", NODE), 4.0)
    # Attempt 2's AM container went with the restart before it registered: attempt 2 is
    # started again, its container named in epoch 1 (no id is handed out twice).
    assert _containers(again, 5.0) == [f"container_e01_{SIM_CLUSTER_TIMESTAMP}_0001_02_000001"]
    fresh = again.submit_application(sub, 6.0)
    assert fresh == f"application_{TS}_0002"  # the new RM's timestamp; the numbers go on
    assert _containers(again, 7.0) == [f"container_e01_{TS}_0002_01_000001"]
    assert all(APP_ID_SHAPE.fullmatch(a) for a in (app, fresh))
    assert CONTAINER_ID_SHAPE.fullmatch(f"container_e01_{TS}_0002_01_000001")
