"""treadle: a YARN-style resource manager emulator with pluggable scheduling policies."""

__version__ = "0.1.0"
