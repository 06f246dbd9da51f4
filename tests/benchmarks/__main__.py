"""``python -m tests.benchmarks [NAME] [options]``: run benchmark ``bench_NAME`` (default
``sim``) and print its table and ratios. Every ``bench_*.py`` here with a
``main(argv) -> int`` is a benchmark, named without the prefix and with ``-`` for ``_``
(``bench_compare_workers.py``: ``compare-workers``); pytest never collects them (not
``test_*.py``)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path


def available() -> list[str]:
    here = Path(__file__).parent
    return sorted(p.stem.removeprefix("bench_").replace("_", "-") for p in here.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    name = "sim"
    if args and not args[0].startswith("-"):
        name = args.pop(0)
    if name not in available():
        print(f"unknown benchmark {name!r}; choose from {', '.join(available())}", file=sys.stderr)
        return 2
    module = importlib.import_module(f"tests.benchmarks.bench_{name.replace('-', '_')}")
    result: int = module.main(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
