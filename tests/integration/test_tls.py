"""TLS on every channel (``--tls-cert/--tls-key/--tls-ca``): a local cluster whose roles
all speak mutual TLS with certificates of a CA made in the test runs a workload to the
end; a client without the CA, or with a certificate of another CA, fails clearly."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from treadle.cluster.driver import probe, replay
from treadle.cluster.local import LocalCluster
from treadle.errors import TreadleError
from treadle.live.rpcutil import Peer, TlsFiles, channel, remember_peer
from treadle.metrics import analyze
from treadle.rpc.v1 import client_pb2 as client_pb, client_pb2_grpc as client_grpc
from treadle.workload import parse_workload

WORKLOAD = """
seed: 1
cluster:
  heartbeat_s: 1.0
  nodes:
    - {count: 2, resources: {vcores: 2, memory_mb: 4096}}
jobs:
  - name: a
    user: alice
    submit_s: 0
    stages:
      - {name: s, tasks: 4, duration_s: 5, resources: {vcores: 1, memory_mb: 1024}}
"""


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca(directory: Path, name: str) -> TlsFiles:
    """A CA and one certificate it signs for 127.0.0.1/localhost (server and client use)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name(name))
        .issuer_name(_name(name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("treadle-role"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(san, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = TlsFiles(
        str(directory / "role.pem"), str(directory / "role.key"), str(directory / "ca.pem")
    )
    Path(files.cert).write_bytes(cert.public_bytes(pem))
    Path(files.key).write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    Path(files.ca).write_bytes(ca.public_bytes(pem))
    return files


def test_a_tls_cluster_runs_a_workload_and_refuses_clients_without_the_ca(tmp_path: Path) -> None:
    tls = make_ca(tmp_path / "pki", "treadle-test-ca")
    other = make_ca(tmp_path / "other", "some-other-ca")
    wl = parse_workload(WORKLOAD, "tls")
    cluster = LocalCluster(wl, "fifo", workdir=tmp_path / "cluster", dilation=10.0, tls=tls)

    async def scenario() -> list[dict[str, object]]:
        await cluster.start()
        address = cluster.rm_address
        records = await cluster.guard(replay(address, wl, timeout_s=60, mode="local", poll_s=0.05))
        # Without the CA (plain text to a TLS port), or with another CA's certificate:
        for peer in (Peer(cluster.secrets.driver), Peer(cluster.secrets.driver, other)):
            async with channel(address, peer) as ch:
                stub = client_grpc.ClientStub(ch)
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await stub.GetClusterMetrics(client_pb.GetClusterMetricsRequest(), timeout=3)
                assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        remember_peer(address, Peer(cluster.secrets.driver))
        with pytest.raises(TreadleError, match=f"cannot reach the RM at {address}"):
            await probe(address, timeout_s=3)
        return records

    try:
        records = asyncio.run(asyncio.wait_for(scenario(), 90))
    finally:
        cluster.stop()
    summary = analyze(records).summary
    assert summary["finished"] == summary["jobs"] == 1
