"""What the live processes (RM, NM and AM hosts, the replay driver) share: the emulated
clock, lag measurement (timer lateness, RPC queueing), protobuf conversions, gRPC helpers
and health probes, and process start-up and logging. The cores never import this
package: their hosts pass ``now`` in."""
