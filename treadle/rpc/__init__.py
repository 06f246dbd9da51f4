"""Generated protobuf/gRPC code (see treadle.protogen)."""
