"""Studies: one policy run in the simulator (``runner``), and policies compared on one
workload in the simulator or on live clusters (``compare``), with their reports."""
