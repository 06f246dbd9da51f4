"""Every test session gets an alone-JCT cache of its own (never the user's)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True, scope="session")
def _own_alone_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    old = os.environ.get("TREADLE_CACHE_DIR")
    os.environ["TREADLE_CACHE_DIR"] = str(tmp_path_factory.mktemp("treadle-cache"))
    yield
    if old is None:
        os.environ.pop("TREADLE_CACHE_DIR", None)
    else:
        os.environ["TREADLE_CACHE_DIR"] = old
