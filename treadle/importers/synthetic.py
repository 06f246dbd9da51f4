"""Synthetic query DAGs shaped like the TPC-DS, TPC-H and BigBench jobs in Carbyne's study.

Carbyne (Grandl et al., "Altruistic Scheduling in Multi-Resource Clusters", OSDI 2016)
characterises the DAGs of its benchmark workloads in its Table 1 (50th and 95th
percentiles of the number of stages, of barriers -- stages with several parents -- and
of "Input Work", which we read as the share of a job's work in its input stages) and its
Table 2 (critical-path length in stages; the seed's text
keeps only the sentence "the median length of the critical path of DAGs is 5 in these
workloads", the per-workload figures were lost). ``SHAPES`` holds those figures:

=========  ==========  ========  ===========  =============
shape      stages      barriers  input work   critical path
=========  ==========  ========  ===========  =============
tpcds      8 / 23      1 / 4     11% / 88%    5 / 10
tpch       8 / 12      2 / 4     46% / 82%    5 / 8
bigbench   7 / 19      2 / 6     24% / 70%    5 / 9
=========  ==========  ========  ===========  =============

(p50 / p95; the critical-path p95 values are ours: Table 2's are not in the seed text.
For TPC-H they sit just under the 154 Spark TPC-H DAGs of the ``tpch-dags`` trace,
whose stage counts have the same median, 8, and whose critical paths have p50 6, p95 9.)

How one DAG is drawn (``draw_dag``):

1. The number of stages N, of barriers B and the critical-path length L (in stages) are
   each log-normal, fitted so that the median and the 95th percentile are the table's
   (sigma = ln(p95 / p50) / 1.645), and rounded. They are drawn through one Gaussian
   copula with correlation ``CORRELATION`` between N and each of B and L (bigger queries
   have more joins and deeper plans), so every marginal keeps the table's quantiles.
2. What no DAG can have is clipped: 2 <= N <= 3 x p95; B <= (N - 1) / 2 (every barrier
   joins two branches, each starting at its own input stage); B = 0 only for a chain,
   so a DAG drawn with no barrier but L < N gets one; L + B <= N (every barrier's other
   branch needs a stage off the longest path): an excess is cut half from B, half from
   L; and L is at least the height of a balanced join tree of B barriers. Clipping
   moves little mass thanks to the strong correlation (BigBench's medians sit right at
   L + B = N): the tests check that the p50 and p95 of the results match the table.
3. The structure is a query plan: a random binary join tree with B barriers (B + 1 input
   stages) whose height is at most L, then N - 2B - 1 single-parent stages: first along
   one longest path until it is exactly L long, then wherever a path is still shorter
   than L; a stage that fits nowhere becomes one more input of a join (fan-in 3+).
   Every DAG has one sink, like a query's result stage.
4. The share of work in input stages (parentless stages) is drawn logit-normally with
   the table's p50 and p95 and clipped to [1%, 99%]; ``input_work_factors`` rescales
   drawn stage durations to reach it while keeping the job's total work.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

Z95 = 1.6448536269514722
"""The standard normal's 95th percentile."""

CORRELATION = 0.9
"""Copula correlation between the stage count and each of barriers and critical path."""

MAX_STAGES_FACTOR = 3
"""Stage counts are capped at this many times the shape's 95th percentile."""

INPUT_WORK_BOUNDS = (0.01, 0.99)


@dataclass(frozen=True)
class Quantiles:
    """A positive quantity's median and 95th percentile."""

    p50: float
    p95: float

    def normal_params(self) -> tuple[float, float]:
        """(mu, sigma) of a normal with these quantiles on the log scale."""
        return math.log(self.p50), math.log(self.p95 / self.p50) / Z95

    def lognormal(self, z: float) -> float:
        mu, sigma = self.normal_params()
        return math.exp(mu + sigma * z)

    def logit_normal(self, z: float) -> float:
        """A fraction in (0, 1) whose logit is normal with these quantiles."""
        lo, hi = _logit(self.p50), _logit(self.p95)
        return 1 / (1 + math.exp(-(lo + (hi - lo) / Z95 * z)))


@dataclass(frozen=True)
class DagShape:
    name: str
    description: str
    stages: Quantiles
    barriers: Quantiles
    input_work: Quantiles
    critical_path: Quantiles


SHAPES: dict[str, DagShape] = {
    s.name: s
    for s in (
        DagShape(
            "tpcds",
            "TPC-DS-like: many stages, few barriers, little work in inputs at the median",
            Quantiles(8, 23),
            Quantiles(1, 4),
            Quantiles(0.11, 0.88),
            Quantiles(5, 10),
        ),
        DagShape(
            "tpch",
            "TPC-H-like: 8 to 12 stages, 2 to 4 joins, input-heavy",
            Quantiles(8, 12),
            Quantiles(2, 4),
            Quantiles(0.46, 0.82),
            Quantiles(5, 8),
        ),
        DagShape(
            "bigbench",
            "BigBench-like: fewer stages, more barriers per stage",
            Quantiles(7, 19),
            Quantiles(2, 6),
            Quantiles(0.24, 0.70),
            Quantiles(5, 9),
        ),
    )
}


@dataclass(frozen=True)
class DagDraw:
    """One drawn DAG: ``parents[i]`` lists stage i's parents (all < i); one sink, the last."""

    parents: tuple[tuple[int, ...], ...]
    input_work: float

    @property
    def stages(self) -> int:
        return len(self.parents)

    @property
    def barriers(self) -> int:
        return sum(len(p) > 1 for p in self.parents)

    @property
    def critical_path(self) -> int:
        return max(stage_levels(self.parents))


def stage_levels(parents: Sequence[Sequence[int]]) -> list[int]:
    """Each stage's level: the number of stages on the longest path ending at it."""
    level: list[int] = []
    for ps in parents:
        level.append(1 + max((level[p] for p in ps), default=0))
    return level


def draw_dag(shape: DagShape, rng: random.Random) -> DagDraw:
    """One DAG of ``shape``; draws only from ``rng`` (a fixed number of draws per call
    for the counts, then the structure's own)."""
    z = rng.gauss(0.0, 1.0)
    spread = math.sqrt(1 - CORRELATION**2)
    z_barriers = CORRELATION * z + spread * rng.gauss(0.0, 1.0)
    z_path = CORRELATION * z + spread * rng.gauss(0.0, 1.0)
    z_input = rng.gauss(0.0, 1.0)

    cap = MAX_STAGES_FACTOR * int(shape.stages.p95)
    n = min(cap, max(2, round(shape.stages.lognormal(z))))
    b = min((n - 1) // 2, round(shape.barriers.lognormal(z_barriers)))
    length = max(2, round(shape.critical_path.lognormal(z_path)))
    if b == 0 and length < n and n >= 3:
        b = 1  # only a chain has no barrier, and a chain's path is all its stages
    if b == 0:
        length = n
    else:
        # The longest path holds at most N - B stages (each barrier's other branch needs
        # one): an excess is taken half from the barriers, half from the path.
        excess = max(0, length + b - n)
        fewer = min(b - 1, excess // 2)
        b, length = b - fewer, length - (excess - fewer)
        length = max(min_height(b), length)
    parents = _build(n, b, length, rng)
    low, high = INPUT_WORK_BOUNDS
    input_work = min(high, max(low, shape.input_work.logit_normal(z_input)))
    return DagDraw(parents, input_work)


def min_height(barriers: int) -> int:
    """Stages on the longest path of the most balanced binary join tree with ``barriers``."""
    return math.ceil(math.log2(barriers + 1)) + 1


def input_work_factors(
    parents: Sequence[Sequence[int]], work: Sequence[float], share: float
) -> list[float]:
    """Per-stage factors that make input stages hold ``share`` of the total work.

    ``work`` is each stage's drawn work; the total is kept. A DAG whose stages are all
    inputs (impossible with one sink and two or more stages) keeps its work."""
    total = sum(work)
    inputs = sum(w for ps, w in zip(parents, work, strict=True) if not ps)
    rest = total - inputs
    if inputs <= 0 or rest <= 0:
        return [1.0] * len(work)
    up, down = share * total / inputs, (1 - share) * total / rest
    return [up if not ps else down for ps in parents]


# ----------------------------------------------------------------------------------
# Structure
# ----------------------------------------------------------------------------------


class _Tree:
    """A mutable in-tree: ``parents`` per node, ``child`` per node (None for the sink)."""

    def __init__(self) -> None:
        self.parents: list[list[int]] = []
        self.child: list[int | None] = []

    def add(self, parents: list[int]) -> int:
        node = len(self.parents)
        self.parents.append(parents)
        self.child.append(None)
        for p in parents:
            self.child[p] = node
        return node

    def up(self) -> list[int]:
        """Stages on the longest path from an input to each node, inclusive."""
        memo: dict[int, int] = {}
        for start in range(len(self.parents)):
            stack = [start]
            while stack:
                node = stack[-1]
                todo = [p for p in self.parents[node] if p not in memo]
                if todo:
                    stack.extend(todo)
                    continue
                stack.pop()
                memo[node] = 1 + max((memo[p] for p in self.parents[node]), default=0)
        return [memo[i] for i in range(len(self.parents))]

    def down(self) -> list[int]:
        """Stages on the path from each node to the sink, inclusive."""
        out: list[int] = []
        for node in range(len(self.parents)):
            steps, at = 1, self.child[node]
            while at is not None:
                steps, at = steps + 1, self.child[at]
            out.append(steps)
        return out

    def insert_above(self, node: int) -> int:
        """A new single-parent stage between ``node`` and its parents (an input's new
        parent if ``node`` was an input)."""
        new = self.add(self.parents[node])
        self.parents[node] = [new]
        self.child[new] = node
        return new

    def sink(self) -> int:
        return next(i for i, c in enumerate(self.child) if c is None)

    def topological(self) -> tuple[tuple[int, ...], ...]:
        """Renumber so that parents come first (by level, then creation order)."""
        up = self.up()
        # Every stage precedes the sink, so the sink (strictly deepest) comes last.
        order = sorted(range(len(self.parents)), key=lambda i: (up[i], i))
        index = {node: k for k, node in enumerate(order)}
        return tuple(tuple(sorted(index[p] for p in self.parents[node])) for node in order)


def _build(n: int, b: int, length: int, rng: random.Random) -> tuple[tuple[int, ...], ...]:
    tree = _Tree()
    if b == 0:
        previous: list[int] = []
        for _ in range(n):
            previous = [tree.add(previous)]
        return tree.topological()
    chain_stages = n - 2 * b - 1
    low = max(min_height(b), length - chain_stages)
    _join_tree(tree, b, low, length, rng)
    _stretch(tree, length, rng)
    for _ in range(n - len(tree.parents)):
        _place(tree, length, rng)
    return tree.topological()


def _join_tree(tree: _Tree, b: int, low: int, high: int, rng: random.Random) -> int:
    """A random binary join tree with ``b`` joins whose height is in [low, high]."""
    if b == 0:
        return tree.add([])
    splits = []
    for left in range(b):
        right = b - 1 - left
        # Each side's height is between its balanced and its left-deep height (b + 1).
        if max(min_height(left), min_height(right)) > high - 1:
            continue
        if max(left, right) + 1 < low - 1:
            continue
        splits.append(left)
    left = rng.choice(splits)
    right = b - 1 - left
    # One side (one that can) reaches the required height; the other is only bounded.
    tall_first = left + 1 >= low - 1 and (right + 1 < low - 1 or rng.random() < 0.5)
    sides = [(left, max(1, low - 1)), (right, 1)] if tall_first else [(left, 1), (right, low - 1)]
    parents = [_join_tree(tree, k, max(lo, min_height(k)), high - 1, rng) for k, lo in sides]
    return tree.add(parents)


def _stretch(tree: _Tree, length: int, rng: random.Random) -> None:
    """Insert single-parent stages along one longest path until it has ``length`` stages."""
    up = tree.up()
    height = max(up)
    path = [tree.sink()]
    while tree.parents[path[-1]]:
        path.append(max(tree.parents[path[-1]], key=lambda p: (up[p], -p)))
    for _ in range(length - height):
        tree.insert_above(rng.choice(path))


def _place(tree: _Tree, length: int, rng: random.Random) -> None:
    """One more stage that keeps the critical path at ``length``: a single-parent stage
    above any stage whose longest path is shorter, else one more input of a join."""
    up, down = tree.up(), tree.down()
    slack = [i for i in range(len(tree.parents)) if up[i] + down[i] - 1 < length]
    if slack:
        tree.insert_above(rng.choice(slack))
        return
    joins = [i for i, ps in enumerate(tree.parents) if len(ps) > 1]
    target = rng.choice(joins)
    source = tree.add([])
    tree.parents[target].append(source)
    tree.child[source] = target


def _logit(p: float) -> float:
    return math.log(p / (1 - p))
