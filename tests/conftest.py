"""Every test session gets an alone-JCT cache of its own (never the user's), and reads the
public traces from ``../shared/traces`` beside the checkout (``$TREADLE_TRACES``, which
the docs' commands and ``treadle traces`` read), unless the caller set it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
os.environ.setdefault("TREADLE_TRACES", str(TRACES))


@pytest.fixture(autouse=True, scope="session")
def _own_alone_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    old = os.environ.get("TREADLE_CACHE_DIR")
    os.environ["TREADLE_CACHE_DIR"] = str(tmp_path_factory.mktemp("treadle-cache"))
    yield
    if old is None:
        os.environ.pop("TREADLE_CACHE_DIR", None)
    else:
        os.environ["TREADLE_CACHE_DIR"] = old
