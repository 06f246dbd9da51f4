"""Message <-> protobuf conversions that the integration tests do not pin down."""

from __future__ import annotations

import pytest

from treadle.errors import InvalidRequestError
from treadle.live import wire
from treadle.messages import Ask, AskKind
from treadle.resources import Resources


def test_ask_hints_survive_the_wire() -> None:
    # Resource-seconds grow past any single amount: 4,000 tasks x 8 GB x 60 s.
    usage = Resources(vcores=4000 * 60.0, memory_mb=4000 * 8192 * 60.0)
    ask = Ask(
        3, Resources(vcores=1, memory_mb=8192), 7, AskKind.ALTRUISTIC, 60.0, 240000.0, usage, 2
    )
    assert wire.ask_from_pb(wire.ask_to_pb(ask)) == ask
    assert usage["memory_mb"] > wire.MAX_AMOUNT


def test_ask_without_usage_is_zero_usage() -> None:
    ask = Ask(0, Resources(vcores=1), 1)
    assert wire.ask_from_pb(wire.ask_to_pb(ask)).remaining_usage.is_zero()


def test_absurd_usage_is_refused_with_its_field() -> None:
    pb = wire.ask_to_pb(Ask(2, Resources(vcores=1), 1, remaining_usage=Resources(vcores=1.0)))
    pb.remaining_usage.amounts["vcores"] = 1e300
    with pytest.raises(InvalidRequestError, match=r"ask\[2\]\.remaining_usage\.vcores"):
        wire.ask_from_pb(pb)


def test_negative_ask_group_is_refused_with_its_field() -> None:
    pb = wire.ask_to_pb(Ask(2, Resources(vcores=1), 1))
    pb.group = -3
    with pytest.raises(InvalidRequestError, match=r"ask\[2\]\.group must be >= 0, got -3"):
        wire.ask_from_pb(pb)
