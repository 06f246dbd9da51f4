"""Workload files: the YAML format, loading, and expansion into the immutable model.

A workload file is validated in two passes. The pydantic models of ``schema`` check
structure and types; the builder (``build``) then checks what spans several places
(references, duplicates, DAG cycles, tasks that fit no node) and expands generators
(``generators``) and duration distributions into concrete tasks. Either pass raises
``WorkloadError`` with the file and a field path such as
``jobs[2].stages[0].resources.vcores`` (``errors`` renders them); nothing else escapes,
and nothing is returned until the whole ``Workload`` has been built. ``loading`` reads
files and built-ins and hands traces to their importer (``treadle.importers.FORMATS``).

Randomness: one ``random.Random(seed)`` draws everything, in declaration order: the
explicit jobs (stage by stage, task by task), then each generator (for each generated
job, its inter-arrival gap, then its task durations). Same file and seed, same workload.

Node ids: a node group ``{count: 3, name: big}`` yields ``big1``, ``big2``, ``big3``;
``name`` defaults to ``node``, and numbering counts per prefix from 1 in declaration
order, so without prefixes ids are ``node1 .. nodeN`` across the whole cluster.

The package depends on ``treadle.importers`` (the format table, the TPC-H and synthetic
DAG sources, ``read_text`` and ``describe_resources``), never the other way round.
"""

from treadle.importers.common import describe_resources, read_text
from treadle.model import DEFAULT_NODE_PREFIX, DEFAULT_RACK, MIN_DURATION_S
from treadle.workload.build import Builder, build_workload
from treadle.workload.errors import (
    from_validation_error,
    from_yaml_error,
    parse_resources,
)
from treadle.workload.generators import draw
from treadle.workload.loading import (
    YAML,
    builtin_workloads,
    format_names,
    load_workload,
    parse_workload,
    parse_yaml,
    workload_format,
)
from treadle.workload.schema import (
    DAG_SHAPES,
    DEFAULT_DEMAND,
    DISTRIBUTIONS,
    GENERATOR_KINDS,
    ClosedLoopGenerator,
    ClusterFile,
    DagGenerator,
    DemandShape,
    Distribution,
    ExponentialDist,
    Generator,
    JobFile,
    JobTemplate,
    LognormalDist,
    NodeGroup,
    PoissonGenerator,
    StageFile,
    TpchGenerator,
    UniformDist,
    WorkloadFile,
    workload_json_schema,
)
from treadle.yamlfile import QueueFile, UserFile

__all__ = [
    "DAG_SHAPES",
    "DEFAULT_DEMAND",
    "DEFAULT_NODE_PREFIX",
    "DEFAULT_RACK",
    "DISTRIBUTIONS",
    "GENERATOR_KINDS",
    "MIN_DURATION_S",
    "YAML",
    "Builder",
    "ClosedLoopGenerator",
    "ClusterFile",
    "DagGenerator",
    "DemandShape",
    "Distribution",
    "ExponentialDist",
    "Generator",
    "JobFile",
    "JobTemplate",
    "LognormalDist",
    "NodeGroup",
    "PoissonGenerator",
    "QueueFile",
    "StageFile",
    "TpchGenerator",
    "UniformDist",
    "UserFile",
    "WorkloadFile",
    "build_workload",
    "builtin_workloads",
    "describe_resources",
    "draw",
    "format_names",
    "from_validation_error",
    "from_yaml_error",
    "load_workload",
    "parse_resources",
    "parse_workload",
    "parse_yaml",
    "read_text",
    "workload_format",
    "workload_json_schema",
]
