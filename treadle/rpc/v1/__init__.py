"""Generated gRPC code for treadle.v1."""
