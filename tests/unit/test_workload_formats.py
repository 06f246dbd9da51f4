"""The format table (``treadle.importers.FORMATS``) and the one-way import layering of
``treadle.workload`` over ``treadle.importers``.

The samples are Hadoop's own, read in place from the shared trace directory (skipped
when it is absent); a new format adds its entry to the table and its sample here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import typing
from pathlib import Path

import networkx as nx
import pytest

from treadle.errors import WorkloadError
from treadle.importers import FORMATS, Importer, TraceFile, load_trace, sniff_format
from treadle.model import ClusterSpec, JobSpec, NodeSpec, StageSpec, Workload
from treadle.resources import Resources
from treadle.workload import format_names, load_workload

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"
SAMPLES = {
    "sls": TRACES / "sls" / "inputsls.json",
    "rumen": TRACES / "sls" / "2jobs2min-rumen-jh.json",
    "synth": TRACES / "sls" / "syn.json",
    "uwfq": TRACES / "uwfq-scenarios" / "micro-synthetic" / "4_super_small_users_default.json",
    "wta": TRACES / "google-wta" / "macro_benchmarks_hetero.csv",
    "swf": TRACES / "swf" / "NASA-iPSC-1993-3.1-cln.swf.gz",
    "alibaba2023": TRACES / "alibaba" / "openb_pod_list_cpu050.csv",
    "alibaba2017": TRACES / "alibaba" / "batch_task_2017.csv",
    "swim": TRACES / "swim" / "FB-2009_samples_24_times_1hr_0_first50jobs.tsv",
    "google2011": ROOT / "tests/data/google2011/task_events/part-00000-of-00002.csv",
    "google2019": ROOT / "tests/data/google2019/instance_events.csv",
}
"""One sample per registered format."""


def summary(w: Workload) -> list[tuple[object, ...]]:
    return [(j.name, j.user, j.queue, j.submit_s, j.tasks) for j in w.jobs]


# The table ---------------------------------------------------------------------------


def test_every_registered_format_has_a_sample() -> None:
    assert set(SAMPLES) == set(FORMATS)
    # yaml and parquet are the model's own formats (treadle.workload), the rest traces.
    assert format_names() == ("yaml", "parquet", *FORMATS)


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_registered_format_loads_its_sample(name: str) -> None:
    sample = SAMPLES[name]
    if not sample.is_file():
        pytest.skip(f"shared sample {sample} is absent")
    # Only its own format recognises the sample (of those sniffing files named like it):
    # table order decides nothing.
    suffix = sample.suffix.lower()
    sniffers = {n: i for n, i in FORMATS.items() if suffix in i.suffixes}
    assert [n for n, i in sniffers.items() if i.sniff(TraceFile(sample))] == [name]
    assert sniff_format(sample) == name
    explicit = load_workload(str(sample), name)
    assert explicit.jobs
    assert summary(load_workload(str(sample))) == summary(explicit)
    assert summary(load_trace(sample)) == summary(explicit)


def test_unknown_format_lists_the_registered_ones(tmp_path: Path) -> None:
    path = tmp_path / "w.json"
    path.write_text("{}", encoding="utf-8")
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path), "csv")
    assert (
        info.value.message == f"unknown format 'csv'; expected one of {', '.join(format_names())}"
    )
    with pytest.raises(WorkloadError) as info:
        load_trace(path, "yaml")
    assert "unknown trace format 'yaml'; expected " in info.value.message
    assert all(name in info.value.message for name in FORMATS)


def test_unrecognised_json_names_what_each_format_looks_for(tmp_path: Path) -> None:
    path = tmp_path / "other.json"
    path.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(WorkloadError) as info:
        load_workload(str(path))
    assert info.value.message == (
        "not an SLS trace (no 'job.tasks') nor a Rumen trace (no 'jobID') nor an SLS SYNTH "
        "file (no 'workloads' with 'job_classes') nor a UWFQ scenario config (no 'user' and "
        "'workloads')"
    )
    path.write_text('{"100g/q3": {}}', encoding="utf-8")
    with pytest.raises(WorkloadError, match="a TPC-H DAG summary has no cluster"):
        sniff_format(path)


def test_a_format_is_one_entry_in_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, str | None]] = []

    def load(trace: TraceFile, nodes_file: str | None) -> Workload:
        seen.append((trace.text, nodes_file))
        node = NodeSpec("n1", Resources(vcores=1))
        stage = StageSpec("s", Resources(vcores=1), (1.0,))
        return Workload("toy", ClusterSpec((node,)), (JobSpec("j", "u", 0.0, (stage,)),))

    toy = Importer("a toy trace (no 'toy')", (".toy",), lambda t: t.text.startswith("toy"), load)
    monkeypatch.setitem(FORMATS, "toy", toy)
    path = tmp_path / "w.toy"
    path.write_text("toy 1", encoding="utf-8")
    # Inferred from the suffix and sniffed, accepted by name, listed in errors.
    assert load_workload(str(path)).name == "toy"
    assert load_workload(str(path), "toy", nodes_file="n.json").name == "toy"
    assert seen == [("toy 1", None), ("toy 1", "n.json")]
    assert "toy" in format_names()
    path.write_text("not a toy", encoding="utf-8")
    with pytest.raises(WorkloadError, match=r"^.*: not a toy trace \(no 'toy'\)$"):
        load_workload(str(path))
    other = tmp_path / "w.txt"
    other.write_text("toy 2", encoding="utf-8")
    with pytest.raises(WorkloadError, match=r"cannot tell the format from the name; .*, toy"):
        load_workload(str(other))


def test_the_cli_lists_the_formats_of_the_table() -> None:
    from treadle.cli import common

    option = typing.get_args(common.FormatOpt)[1]
    assert all(name in option.help for name in format_names())


# Layering ----------------------------------------------------------------------------

PACKAGE = ROOT / "treadle"
CHECKED = ("treadle.workload", "treadle.importers")


def is_checked(module: str) -> bool:
    return any(module == c or module.startswith(c + ".") for c in CHECKED)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_level_imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The project modules that importing ``name`` runs: its top-level imports (not those
    inside functions or ``if TYPE_CHECKING:``), each with the packages above it that are
    not already being imported (``name``'s own parents)."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    targets: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if test not in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets.add(base)
                targets.update(f"{base}.{alias.name}" for alias in node.names)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)).body)
    own_parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    out: set[str] = set()
    for target in targets:
        parts = target.split(".")
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            if module in known and module not in own_parents and module != name:
                out.add(module)
    return out


def import_graph() -> nx.DiGraph:
    files = {module_name(p): p for p in PACKAGE.rglob("*.py") if "rpc" not in p.parts}
    graph = nx.DiGraph()
    for name, path in files.items():
        graph.add_node(name)
        for target in module_level_imports(path, name, set(files)):
            graph.add_edge(name, target)
    return graph


def test_no_import_cycle_through_workload_or_importers() -> None:
    graph = import_graph()
    checked = {n for n in graph if is_checked(n)}
    assert "treadle.workload.loading" in checked
    assert "treadle.importers.common" in checked
    reachable = set(checked).union(*(nx.descendants(graph, n) for n in checked))
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph.subgraph(reachable))]
    assert [c for c in cycles if len(c) > 1] == []
    # One way: the workload package builds on the importers, never the reverse.
    assert graph.has_edge("treadle.workload.loading", "treadle.importers")
    importers = {n for n in checked if n.split(".")[:2] == ["treadle", "importers"]}
    above = {t for n in importers for t in graph.successors(n)}
    assert not any(t.split(".")[:2] == ["treadle", "workload"] for t in above)


def test_no_deferred_imports_hide_a_cycle() -> None:
    # An import inside a function or under TYPE_CHECKING is invisible to the check above:
    # the cycle used to hide that way.
    deferred = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if is_checked(module_name(path)):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            top = set(map(id, tree.body))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in top:
                    deferred.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert deferred == []


def test_the_cycle_check_sees_a_cycle_through_a_package(tmp_path: Path) -> None:
    # The shape the cycle had: importers -> workload (a package whose __init__ loads
    # the table) -> importers.
    files = {
        "treadle/__init__.py": "",
        "treadle/workload/__init__.py": "from treadle.workload.loading import load\n",
        "treadle/workload/files.py": "def read_text(): ...\n",
        "treadle/workload/loading.py": "from treadle.importers import FORMATS\n",
        "treadle/importers/__init__.py": "from treadle.importers import sls\n",
        "treadle/importers/sls.py": "from treadle.workload.files import read_text\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text, encoding="utf-8")
    paths = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.py")}
    names = {".".join(p.with_suffix("").parts).removesuffix(".__init__"): p for p in paths}
    edges = {
        (n, t) for n, p in names.items() for t in module_level_imports(tmp_path / p, n, set(names))
    }
    assert ("treadle.importers.sls", "treadle.workload") in edges
    graph = nx.DiGraph(edges)
    assert any(len(c) > 1 for c in nx.strongly_connected_components(graph))


def test_either_package_imports_first() -> None:
    orders = [
        ["treadle.importers", "treadle.workload"],
        ["treadle.workload", "treadle.importers"],
        ["treadle.importers.sls"],
        ["treadle.importers.tpch"],
        ["treadle.workload.errors"],
        ["treadle.workload.generators"],
    ]
    script = (
        "import importlib, sys\n"
        f"for order in {orders!r}:\n"
        "    for name in [m for m in sys.modules if m.split('.')[0] == 'treadle']:\n"
        "        del sys.modules[name]\n"
        "    for name in order:\n"
        "        importlib.import_module(name)\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
