"""A YARN REST client's tests written with treadle's pytest plugin: docs/testing-against-
treadle.md shows them (tests/integration/test_docs_testing_page.py runs them and checks
that the page shows them as they are here)."""

import pytest
import requests

from rm.server.http_auth import SignedAuth  # signs requests as treadle's RM checks them

WORKLOAD = """
cluster:
  nodes: [{count: 2, resources: {vcores: 4, memory_mb: 8192}}]
users:
  alice: {weight: 1}
  bob: {weight: 1}
jobs:
  - {name: etl, user: alice, submit_s: 0,
     stages: [{name: map, tasks: 6, duration_s: 10, resources: {vcores: 1, memory_mb: 1024}}]}
  - {name: report, user: bob, submit_s: 2,
     stages: [{name: scan, tasks: 4, duration_s: 8, resources: {vcores: 1, memory_mb: 1024}}]}
"""


def application_names(rest_url, auth=None):
    """The client under test: the names of the applications YARN lists."""
    reply = requests.get(f"{rest_url}/ws/v1/cluster/apps", auth=auth, timeout=10)
    reply.raise_for_status()
    return sorted(app["name"] for app in (reply.json()["apps"] or {}).get("app", []))


def test_the_client_lists_every_application(treadle_cluster):
    cluster = treadle_cluster(WORKLOAD, policy="fair", dilation=20)
    results = cluster.run()  # submit every job, wait until all have ended
    assert results.finished == 2
    admin = SignedAuth(cluster.credentials)  # the cluster's admin sees every application
    assert application_names(cluster.rest_url, auth=admin) == ["etl", "report"]


def test_a_user_sees_only_their_own_applications(treadle_cluster):
    cluster = treadle_cluster(WORKLOAD, dilation=20)
    cluster.run()
    alice = cluster.add_user("alice")
    assert application_names(cluster.rest_url, auth=SignedAuth(alice)) == ["etl"]
    with pytest.raises(requests.HTTPError, match="401"):
        application_names(cluster.rest_url)  # unsigned


def test_a_simple_mode_cluster_takes_unsigned_requests(treadle_cluster):
    cluster = treadle_cluster(WORKLOAD, nodes=1, dilation=20, secure=False)
    submission = cluster.submit()
    assert submission.wait().finish_order() == ["etl", "report"]
    assert application_names(cluster.rest_url) == ["etl", "report"]
