"""``python -m treadle.live.healthcheck HOST:PORT``: exit 0 when the gRPC server there reports
SERVING (for container healthchecks), 1 otherwise, with the reason on stderr."""

from __future__ import annotations

import sys

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m treadle.live.healthcheck HOST:PORT", file=sys.stderr)
        return 2
    try:
        with grpc.insecure_channel(argv[0]) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            resp = stub.Check(health_pb2.HealthCheckRequest(), timeout=2.0)  # type: ignore[attr-defined]
    except grpc.RpcError as e:
        print(f"{argv[0]}: {e}", file=sys.stderr)
        return 1
    ok = resp.status == health_pb2.HealthCheckResponse.SERVING
    if not ok:
        print(f"{argv[0]}: not serving", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
