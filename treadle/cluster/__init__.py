"""Clusters of real processes or containers, and runs on them.

- ``base``: ``ClusterBase``, what every cluster shares (start under a deadline, wait for
  the RM and the nodes, ``guard``, ``expect_exit``, stop, each role's lag, the run's
  fidelity, logs).
- ``local``: ``LocalCluster``, the roles as OS processes on this machine.
- ``docker``: ``DockerCluster``, the roles as Docker containers; image checks and sweeps.
- ``commands``: the roles' command lines, node files and the settings checks.
- ``procs``: processes by pid, the ``cluster.json`` state file, log tails and lag summaries.
- ``config``: the RM's configuration file (``python -m rm --config``): queues and users.
- ``fidelity``: each role's lag against the liveness budgets: expiries caused by lag,
  the verdict and a dilation that would fit.
- ``driver``: replaying a workload on a live cluster (the YARN client side).
- ``compare``: the one comparison path, in the simulator or on a cluster per policy.

Nothing is imported here: ``python -m rm`` imports ``config`` alone.
"""
