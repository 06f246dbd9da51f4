"""Clusters of real processes or containers, and runs on them.

- ``config``: the RM's configuration file (``python -m rm --config``): queues and users.

Nothing is imported here: ``python -m rm`` imports ``config`` alone.
"""
