"""The layers of DESIGN.md, read from the folders: each layer names what it may import from
the project and which outside modules it must not touch. A module the rules do not place
is a failure too, and rm/ holds no module outside its floors. Nothing imports in a circle:
no module, and in no folder its files and sub-folders (``room_graph``: a package's
``__init__`` and its submodules, or two folders through a third).

    tools (treadle's sub-packages: cli, study, sim, cluster, workload, metrics, ...)
    services (rm/server/, am/server/, nm/server/ and ``__main__``: adapters and processes)
    cores (rm/core/, am/core.py, nm/core.py)       plugins (plugins/, third-party)
    plugin APIs (rm/policy/ with its toolkit, am/asks.py)
    kernel (treadle's top-level modules: resources, model, messages, dag, events, ...)
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from collections.abc import Mapping
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

PLUGIN_APIS = ("rm.policy", "am.asks")
#: The floor of the services in rm/, am/ and nm/: each process's adapters and ``__main__``.
SERVER_FLOOR = "server"


def layer_of(module: str) -> str | None:
    """A module's layer, read from where it stands: ``treadle/*.py`` is the kernel,
    ``treadle/<package>/`` the tools; ``rm/policy/`` and ``am/asks.py`` the plugin APIs;
    ``<rm|am|nm>/server/`` and ``__main__`` the services; the rest of rm/, am/ and nm/ the
    cores; ``plugins/`` and third-party packages the plugins."""
    parts = module.split(".")
    top = parts[0]
    if top == "plugins" or module.startswith("treadle_"):
        return PLUGINS
    if any(module == api or module.startswith(api + ".") for api in PLUGIN_APIS):
        return PLUGIN_API
    if top in ("rm", "am", "nm"):
        if len(parts) >= 2 and parts[1] in (SERVER_FLOOR, "__main__"):
            return SERVICES
        return CORES
    if top == "treadle":
        if len(parts) >= 2 and parts[1] in ("live", "rpc"):
            return None  # placed by prefix in ALLOWED, never importing upwards (checked below)
        path = ROOT.joinpath(*parts)
        if len(parts) == 1 or (len(parts) == 2 and not path.is_dir()):
            return KERNEL
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


def imported_modules(path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The project modules ``path`` imports, at module level or inside a function (a
    function-level import must not be the way round a cycle): ``from M import n`` names
    the module ``M.n`` when there is one, else ``M`` itself (a package: its
    ``__init__``), so a submodule that takes names from its own package imports it."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                for a in node.names
            ]
        else:
            continue
        for m in names:
            while m and m not in modules:
                m = m.rpartition(".")[0]
            if m:
                out.add(m)
    return out


def module_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules it imports; a package and its submodules are modules too."""
    graph = {name: imported_modules(path, modules) for name, path in modules.items()}
    return {name: found - {name} for name, found in graph.items()}


#: The package that holds both the kernel (below the services) and the tools (above them):
#: its modules and sub-packages are rooms of their own, beside rm/, am/, nm/ and plugins/.
OPENED = "treadle"


def rooms_of(name: str, modules: Mapping[str, Path]) -> list[str]:
    """A module's path, folder by folder: ``treadle/cluster``, ``driver.py``."""
    *folders, last = name.split(".")
    package = modules[name].name == "__init__.py"
    parts = [*folders, last, "__init__.py"] if package else [*folders, f"{last}.py"]
    if parts[0] == OPENED and len(parts) > 1:
        parts[:2] = [f"{OPENED}/{parts[1]}"]
    return parts


def room_graph(modules: Mapping[str, Path]) -> dict[str, set[str]]:
    """The arrows between the rooms of each folder: a module's import ties the two rooms
    of the one folder that holds both, a file or a sub-folder each (the top holds the
    packages, ``treadle`` opened). A cycle here is an import that runs back up from a
    lower floor although no module need be on a cycle (cluster -> sim -> rm -> cluster),
    or a package's ``__init__`` and a submodule that takes names from it."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, found in module_graph(modules).items():
        here = rooms_of(name, modules)
        for target in found:
            there = rooms_of(target, modules)
            i = next(i for i, (a, b) in enumerate(zip(here, there, strict=False)) if a != b)
            graph["/".join(here[: i + 1])].add("/".join(there[: i + 1]))
    return graph


#: The project's own modules; third-party plugins import the project, never the reverse.
OWN = {name: path for name, path in MODULES.items() if is_project(name)}


def test_the_modules_import_no_cycle() -> None:
    assert find_cycle(module_graph(OWN)) is None


def test_the_rooms_of_each_folder_import_no_cycle() -> None:
    assert find_cycle(room_graph(OWN)) is None


def find_cycle(graph: Mapping[str, set[str]]) -> list[str] | None:
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


def tree(root: Path, files: Mapping[str, str]) -> dict[str, Path]:
    """The modules of a made-up project under ``root`` (path -> source)."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return {module_name(root / rel, root): root / rel for rel in files}


def test_the_cycle_check_sees_a_package_and_its_submodule(tmp_path: Path) -> None:
    # The shape metrics had: the package's __init__ hands on a submodule's names, and
    # the submodule takes a name from the package.
    modules = tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.writers import write\nfrom pkg.stats import mean\n",
            "pkg/stats.py": "def mean(): ...\n",
            "pkg/writers.py": "from pkg import mean\n",
        },
    )
    assert find_cycle(module_graph(modules)) == ["pkg", "pkg.writers", "pkg"]
    assert find_cycle(room_graph(modules)) == [
        "pkg/__init__.py",
        "pkg/writers.py",
        "pkg/__init__.py",
    ]
    # Naming the submodule itself (``from pkg import stats``) goes round no cycle.
    (tmp_path / "pkg" / "writers.py").write_text("from pkg import stats\n")
    assert module_graph(modules)["pkg.writers"] == {"pkg.stats"}
    assert find_cycle(module_graph(modules)) is None


def test_the_cycle_check_sees_folders_that_import_each_other(tmp_path: Path) -> None:
    # The shape cluster and sim had: no module is on a cycle, but the folders are.
    modules = tree(
        tmp_path,
        {
            "top/__init__.py": "",
            "top/cluster/__init__.py": "",
            "top/cluster/driver.py": "from top.sim.engine import ProgressFn\n",
            "top/cluster/config.py": "QUEUES = 1\n",
            "top/sim/__init__.py": "",
            "top/sim/engine.py": "from top.rm import serve\n",
            "top/rm.py": "def serve():\n    from top.cluster.config import QUEUES\n",
        },
    )
    assert find_cycle(module_graph(modules)) is None
    assert find_cycle(room_graph(modules)) == ["top/cluster", "top/sim", "top/rm.py", "top/cluster"]


@pytest.mark.parametrize(
    ("importer", "imported", "ok"),
    [
        ("plugins.policies.x", "rm.policy", True),
        ("plugins.policies.x", "treadle.resources", True),
        ("plugins.policies.x", "rm.core.facade.facade", False),
        ("plugins.policies.x", "treadle.live.wire", False),
        ("plugins.policies.x", "treadle.rpc.v1", False),
        ("plugins.policies.x", "plugins.policies.y", False),
        ("rm.core.facade.scheduling", "rm.core.facade.state", True),
        ("rm.core.facade.scheduling", "treadle.study.runner", False),
        ("rm.core.facade.scheduling", "rm.server.service", False),
        ("treadle.events", "rm.core.facade.facade", False),
        ("rm.server.service", "treadle.live.rpcutil", True),
        ("rm.server.service", "treadle.study.runner", False),
        ("treadle.cli.app", "rm.server.service", False),
    ],
)
def test_the_allow_lists_say_what_they_mean(importer: str, imported: str, ok: bool) -> None:
    assert allowed(importer, imported) is ok


def test_rm_holds_its_modules_in_floors() -> None:
    """rm/ itself holds only its package file and ``python -m rm``; every other module
    stands in rm/core/, rm/server/ or rm/policy/."""
    loose = sorted(p.name for p in (ROOT / "rm").glob("*.py"))
    assert loose == ["__init__.py", "__main__.py"]
    floors = {p.name for p in (ROOT / "rm").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert floors == {"core", "server", "policy"}


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
