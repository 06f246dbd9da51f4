"""``python -m tests.golden [--write]``: print (or store) the golden digests."""

from __future__ import annotations

import argparse
import json

from tests.golden import DIGESTS, compute


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m tests.golden", description=__doc__)
    ap.add_argument("--write", action="store_true", help=f"store them in {DIGESTS}")
    args = ap.parse_args()
    text = json.dumps(compute(), indent=1, sort_keys=True) + "\n"
    if args.write:
        DIGESTS.write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
