"""The public traces treadle reads, and the check of a traces directory.

treadle ships no trace: a user fills a directory of their own from each trace's public
source (``docs/traces.md`` says how) and names it with ``$TREADLE_TRACES`` (or
``treadle traces --dir``). The directory keeps the layout below (``sls/inputsls.json``,
``swim/FB-2009_...tsv``, ...); each file is known by its SHA-256, so ``treadle traces
--check`` tells a complete, unaltered copy from a partial or a changed one. The docs'
table of files is generated from ``TRACES``, so the two cannot drift.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from treadle.errors import InputError

#: The environment variable naming the traces directory.
TRACES_ENV = "TREADLE_TRACES"


@dataclass(frozen=True)
class Trace:
    """One public trace: its directory in the traces directory, treadle's ``--format``
    for it, where it comes from, under what terms, and its files' SHA-256."""

    name: str
    formats: str
    what: str
    source: str
    licence: str
    files: tuple[tuple[str, str], ...]  # (path in the traces directory, sha256)


_HADOOP = "apache/hadoop, `hadoop-tools/hadoop-sls/` (`src/main/data/`, `src/test/resources/`)"
_SPARK_BENCH = "kazemaksOG/spark-benchmark-tool @ 8d07df37"

TRACES: tuple[Trace, ...] = (
    Trace(
        "sls",
        "`sls`, `rumen`",
        "Hadoop's Scheduler Load Simulator samples: 2 MapReduce jobs, a Rumen job history "
        "of 3 TeraGen jobs, node files, synthetic specs, scheduler configs",
        _HADOOP,
        "Apache-2.0",
        (
            (
                "sls/2jobs2min-rumen-jh.json",
                "791349b5cf68786bd45c6fa33a5b8b0ae010dce808696b016ddae429b145c445",
            ),
            (
                "sls/capacity-scheduler.xml",
                "47836818f6283db4ce4ff127ab09943ea02ad912e83b16caa1aa5592cb952cf5",
            ),
            (
                "sls/fair-scheduler-allocation.xml",
                "9ac4c930ffcde0c0462eca8e22d34782bfe4fd5c4797cf746725bcbf5756ac34",
            ),
            (
                "sls/inputsls.json",
                "426b7e0ab78cb20e5cd8fa3cbc60723c532c5fe8f02d5c98507df320bcc99fe0",
            ),
            (
                "sls/nodes-with-resources.json",
                "7cae76765e38282c839483c3438bfa88d71edc739dab538cd16178bfef434e57",
            ),
            ("sls/nodes.json", "ab18cd17da5e48ab139bb596ce4bfa13e9731e59403bef35aa34f3bf4bfbcc63"),
            (
                "sls/sls_dag.json",
                "2f53cea37ac9bcb86842dadba8bd25188654f6c2667c976034cd96a71c5f238a",
            ),
            ("sls/syn.json", "1d0e77d42d8345246b6600a357bbef029f1c3bd414d85429a710df3337b6fd3c"),
            (
                "sls/syn_generic.json",
                "991ba308cac50538675a070361d2e4d880e9755d7733abf2124dff69288586ed",
            ),
            (
                "sls/syn_stream.json",
                "c6a4b13a3fa3de1b682d8ff0a9e4fe8bd06836cc533368893e8684afd03e1dd1",
            ),
        ),
    ),
    Trace(
        "swim",
        "`swim`",
        "Facebook's production MapReduce workloads as SWIM samples them: one day in 24 "
        "one-hour samples (FB-2009: 5,894 and 6,638 jobs; FB-2010: 24,442 and 25,428)",
        "SWIMProjectUCB/SWIM @ 1277c516, `workloadSuite/`",
        "BSD-3-Clause",
        (
            (
                "swim/FB-2009_samples_24_times_1hr_0.tsv",
                "5033ea98faed398b132957e4555c9ba88653d1ffaac470f370b761b79cd44c19",
            ),
            (
                "swim/FB-2009_samples_24_times_1hr_0_first50jobs.tsv",
                "3d34fb4693bb81d443c6e7b531d7a63a08ec8b4f098020205064984ac04e7d8b",
            ),
            (
                "swim/FB-2009_samples_24_times_1hr_1.tsv",
                "b6056e0f7686b475935ce613a96b1916c84daf52dfa1aff82172d87900e961d8",
            ),
            (
                "swim/FB-2010_samples_24_times_1hr_0.tsv",
                "65f758ecd0495955de30c560b2d57fc351c9b2c89117b82f16b2f8f30fb4e9d9",
            ),
            (
                "swim/FB-2010_samples_24_times_1hr_withInputPaths_0.tsv",
                "e228581ab7bf183404c5b724eeb77ceba2d5f34fefb6dbf56cbbf9cc751715e9",
            ),
        ),
    ),
    Trace(
        "google-wta",
        "`wta`",
        "A 500 s window of Google's 2014 trace in Workflow Trace Archive form, the UWFQ "
        "paper's macro benchmark: homo 6,418 tasks of 133 workflows, hetero 824 of 125",
        f"{_SPARK_BENCH}, `results/google_benchmark_500s/`",
        "none stated (Google's cluster data: CC-BY)",
        (
            (
                "google-wta/macro_benchmarks_hetero.csv",
                "e624a713bb2db9177b5e42100ce533a71257bacf519984e6ca5070f455c7454f",
            ),
            (
                "google-wta/macro_benchmarks_homo.csv",
                "7b31c0900d592a2fe4518ad29539b33424b5049434d129e0848eb5ac910e2fa4",
            ),
        ),
    ),
    Trace(
        "uwfq-scenarios",
        "`uwfq`",
        "The UWFQ paper's scenario configs: the micro scenarios (as run and synthetic), "
        "the macro benchmark as job lists, single-job calibration loops",
        f"{_SPARK_BENCH}, `configs/`",
        "none stated",
        (
            (
                "uwfq-scenarios/loop100.json",
                "b38ae11b434e44b65eb2b6066bca02a0b29f7465999bd560f1a96ebb3db924fe",
            ),
            (
                "uwfq-scenarios/loop1000.json",
                "fc44da8ed89d7e89ed50105ecadc8377b39ae00ed29b9f008a1457854d98370d",
            ),
            (
                "uwfq-scenarios/loop20.json",
                "da557b22c2948965fc7e8cbb4d97c7a02d73485a26b150373e19d1d20e7fb543",
            ),
            (
                "uwfq-scenarios/macro/hetero_macro_config.json",
                "00124ba0af3a3cf34680ab867ba055168fe706b3200bb5e11ad838fa74a730e2",
            ),
            (
                "uwfq-scenarios/macro/homo_macro_config.json",
                "796e399480f90cef95b0f4cdda22e1c72400b0087ceabfb273f443f94a9d2a6c",
            ),
            (
                "uwfq-scenarios/micro-synthetic/2_large_2_small_users_default.json",
                "d780423994c2f96c8cf98cd154fd506250b5a931df4ed04bdef99c0a9264d7af",
            ),
            (
                "uwfq-scenarios/micro-synthetic/2_power_2_small_users_default.json",
                "6b602dbf43ea4774d414a45227174a097ca8893c0c8486f69442c28c9118ef7f",
            ),
            (
                "uwfq-scenarios/micro-synthetic/4_large_users_default.json",
                "20fb2722063888e8249704cbc0a496f7b0cf4f005be5beac8e4090635cb2e198",
            ),
            (
                "uwfq-scenarios/micro-synthetic/4_super_small_users_default.json",
                "88ccce7c96434500b0ad173dbe895f2886644282de47a964bae338df8d5ed0b3",
            ),
            (
                "uwfq-scenarios/micro/2_large_2_small_users_default.json",
                "fa534537be0604897d6b5d1b73c56ff49b209f154c5bb305699061c751fdf982",
            ),
            (
                "uwfq-scenarios/micro/2_power_2_small_users_default.json",
                "d13752b1a537ba94d8e0e338d95530ddb7dee2c183cb84dcee14cbc0ec64dc9a",
            ),
            (
                "uwfq-scenarios/micro/4_large_users_default.json",
                "48ff513ba0982f044e6a2732f11c2e51caa785f7ed81dd08239c941e462e50a9",
            ),
            (
                "uwfq-scenarios/micro/4_super_small_users_default.json",
                "fbc11cbddd5f9fea9bb1598c940dc81b6a10a0b39f3128912b460529174a54f0",
            ),
        ),
    ),
    Trace(
        "swf",
        "`swf`",
        "The Parallel Workloads Archive's NASA Ames iPSC/860 log of 1993: 18,239 jobs on "
        "128 nodes, 69 users",
        "the Parallel Workloads Archive (Feitelson et al.), as in "
        "cloudsimplus/cloudsimplus-examples @ 4394086d",
        "the archive's terms: cite it",
        (
            (
                "swf/NASA-iPSC-1993-3.1-cln.swf.gz",
                "5589ae9b2fb78e3bf92de097497cf33a91607de1ad54563e43533f7827597f29",
            ),
        ),
    ),
    Trace(
        "alibaba",
        "`alibaba2017`, `alibaba2023`",
        "Alibaba's cluster data: the 2017 batch tasks (80,553 rows, 12,951 jobs) and the "
        "2023 GPU cluster (8,152 pods, 1,523 nodes); Philly job runtimes",
        "alibaba/clusterdata @ 7a6c496e (`cluster-trace-gpu-v2023/csv/`, "
        "`cluster-trace-gpu-v2020/analysis/`); the 2017 tasks as in "
        "PriyadarshiniDas/Workload-Prediction-of-Alibaba-Cluster-Dataset @ 53aa3e8c",
        "Alibaba clusterdata's terms: cite it",
        (
            (
                "alibaba/batch_task_2017.csv",
                "7586e51ef58390b41d67de4263018296d4b0437b414625f97085f9040c727cce",
            ),
            (
                "alibaba/batch_task_2017_schema.csv",
                "4b60a8a90b57e3f3afbb67c4aadaf4906470b86e3dc8bc939e0f0992474ea77f",
            ),
            (
                "alibaba/openb_node_list_all_node.csv",
                "5a85c2af79c66a1efff8bbcbda430400aae56d8431370d738480967e1a9c6b15",
            ),
            (
                "alibaba/openb_node_list_gpu_node.csv",
                "2beca64b4d3dfa342036a34b56a495c6cef9225db836c81f541282cb1df320b5",
            ),
            (
                "alibaba/openb_pod_list_cpu050.csv",
                "747f43247bffc2b0bb081d7f61f0705ca8d390dafc0b647e642c92f3baf3ba1e",
            ),
            (
                "alibaba/openb_pod_list_default.csv",
                "1ee7ed79c27a3b0861cda8ddba86a004c6aba904caafa329a76ae93ca63834a8",
            ),
            (
                "alibaba/openb_pod_list_gpushare40.csv",
                "d83ce79a4eb6987524bedbb0c65e41aed3a36bf6c1b78b86234c3687a07e1d40",
            ),
            (
                "alibaba/openb_pod_list_multigpu50.csv",
                "206f2f5959db30ecb7c44e7f13197c8ec50b7a35558ad3777cc3662ef0fe5373",
            ),
            (
                "alibaba/philly_runtime.csv",
                "e99015baaea66833ebeac68d27c994aa13d83847f73b4a7c7dc71fe94b395247",
            ),
        ),
    ),
    Trace(
        "tpch-dags",
        "`kind: tpch` generator",
        "154 Spark TPC-H query DAGs (22 queries x 7 scales), summarised from Decima's "
        "adjacency matrices and task durations",
        "derived from hongzimao/decima-sim @ c010dd74, `tpch/`",
        "none stated",
        (
            (
                "tpch-dags/tpch_dag_summary.json",
                "d74578cb48438ff29c66175829ef5b3601dd58357d7ceb2718cec0ab9ef9d604",
            ),
        ),
    ),
)

State = Literal["ok", "missing", "differs"]


@dataclass(frozen=True)
class FileCheck:
    path: str
    state: State


def traces_dir(given: Path | None = None) -> Path:
    """The traces directory: ``given``, else ``$TREADLE_TRACES``; it must exist."""
    source = "--dir" if given is not None else TRACES_ENV
    raw = str(given) if given is not None else os.environ.get(TRACES_ENV, "")
    if not raw:
        raise InputError(
            TRACES_ENV, None, "not set: give --dir DIR or set it to your traces directory"
        )
    path = Path(raw).expanduser()
    if not path.is_dir():
        raise InputError(f"{source}={raw}", None, "not a directory")
    return path


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check(directory: Path) -> list[FileCheck]:
    """Every catalogued file of ``directory``: present with its SHA-256, absent, or
    present with another content (a different version: its results would differ)."""
    out: list[FileCheck] = []
    for trace in TRACES:
        for rel, want in trace.files:
            path = directory / rel
            if not path.is_file():
                out.append(FileCheck(rel, "missing"))
            else:
                out.append(FileCheck(rel, "ok" if sha256_of(path) == want else "differs"))
    return out


def catalogue_markdown() -> str:
    """The docs' tables: the traces, then every file with its SHA-256."""
    rows = ["| directory | `--format` | what | public source | licence |", "|---|---|---|---|---|"]
    rows += [f"| `{t.name}/` | {t.formats} | {t.what} | {t.source} | {t.licence} |" for t in TRACES]
    files = ["| file | sha256 |", "|---|---|"]
    files += [f"| `{rel}` | `{digest}` |" for t in TRACES for rel, digest in t.files]
    return "\n".join(rows) + "\n\n" + "\n".join(files)
