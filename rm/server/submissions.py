"""What the RM checks and decodes of a submission (``ClientServicer.SubmitApplication``):
pure functions of the request, so that a big one is handled in a thread while the RM's
event loop serves heartbeats (``maybe_off_loop``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from rm.server.config import RmLimits
from treadle.errors import InvalidRequestError, LimitExceededError
from treadle.live import wire
from treadle.messages import AppSubmission
from treadle.rpc.v1 import client_pb2 as client_pb

#: A submission larger than this (bytes) is signed, checked and decoded in a thread.
OFF_LOOP_BYTES = 256 * 1024
T = TypeVar("T")
#: That thread: always the same one, so that what a large submission's decoding takes
#: comes from (and goes back to) one allocator arena; with a thread of a pool each, an
#: RM's memory grew to twice a submission's after every one had ended (the churn bench).
_DECODER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rm-decode")


def check_limits(request: client_pb.SubmitApplicationRequest, limits: RmLimits) -> int:
    """The limits a submission is checked against alone (all but ``max_pending_tasks``);
    return its task count. Pure: a big submission is checked off the event loop."""
    stages = request.job.stages
    _limit(len(stages), "stages", "max_stages_per_job", limits.max_stages_per_job)
    tasks = sum(len(st.durations) for st in stages)
    _limit(tasks, "tasks", "max_tasks_per_job", limits.max_tasks_per_job)
    size = request.ByteSize()
    _limit(size, "bytes", "max_request_bytes", limits.max_request_bytes)
    parents = sum(len(st.parents) for st in stages)
    _limit(parents, "stage dependencies", "max_parents_per_job", limits.max_parents_per_job)
    cap = limits.max_name_chars
    names = [request.job.name, request.user, request.queue, request.ask_strategy.name]
    for st in stages:
        names.append(st.name)
        names.extend(st.parents)
    longest = max(map(len, names))
    if longest > cap:
        raise LimitExceededError(
            f"submission has a name of {longest} characters; the RM's limit max_name_chars is {cap}"
        )
    return tasks


async def maybe_off_loop(off: bool, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, in the decoding thread if ``off`` (the loop runs on meanwhile)."""
    if not off:
        return fn(*args)
    return await asyncio.get_running_loop().run_in_executor(_DECODER, fn, *args)


@dataclass(frozen=True, slots=True)
class YarnContext:
    """YARN's submission-context fields that gRPC's submission lacks (the REST API's:
    ``rm.server.http_writes``), kept in the ``AppSubmission``."""

    priority: int = 0
    app_type: str = ""
    tags: tuple[str, ...] = ()


NO_CONTEXT = YarnContext()


def decode(
    request: client_pb.SubmitApplicationRequest, now: float, yarn: YarnContext = NO_CONTEXT
) -> AppSubmission:
    """A submission as the core takes it: its job, ask strategy and their parameters (off
    the event loop), and ``yarn``'s fields."""
    job = wire.job_from_pb(request.job, request.user, request.queue or "default", now)
    params = request.ask_strategy.params_json or "{}"
    try:
        if not isinstance(json.loads(params), dict):
            raise ValueError("not an object")
    except (ValueError, RecursionError) as e:
        raise InvalidRequestError(f"ask_strategy.params_json: {e}") from None
    return AppSubmission(
        job.name,
        request.user,
        job.queue,
        job.tasks,
        request.alone_jct_s if request.has_alone_jct else None,
        job,
        request.managed_am,
        request.ask_strategy.name or "greedy",
        params,
        yarn.priority,
        yarn.app_type,
        yarn.tags,
    )


def _limit(amount: int, what: str, name: str, cap: int) -> None:
    if amount > cap:
        raise LimitExceededError(f"submission has {amount} {what}; the RM's limit {name} is {cap}")
