"""The layers of DESIGN.md, as allow-lists: each layer names what it may import from the
project and which outside modules it must not touch. A module the lists do not place is
a failure too, so a new module has to be given its layer.

    tools (treadle's sub-packages: cli, study, sim, cluster, workload, metrics, ...)
    services (rm/nm/am ``service`` and ``__main__``: gRPC adapters and processes)
    cores (rm, am, nm state machines)        plugins (plugins/, third-party)
    plugin APIs (rm.policy, rm.estimator, am.asks)
    kernel (treadle's top-level modules: resources, model, messages, dag, events, ...)
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("treadle", "rm", "am", "nm", "plugins")

KERNEL = "kernel"
PLUGIN_API = "plugin API"
PLUGINS = "plugins"
CORES = "cores"
SERVICES = "services"
TOOLS = "tools"

#: What each layer may import from the project (layer names, or module prefixes).
ALLOWED: dict[str, tuple[str, ...]] = {
    KERNEL: (KERNEL,),
    PLUGIN_API: (KERNEL, PLUGIN_API),
    PLUGINS: (KERNEL, PLUGIN_API),
    CORES: (KERNEL, PLUGIN_API, CORES),
    SERVICES: (
        KERNEL,
        PLUGIN_API,
        CORES,
        SERVICES,
        "treadle.live",
        "treadle.rpc",
        "treadle.cluster.config",  # python -m rm --config
    ),
    TOOLS: (KERNEL, PLUGIN_API, CORES, PLUGINS, TOOLS, "treadle.live", "treadle.rpc"),
}

#: Outside modules that mean I/O (sockets, processes, the wall clock, the event loop).
IO = (
    "grpc",
    "google.protobuf",
    "socket",
    "asyncio",
    "time",
    "threading",
    "subprocess",
    "multiprocessing",
    "signal",
    "select",
    "sqlite3",
    "http",
    "urllib",
    "os",
    "docker",
    "testcontainers",
)
#: Layers that must stay sans-IO (the kernel may read and write files: event logs).
SANS_IO = {KERNEL: IO, PLUGIN_API: (*IO, "pathlib"), PLUGINS: (*IO, "pathlib"), CORES: IO}

KERNEL_MODULES = {
    "resources",
    "model",
    "messages",
    "dag",
    "events",
    "event_schema",
    "event_builders",
    "event_columns",
    "event_table",
    "errors",
    "frozen",
    "registry",
}
PLUGIN_APIS = ("rm.policy", "rm.estimator", "am.asks")
SERVICE_MODULES = {
    "service",
    "admin_service",
    "__main__",
    "http",
    "http_metrics",
    "http_auth",
    "store",
    "submissions",
}


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    top = parts[0]
    if top == "plugins" or module.startswith("treadle_"):
        return PLUGINS
    if any(module == api or module.startswith(api + ".") for api in PLUGIN_APIS):
        return PLUGIN_API
    if top in ("rm", "am", "nm"):
        if len(parts) == 1:
            return CORES  # the package itself
        return SERVICES if parts[1] in SERVICE_MODULES else CORES
    if top == "treadle":
        if len(parts) == 1 or (len(parts) == 2 and parts[1] in KERNEL_MODULES):
            return KERNEL
        if len(parts) >= 2 and parts[1] in ("live", "rpc"):
            return None  # placed by prefix in ALLOWED, never importing upwards (checked below)
        return TOOLS
    return None


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def project_modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for p in (ROOT / pkg).rglob("*.py"):
            if "rpc/v1" not in p.as_posix():
                out[module_name(p, ROOT)] = p
    for p in (ROOT / "tests" / "thirdparty").rglob("*.py"):
        if "build" not in p.parts:
            out["treadle_" + p.stem] = p  # third-party plugins: judged as plugins
    return out


def imports_of(path: Path) -> set[str]:
    """Every module ``path`` imports, at module level or inside a function."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def allowed(importer: str, imported: str) -> bool:
    layer = layer_of(importer)
    for rule in ALLOWED[layer] if layer else ():
        if rule in ALLOWED:
            if layer_of(imported) == rule:
                return True
        elif imported == rule or imported.startswith(rule + "."):
            return True
    return False


MODULES = project_modules()


def is_project(name: str) -> bool:
    return name.split(".")[0] in PACKAGES


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_what_its_layer_allows(module: str) -> None:
    imports = imports_of(MODULES[module])
    if module.startswith(("treadle.live", "treadle.rpc")):
        # Shared by services and tools: the kernel and the generated code only.
        bad = [
            m
            for m in imports
            if is_project(m)
            and layer_of(m) != KERNEL
            and not m.startswith(("treadle.live", "treadle.rpc"))
        ]
        assert bad == []
        return
    layer = layer_of(module)
    assert layer is not None, f"{module} has no layer: give it one in test_layers"
    bad = sorted(m for m in imports if is_project(m) and not allowed(module, m))
    assert bad == [], f"{module} ({layer}) may not import these"
    assert io_imports(layer, imports) == [], f"{module} ({layer}) must stay sans-IO"


def io_imports(layer: str, imports: set[str]) -> list[str]:
    forbidden = SANS_IO.get(layer, ())
    return sorted(m for m in imports if any(m == f or m.startswith(f + ".") for f in forbidden))


def test_the_sans_io_check_sees_io(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import asyncio\nfrom grpc import aio\nimport pathlib\n\ndef f():\n    import time\n"
    )
    found = imports_of(bad)
    assert io_imports(CORES, found) == ["asyncio", "grpc", "time"]
    assert io_imports(PLUGINS, found) == ["asyncio", "grpc", "pathlib", "time"]
    assert io_imports(TOOLS, found) == []


def test_the_modules_import_no_cycle() -> None:
    """Module-level and function-level imports alike (a function-level import must not be
    the way round a cycle)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in MODULES.items():
        for m in imports_of(path):
            while m and m not in MODULES:
                m = m.rpartition(".")[0]
            if m and m != name and not name.startswith(m + "."):
                graph[name].add(m)
    assert find_cycle(graph) is None


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        path.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return [*path[path.index(w) :], w]
            if w not in state and (found := visit(w)):
                return found
        path.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_the_cycle_check_sees_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


@pytest.mark.parametrize(
    ("importer", "imported", "ok"),
    [
        ("plugins.policies.x", "rm.policy", True),
        ("plugins.policies.x", "treadle.resources", True),
        ("plugins.policies.x", "rm.core", False),
        ("plugins.policies.x", "treadle.live.wire", False),
        ("plugins.policies.x", "treadle.rpc.v1", False),
        ("plugins.policies.x", "plugins.policies.y", False),
        ("rm.scheduling", "rm.state", True),
        ("rm.scheduling", "treadle.study.runner", False),
        ("rm.scheduling", "rm.service", False),
        ("treadle.events", "rm.core", False),
        ("rm.service", "treadle.live.rpcutil", True),
        ("rm.service", "treadle.study.runner", False),
        ("treadle.cli.app", "rm.service", False),
    ],
)
def test_the_allow_lists_say_what_they_mean(importer: str, imported: str, ok: bool) -> None:
    assert allowed(importer, imported) is ok


def test_every_package_is_in_the_distribution() -> None:
    """A package missing from pyproject's list is missing from the wheel (and the image)."""
    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    on_disk = {
        module_name(p.parent, ROOT) if p.name == "__init__.py" else ""
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("__init__.py")
    }
    assert on_disk == listed
