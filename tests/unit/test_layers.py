"""The layers of DESIGN.md are one-way: these imports would break them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Plugins see the kernel and the policy / ask APIs only: never the wire.
PLUGIN_FORBIDDEN = ("grpc", "treadle.rpc", "treadle.wire", "rm.service", "nm.service", "am.service")
# The cores and the kernel are sans-IO: no sockets, no event loop, no wall clock.
CORE_FORBIDDEN = ("grpc", "socket", "asyncio", "time", "treadle.rpc", "treadle.clock")
CORE_MODULES = [
    "rm/core.py",
    "rm/policy/__init__.py",
    "rm/policy/base.py",
    "rm/policy/views.py",
    "rm/policy/ordering.py",
    "rm/policy/queuetree.py",
    "rm/policy/shares.py",
    "rm/policy/packing.py",
    "rm/policy/fairshare.py",
    "rm/estimator.py",
    "am/core.py",
    "am/asks.py",
    "nm/core.py",
    "treadle/resources.py",
    "treadle/model.py",
    "treadle/messages.py",
    "treadle/events.py",
    "treadle/errors.py",
    "treadle/sim.py",
]


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{alias.name}" for alias in node.names)
    return out


def offending(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))


PLUGIN_FILES = sorted((ROOT / "plugins").rglob("*.py")) + sorted(
    (ROOT / "tests" / "thirdparty").rglob("*.py")
)


@pytest.mark.parametrize("path", PLUGIN_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_plugins_never_touch_the_wire(path: Path) -> None:
    assert offending(imported_modules(path), PLUGIN_FORBIDDEN) == []


@pytest.mark.parametrize("name", CORE_MODULES)
def test_cores_and_kernel_are_sans_io(name: str) -> None:
    assert offending(imported_modules(ROOT / name), CORE_FORBIDDEN) == []


def test_the_checks_see_a_forbidden_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import grpc\nfrom treadle.rpc.v1 import common_pb2\nimport time\n")
    assert offending(imported_modules(bad), PLUGIN_FORBIDDEN) == [
        "grpc",
        "treadle.rpc.v1",
        "treadle.rpc.v1.common_pb2",
    ]
    assert "time" in offending(imported_modules(bad), CORE_FORBIDDEN)
