"""A study's spec, grid, run keys and statistics (``treadle.study``): a bad spec is one
line naming the file and the field; a grid is the product of its lists; a run's key is
stable and moves with every input; the statistics are scipy's on the same sample."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sst

from treadle.errors import InputError
from treadle.study import stats
from treadle.study.runner import PolicyChoice, RunOptions
from treadle.study.spec import load_spec, parse_spec
from treadle.study.units import run_key, units_of
from treadle.workload import load_workload

BASE: dict[str, Any] = {"workloads": ["tiny"], "policies": ["fifo", "drf"], "replications": 2}


def _error(tmp_path: Path, text: str) -> str:
    spec = tmp_path / "study.yaml"
    spec.write_text(text)
    with pytest.raises(InputError) as e:
        load_spec(spec)
    line = str(e.value)
    assert "\n" not in line
    assert line.startswith(f"{spec}: ")
    return line


def test_a_misspelt_key_is_one_line_naming_it(tmp_path: Path) -> None:
    line = _error(tmp_path, "workloads: [tiny]\npolicies: [fifo]\nreplicatoins: 3\n")
    assert "replicatoins: unknown field; did you mean 'replications'?" in line


def test_an_unknown_policy_is_one_line_at_its_index(tmp_path: Path) -> None:
    line = _error(tmp_path, "workloads: [tiny]\npolicies: [fifo, dfr]\n")
    assert "policies[1]: unknown policy 'dfr'" in line
    assert "did you mean 'drf'" in line


def test_a_parameter_outside_its_range_names_the_key_and_the_value(tmp_path: Path) -> None:
    text = "workloads: [tiny]\npolicies: [uwfq]\nset:\n  uwfq.grace_resource_s: [1.0, -2.0]\n"
    line = _error(tmp_path, text)
    assert "set['uwfq.grace_resource_s'][1]:" in line
    assert "greater than or equal to 0" in line


def test_a_grid_over_a_parameter_the_policy_lacks_is_one_line(tmp_path: Path) -> None:
    line = _error(tmp_path, "workloads: [tiny]\npolicies: [drf]\nset:\n  drf.grace: [1, 2]\n")
    assert "set['drf.grace'][0]:" in line
    assert "unknown parameter" in line


def test_other_spec_problems_are_one_line_each(tmp_path: Path) -> None:
    assert "not among the study's policies" in _error(
        tmp_path, "workloads: [tiny]\npolicies: [fifo]\nset: {drf.across: jobs}\n"
    )
    assert "workloads[0]" in _error(tmp_path, "workloads: [nowhere]\npolicies: [fifo]\n")
    assert "metrics[0]: unknown metric 'mean_jct'" in _error(
        tmp_path, "workloads: [tiny]\npolicies: [fifo]\nmetrics: [mean_jct]\n"
    )
    assert "baseline" in _error(tmp_path, "workloads: [tiny]\npolicies: [fifo]\nbaseline: drf\n")


def test_lists_expand_as_a_grid_per_policy() -> None:
    settings = {"uwfq.grace_resource_s": [1.0, 2.0], "uwfq.late_stages": ["first", "job_deadline"]}
    study = parse_spec({**BASE, "policies": ["fifo", "uwfq"], "set": settings})
    labels = [c.label for c in study.configs]
    assert labels == [
        "fifo",
        "uwfq[grace_resource_s=1.0,late_stages=first]",
        "uwfq[grace_resource_s=1.0,late_stages=job_deadline]",
        "uwfq[grace_resource_s=2.0,late_stages=first]",
        "uwfq[grace_resource_s=2.0,late_stages=job_deadline]",
    ]
    units = units_of(study)
    assert len(units) == 5 * 2
    assert len({u.key for u in units}) == 10
    fixed = parse_spec({**BASE, "policies": ["drf"], "set": {"drf.across": "jobs"}})
    assert [(c.label, dict(c.params)) for c in fixed.configs] == [("drf", {"across": "jobs"})]


def test_replications_vary_phases_the_workload_or_both() -> None:
    phases = parse_spec({**BASE, "vary": "phases", "first_seed": 3})
    assert [(r.seed, r.phase_seed, r.workload_seed) for r in phases.replications] == [
        (3, 3, None),
        (4, 4, None),
    ]
    both = parse_spec({**BASE, "workloads": ["demo"], "vary": "both"})
    drawn = [both.workload(0, r) for r in both.replications]
    assert [w.seed for w in drawn] == [0, 1]
    # demo draws durations from its seed: another seed, other jobs
    assert drawn[0].jobs != drawn[1].jobs


def test_a_run_key_is_stable_and_moves_with_every_input() -> None:
    wl = load_workload("tiny")
    choice = PolicyChoice("drf", {})
    options = RunOptions()
    key = run_key(wl, choice, options, 0, code="c1")
    assert key == run_key(load_workload("tiny"), PolicyChoice("drf", {}), RunOptions(), 0, "c1")
    # the parameters as resolved: a default given explicitly is the same run
    assert key == run_key(wl, PolicyChoice("drf", {"across": "users"}), options, 0, "c1")
    others = [
        run_key(dataclasses.replace(wl, seed=2), choice, options, 0, "c1"),
        run_key(load_workload("tiny", seed=5), choice, options, 0, "c1"),
        run_key(wl, PolicyChoice("fifo", {}), options, 0, "c1"),
        run_key(wl, PolicyChoice("drf", {"across": "jobs"}), options, 0, "c1"),
        run_key(wl, choice, RunOptions(phase_seed=1), 0, "c1"),
        run_key(wl, choice, RunOptions(slowdown=False), 0, "c1"),
        run_key(wl, choice, options, 1, "c1"),
        run_key(wl, choice, options, 0, "c2"),
    ]
    assert key not in others
    assert len(set(others)) == len(others)


SAMPLE = [148.6, 151.2, 139.9, 160.4, 144.0]
BASELINE = [150.1, 158.0, 149.5, 171.2, 150.3]


def test_a_cell_is_scipys_mean_and_median_with_their_bootstrap_cis() -> None:
    cell = stats.cell(SAMPLE)
    assert cell.n == 5
    for statistic, interval in ((np.mean, cell.mean), (np.median, cell.median)):
        expected = sst.bootstrap(
            (np.array(SAMPLE),), statistic, n_resamples=9999, method="percentile",
            rng=np.random.default_rng(stats.SEED),
        ).confidence_interval  # fmt: skip
        assert interval.value == pytest.approx(statistic(SAMPLE))
        assert (interval.low, interval.high) == pytest.approx((expected.low, expected.high))
        assert interval.low < interval.value < interval.high
    assert cell.mean.value == pytest.approx(148.82)


def test_a_pair_is_the_ratio_of_means_with_a_paired_ci_and_wilcoxons_p() -> None:
    pair = stats.paired(SAMPLE, BASELINE)
    x, y = np.array(SAMPLE), np.array(BASELINE)
    expected = sst.bootstrap(
        (x, y), lambda a, b, axis=-1: a.mean(axis=axis) / b.mean(axis=axis), paired=True,
        n_resamples=9999, method="percentile", rng=np.random.default_rng(stats.SEED),
    ).confidence_interval  # fmt: skip
    assert pair.n == 5
    assert pair.ratio is not None
    assert pair.ratio.value == pytest.approx(x.mean() / y.mean())
    assert (pair.ratio.low, pair.ratio.high) == pytest.approx((expected.low, expected.high))
    assert pair.p_value == pytest.approx(sst.wilcoxon(x, y).pvalue)
    assert pair.p_value == pytest.approx(0.0625)  # 5 pairs, all one way: the exact minimum
    assert pair.distinguishable is True  # every seed lower: the CI stays below 1


def test_a_ratio_whose_ci_includes_one_is_not_distinguishable() -> None:
    pair = stats.paired([10.0, 12.0, 9.0, 11.0], [11.0, 10.0, 10.0, 11.5])
    assert pair.ratio is not None
    low, high = pair.ratio.low, pair.ratio.high
    assert low is not None
    assert high is not None
    assert low < 1.0 < high
    assert pair.distinguishable is False


def test_degenerate_samples_have_no_ci_or_no_p_value() -> None:
    assert stats.cell([5.0]).mean.low is None
    same = stats.cell([5.0, 5.0, 5.0])
    assert (same.mean.low, same.mean.high) == (5.0, 5.0)
    equal = stats.paired([2.0, 3.0], [2.0, 3.0])
    assert equal.p_value is None
    assert stats.paired([1.0, 2.0], [0.0, 0.0]).ratio is None


def test_a_failing_run_is_one_error_naming_its_config_and_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from treadle.errors import TreadleError
    from treadle.study import run as run_study
    from treadle.study.units import UnitBackend

    real = UnitBackend.run

    def fail(self: UnitBackend, workload: Any, choice: Any, *args: Any) -> Any:
        if choice.unit.config.policy == "drf" and choice.unit.replication.seed == 1:
            raise TreadleError("simulation stalled")
        return real(self, workload, choice, *args)

    monkeypatch.setattr(UnitBackend, "run", fail)
    match = r"^tiny drf seed 1 \(run [0-9a-f]+\): simulation stalled$"
    with pytest.raises(TreadleError, match=match):
        run_study(BASE, tmp_path / "out")
    done = list((tmp_path / "out" / "runs").iterdir())
    assert len(done) == 3  # fifo's two runs and drf's first, complete; no partial one
    assert all((p / "unit.json").is_file() for p in done)


def test_a_study_scales_its_workloads_and_records_it_in_the_run_options() -> None:
    study = parse_spec({**BASE, "nodes": 3, "load": 0.5})
    unit = units_of(study)[0]
    assert len(unit.workload.cluster.nodes) == 3
    assert unit.options.scaling is not None
    assert unit.options.scaling["nodes"] == 3
    assert unit.options.scaling["nodes_before"] == 1
    assert unit.options.scaling["load"] == 0.5
    plain = units_of(parse_spec(BASE))[0]
    assert plain.options.scaling is None
    assert plain.key != unit.key  # another workload: another run


def test_a_studys_scaling_and_queues_are_checked_as_the_flags_are(tmp_path: Path) -> None:
    both = "workloads: [tiny]\npolicies: [fifo]\nnodes: 2\nnodes_scale: 2\n"
    assert "nodes_scale: give nodes or nodes_scale, not both" in _error(tmp_path, both)
    assert "load:" in _error(tmp_path, "workloads: [tiny]\npolicies: [fifo]\nload: 0\n")
    missing = "workloads: [tiny]\npolicies: [fifo]\nqueues: nowhere.xml\n"
    assert "nowhere.xml" in _error(tmp_path, missing)


def test_a_study_runs_in_the_queues_of_a_scheduler_file(tmp_path: Path) -> None:
    xml = tmp_path / "capacity-scheduler.xml"
    xml.write_text(
        "<configuration>"
        "<property><name>yarn.scheduler.capacity.root.queues</name><value>default,b</value>"
        "</property>"
        "<property><name>yarn.scheduler.capacity.root.default.capacity</name><value>70</value>"
        "</property>"
        "<property><name>yarn.scheduler.capacity.root.b.capacity</name><value>30</value>"
        "</property></configuration>"
    )
    spec = tmp_path / "study.yaml"
    spec.write_text("workloads: [tiny]\npolicies: [capacity]\nqueues: capacity-scheduler.xml\n")
    study = load_spec(spec)
    leaves = [q.name for q in study.workload(0, study.replications[0]).queues.walk() if q.is_leaf]
    assert leaves == ["default", "b"]
    assert study.identity()["queues"] == str(xml)
