"""``python -m treadle.cli``: the ``treadle`` command."""

from treadle.cli.app import main

main()
