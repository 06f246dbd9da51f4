"""End-to-end tests on a real Docker engine: the project image, built beforehand by
``deploy/build-image.sh`` (``.ci/run`` builds it), run as RM, NM host and AM host
containers through testcontainers.

Without an engine or the image these tests are skipped on a developer's machine, but they
fail in CI (``CI`` set): there they must run. After every test, whatever it created is
removed (also when it failed) and the test fails if a labelled container or network was
left behind.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

from treadle.cluster.docker import labelled, remove_labelled
from treadle.errors import TreadleError

IMAGE = os.environ.get("TREADLE_IMAGE", "treadle:latest")
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test under tests/e2e is marked ``e2e`` (``-m "not e2e"`` leaves them out).

    The hook sees the whole session's items: only those in this directory are marked."""
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)


def _unavailable() -> str | None:
    from treadle.cluster.docker import check_image

    try:
        check_image(IMAGE)
    except TreadleError as e:
        return str(e)
    return None


@pytest.fixture(scope="session")
def image() -> str:
    reason = _unavailable()
    if reason is not None:
        if os.environ.get("CI"):
            pytest.fail(f"e2e tests must run in CI: {reason}")
        pytest.skip(reason)
    return IMAGE


@pytest.fixture(autouse=True)
def no_leftovers(image: str) -> Iterator[None]:
    yield
    left = labelled()
    remove_labelled()  # sweep, so one failure does not cascade into the next test
    assert left == [], f"left behind: {left}"
