"""The ``treadle`` command line (console script ``treadle = treadle.cli:main``).

``app`` holds the top-level commands (policies, workloads, validate, schema, sim, compare,
run); ``cluster`` the ``treadle cluster`` sub-commands; ``common`` what they share.
"""

from treadle.cli.app import app, main

__all__ = ["app", "main"]
