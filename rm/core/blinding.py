"""What the RM hides from a policy that does not use an oracle (``Policy.uses_oracle``):
true task durations. Such a policy sees the submitted job with every task duration 0
(its DAG, widths and resources unchanged) and asks without their duration hints
(``expected_duration_s``, ``remaining_work``, ``remaining_usage`` 0). The AM still gets
the real job; the policy learns durations only from the containers that end."""

from __future__ import annotations

from treadle.messages import Ask, new_ask
from treadle.model import JobSpec, StageSpec
from treadle.resources import ZERO


def blind_job(job: JobSpec) -> JobSpec:
    """``job`` with every task duration 0."""
    return JobSpec(
        job.name,
        job.user,
        job.submit_s,
        tuple(StageSpec(s.name, s.resources, (0.0,) * s.tasks, s.parents) for s in job.stages),
        job.queue,
    )


def blind_ask(a: Ask) -> Ask:
    """``a`` without its duration hints (``a`` itself when it carries none)."""
    if not (a.expected_duration_s or a.remaining_work or a.remaining_usage):
        return a
    return new_ask(a.priority, a.resources, a.count, a.kind, 0.0, 0.0, ZERO, a.group)
