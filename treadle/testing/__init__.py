"""treadle's pytest plugin (entry point ``pytest11``, loaded by every pytest session where
treadle is installed) and the objects its fixtures hand to tests.

- ``treadle_sim``: a function, workload and policy in, ``Results`` out (the simulator,
  in this process; ``treadle.testing.sim``).
- ``treadle_cluster``: a factory of live local clusters (an RM, NM hosts and an AM host as
  OS processes, every port 0, their files in the test's own directory), each a
  ``LiveCluster`` with the RM's gRPC address, REST URL, credentials and helpers to submit a
  workload, wait for it and read its results (``treadle.testing.cluster``). Every process
  a factory started is stopped when the test ends, passed or failed.

This module and ``plugin`` import nothing heavy: the simulator, the cluster and their
dependencies are imported when a fixture is first used.
"""
