"""Scaling a loaded workload: node count and offered load (``treadle.workload.scaling``)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from treadle.errors import InputError
from treadle.model import NodeSpec
from treadle.resources import Resources
from treadle.workload import load_workload
from treadle.workload.scaling import (
    arrival_span,
    offered_load,
    scaled_node_count,
    with_load,
    with_nodes,
)


def test_more_nodes_copy_the_existing_ones_in_turn() -> None:
    wl = load_workload("demo")
    big = with_nodes(wl, 10)
    ids = [n.node_id for n in big.cluster.nodes]
    assert ids[:4] == [n.node_id for n in wl.cluster.nodes]
    assert ids[4:] == ["node1-1", "node2-1", "node3-1", "node4-1", "node1-2", "node2-2"]
    assert [n.rack for n in big.cluster.nodes[4:8]] == [n.rack for n in wl.cluster.nodes]
    assert big.cluster.capacity["vcores"] == 10 * 8
    assert big.jobs == wl.jobs


def test_fewer_nodes_keep_the_first_ones() -> None:
    wl = load_workload("demo")
    assert [n.node_id for n in with_nodes(wl, 1).cluster.nodes] == ["node1"]
    assert scaled_node_count(wl, 0.5) == 2
    assert scaled_node_count(wl, 0.01) == 1  # never none
    assert scaled_node_count(wl, 2.5) == 10


def test_a_node_count_that_strands_a_job_is_refused() -> None:
    wl = load_workload("demo")
    one_small_node = (NodeSpec("n1", Resources({"vcores": 1, "memory_mb": 1024})),)
    stranded = dataclasses.replace(
        wl, cluster=dataclasses.replace(wl.cluster, nodes=one_small_node)
    )
    with pytest.raises(InputError, match="--nodes 2: no node left fits job"):
        with_nodes(stranded, 2)


def test_offered_load_is_the_busiest_resource_over_the_arrival_span() -> None:
    wl = load_workload("demo")
    cap = wl.cluster.capacity
    demand = max(
        sum(s.resources[r] * s.work_s for j in wl.jobs for s in j.stages) / cap[r] for r in cap
    )
    assert offered_load(wl) == pytest.approx(demand / arrival_span(wl))
    assert offered_load(with_nodes(wl, 8)) == pytest.approx(offered_load(wl) / 2)


@pytest.mark.parametrize("target", [0.25, 1.0, 3.0])
def test_a_target_load_stretches_or_compresses_arrivals(target: float) -> None:
    wl = load_workload("demo")
    scaled, before, factor = with_load(wl, target)
    assert before == pytest.approx(offered_load(wl))
    assert offered_load(scaled) == pytest.approx(target, rel=1e-3)
    assert factor == pytest.approx(before / target)
    assert [j.name for j in scaled.jobs] == [j.name for j in wl.jobs]  # order kept
    assert min(j.submit_s for j in scaled.jobs) == min(j.submit_s for j in wl.jobs)
    assert [j.stages for j in scaled.jobs] == [j.stages for j in wl.jobs]


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan, 101.0])
def test_a_load_out_of_bounds_is_one_input_error(bad: float) -> None:
    with pytest.raises(InputError, match="--load: must be > 0"):
        with_load(load_workload("demo"), bad)


def test_a_load_needs_arrivals_at_different_times() -> None:
    wl = load_workload("demo")
    at_once = dataclasses.replace(
        wl, jobs=tuple(dataclasses.replace(j, submit_s=0.0) for j in wl.jobs)
    )
    with pytest.raises(InputError, match="all arrive at one time"):
        with_load(at_once, 1.0)
