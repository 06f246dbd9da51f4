"""Generated protobuf/gRPC code (see treadle.rpc.protogen)."""
