"""The NodeManager process: its gRPC client loop and container launcher around
``nm.core``, and ``python -m nm``."""
