"""YARN's REST writes on the RM's HTTP port (``rm.server.http``), in YARN's request and
response shapes (Hadoop's ResourceManagerRest.md):

- ``POST /ws/v1/cluster/apps/new-application``: an application id handed out ahead of its
  submission, and the largest node's resources (``maximum-resource-capability``);
- ``POST /ws/v1/cluster/apps``: submit (202 Accepted, ``Location`` the app's URL). The
  job's DAG of stages travels in the AM container spec's environment, entry
  ``TREADLE_DAG`` (``DAG_ENV``): JSON ``{"stages": [{"name", "tasks", "duration_s"`` (or
  ``"durations"``: one per task, emulated s), ``"resources"``, ``"parents"}]}``. Without
  it the application runs the default job, as DistributedShell runs its command: one
  stage ``shell`` of one task of the submission's ``resource`` for ``DEFAULT_TASK_S``;
- ``GET``/``PUT /apps/{id}/state`` (PUT ``{"state": "KILLED"}`` kills it),
  ``/apps/{id}/queue`` (PUT moves it to another leaf queue its user may submit to; the
  policy is told, ``Policy.on_app_moved``), ``/apps/{id}/priority`` (kept and reported;
  treadle's policies do not order by it);
- ``GET /appstatistics`` and ``GET /apps/{id}/appattempts/{attempt}/containers``.

A submission takes the same path as gRPC's (``RmServer.submit``: checks, core call, store
write), so it survives an RM restart, with its priority (as last set), type and tags.
A caller acts on its own applications only (or as an admin, or an administrator of the
queue): others' get 403, an unknown id 404, a bad body YARN's RemoteException with 400.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, Protocol

import structlog
from aiohttp import web

from rm.core.reports import AppDetail
from rm.server import http_yarn as yj
from rm.server.submissions import YarnContext
from treadle import events as ev
from treadle.errors import InvalidRequestError, NotFoundError
from treadle.live.gate import Caller
from treadle.rpc.v1 import client_pb2 as client_pb, common_pb2 as pb
from treadle.yarnids import parse_app_id, parse_attempt_id

log = structlog.get_logger("rm")

DAG_ENV = "TREADLE_DAG"
DEFAULT_TASK_S = 10.0
DEFAULT_RESOURCE = {"memory_mb": 1024.0, "vcores": 1.0}


class Host(Protocol):
    """What the writes use of ``rm.server.http.RmHttp``."""

    s: Any  # rm.server.service.RmServer

    def apps(self) -> list[AppDetail]: ...

    def caller(self, request: web.Request) -> Caller: ...

    def identify(self, request: web.Request, body: bytes, *, write: bool) -> Caller: ...

    def find_app(self, request: web.Request) -> AppDetail: ...

    def clock(self) -> yj.Clock: ...


#: The events after which a container is no longer live.
_CONTAINER_ENDS = frozenset((ev.CONTAINER_FINISHED, ev.CONTAINER_RELEASED, ev.CONTAINER_PREEMPTED))


class AllocationTimes:
    """When the RM allocated each live container (YARN's container creation time, its
    ``startedTime``), read from the RM's event log as it grows: each call reads the
    records logged since the last. A restarted RM's log holds its previous run's, so a
    container recovered on its node's resync keeps its time."""

    def __init__(self) -> None:
        self._read = 0
        self.at: dict[str, float] = {}  # live container -> when it was allocated

    def update(self, records: Sequence[ev.Record]) -> dict[str, float]:
        at = self.at
        for r in islice(records, self._read, None):
            event = r["event"]
            if event == ev.CONTAINER_ALLOCATED:
                at[r["container"]] = r["t"]
            elif event in _CONTAINER_ENDS:
                at.pop(r["container"], None)
        self._read = len(records)
        return at


@dataclass
class Writes:
    """The write handlers over ``RmHttp``."""

    h: Host
    times: AllocationTimes = field(default_factory=AllocationTimes)

    @property
    def s(self) -> Any:
        return self.h.s

    async def _body(self, request: web.Request) -> tuple[Caller, dict[str, Any]]:
        raw = await request.read()
        caller = self.h.identify(request, raw, write=True)
        try:
            data = json.loads(raw or b"{}")
        except (ValueError, RecursionError) as e:
            raise InvalidRequestError(f"the request body is not JSON: {e}") from None
        if not isinstance(data, dict):
            raise InvalidRequestError("the request body must be a JSON object")
        return caller, data

    def _own_app(self, request: web.Request, caller: Caller, what: str) -> AppDetail:
        app_id = request.match_info["app_id"]
        for a in self.h.apps():
            if a.report.app_id == app_id:
                self.s.may_act_on(caller, a.report, what)
                return a
        raise NotFoundError(f"app with id: {app_id} not found")

    # ------------------------------------------------------------------ new + submit
    async def new_application(self, request: web.Request) -> web.Response:
        await self._body(request)
        app_id = self.s.rm.new_application_id()
        largest = self.s.rm.state.largest_node()
        cap = yj.resource_info(largest) if largest is not None else yj.resource_info(yj.ZERO)
        return web.json_response({"application-id": app_id, "maximum-resource-capability": cap})

    async def submit(self, request: web.Request) -> web.Response:
        caller, data = await self._body(request)
        if not caller.user:
            raise InvalidRequestError("name the submitting user (simple mode: ?user.name=)")
        sub, yarn = submission_from_yarn(data, caller.user)
        app_id, _ = await self.s.submit(caller, sub, str(data.get("application-id") or ""), yarn)
        url = f"{request.path.rstrip('/')}/{app_id}"
        return web.json_response(None, status=202, headers={"Location": url})

    # ------------------------------------------------------------------ state
    async def get_state(self, request: web.Request) -> web.Response:
        a = self._own_app(request, self.h.caller(request), "read the applications")
        return web.json_response({"state": yj.yarn_state(a)})

    async def put_state(self, request: web.Request) -> web.Response:
        caller, data = await self._body(request)
        target = str(data.get("state", "")).upper()
        if target != "KILLED":
            raise InvalidRequestError(
                f"Only 'KILLED' is allowed as a target state, got {data.get('state')!r}"
            )
        a = self._own_app(request, caller, "kill the applications")
        if a.report.state != "RUNNING":  # ended already: YARN answers its final state
            return web.json_response({"state": yj.yarn_state(a)})
        self.s.kill(caller, a.report.app_id)
        return web.json_response({"state": "KILLED"})

    # ------------------------------------------------------------------ queue
    async def get_queue(self, request: web.Request) -> web.Response:
        a = self._own_app(request, self.h.caller(request), "read the applications")
        return web.json_response({"queue": a.report.queue})

    async def put_queue(self, request: web.Request) -> web.Response:
        caller, data = await self._body(request)
        queue = data.get("queue")
        if not isinstance(queue, str) or not queue:
            raise InvalidRequestError('the body must name the target queue: {"queue": NAME}')
        a = self._own_app(request, caller, "move the applications")
        s = self.s
        old = s.rm.move_application(a.report.app_id, queue, s.now())
        log.info("app_moved", app=a.report.app_id, by=caller.user, queue=queue, was=old)
        s.persist([a.report.app_id])
        s.after_core_calls()
        return web.json_response({"queue": queue})

    # ------------------------------------------------------------------ priority
    async def get_priority(self, request: web.Request) -> web.Response:
        a = self._own_app(request, self.h.caller(request), "read the applications")
        return web.json_response({"priority": a.submission.priority})

    async def put_priority(self, request: web.Request) -> web.Response:
        caller, data = await self._body(request)
        priority = _int(data, "priority", None)
        a = self._own_app(request, caller, "set the priority of the applications")
        if a.report.state != "RUNNING":
            raise InvalidRequestError(f"application {a.report.app_id} has ended")
        self.s.rm.set_application_priority(a.report.app_id, priority)
        log.info("app_priority", app=a.report.app_id, by=caller.user, priority=priority)
        self.s.persist([a.report.app_id])  # before the answer: a restart keeps it
        return web.json_response({"priority": priority})

    # ------------------------------------------------------------------ reads
    async def statistics(self, request: web.Request) -> web.Response:
        self.h.caller(request)
        states = [s for s in request.query.get("states", "").upper().split(",") if s]
        for s in states:
            if s not in yj.APP_STATES:
                raise InvalidRequestError(f"Invalid application-state {s}")
        types = [t for t in request.query.get("applicationTypes", "").split(",") if t]
        if len(types) > 1:
            raise InvalidRequestError("# of applicationTypes = 2, we temporarily support at most "
                                      "one applicationType")  # fmt: skip
        counts: dict[str, int] = {}
        for a in self.h.apps():
            if not types or yj.app_type(a).lower() == types[0].lower():
                counts[yj.yarn_state(a)] = counts.get(yj.yarn_state(a), 0) + 1
        kind = types[0].lower() if types else "*"
        items = [{"state": s, "type": kind, "count": counts.get(s, 0)}
                 for s in states or yj.APP_STATES]  # fmt: skip
        return web.json_response({"appStatInfo": {"statItem": items}})

    async def attempt_containers(self, request: web.Request) -> web.Response:
        a = self.h.find_app(request)
        r = a.report
        attempt = _attempt_number(request.match_info["attempt_id"], r.app_id)
        if not 1 <= attempt <= r.attempt:
            raise NotFoundError(f"appAttempt with id: {request.match_info['attempt_id']} not found")
        rows = []
        app = self.s.rm.state.app(r.app_id)
        if attempt == r.attempt and app is not None:
            at, clock = self.times.update(self.s.rm.log.records), self.h.clock()
            now_ms = clock.ms(self.s.now())
            rows = [yj.container_json(c, self.s.addresses.get(c.node_id, ""),
                                      clock.ms(at.get(c.container_id)), now_ms)
                    for c in app.containers.values()]  # fmt: skip
        return web.json_response({"container": rows})


def _attempt_number(text: str, app_id: str) -> int:
    """An attempt by its YARN id (``appattempt_<timestamp>_<app>_000001``, of ``app_id``)
    or its number."""
    if text.isdigit():
        return int(text)
    try:
        attempt = parse_attempt_id(text)
        if attempt.app == parse_app_id(app_id):
            return attempt.attempt
    except ValueError:
        pass
    raise NotFoundError(f"appAttempt with id: {text} not found")


def _int(data: dict[str, Any], key: str, default: int | None, low: int = 0) -> int:
    value = data.get(key, default)
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InvalidRequestError(f"{key} must be an integer >= {low}, got {value!r}")
    return value


def _resources(value: Any, what: str) -> dict[str, float]:
    """YARN's ``{"memory": MB, "vCores": N}`` or treadle's ``{"memory_mb", "vcores", ...}``."""
    if value is None:
        return dict(DEFAULT_RESOURCE)
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{what} must be an object, got {value!r}")
    names = {"memory": "memory_mb", "vCores": "vcores"}
    out: dict[str, float] = {}
    for k, v in value.items():
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InvalidRequestError(f"{what}.{k} must be a number, got {v!r}")
        out[names.get(str(k), str(k))] = float(v)
    return out


def _environment(spec: Any) -> dict[str, str]:
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise InvalidRequestError("am-container-spec must be an object")
    entries = (spec.get("environment") or {}).get("entry") or []
    if isinstance(entries, dict):  # one entry, as YARN's JSON writes a list of one
        entries = [entries]
    out = {}
    for e in entries:
        if not isinstance(e, dict) or not isinstance(e.get("key"), str):
            raise InvalidRequestError("am-container-spec.environment.entry: {key, value} objects")
        out[e["key"]] = str(e.get("value", ""))
    return out


def _stage(st: Any, n: int) -> pb.StageSpec:
    where = f"{DAG_ENV} stage {n}"
    if not isinstance(st, dict):
        raise InvalidRequestError(f"{where} must be an object")
    durations = st.get("durations")
    if durations is None:
        tasks = _int(st, "tasks", 1, low=1)
        each = st.get("duration_s", DEFAULT_TASK_S)
        durations = [each] * tasks
    if not isinstance(durations, list) or not all(
        isinstance(d, int | float) and not isinstance(d, bool) for d in durations
    ):
        raise InvalidRequestError(f"{where}: durations must be a list of numbers")
    parents = st.get("parents", [])
    if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
        raise InvalidRequestError(f"{where}: parents must be a list of stage names")
    return pb.StageSpec(
        name=str(st.get("name") or f"stage{n}"),
        resources=pb.Resources(amounts=_resources(st.get("resources"), f"{where} resources")),
        durations=[float(d) for d in durations],
        parents=parents,
    )


def _job(name: str, env: dict[str, str], resource: dict[str, float]) -> pb.JobSpec:
    text = env.get(DAG_ENV)
    if text is None:  # the default job, as DistributedShell runs its command
        stage = pb.StageSpec(name="shell", resources=pb.Resources(amounts=resource),
                             durations=[DEFAULT_TASK_S])  # fmt: skip
        return pb.JobSpec(name=name, stages=[stage])
    try:
        dag = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise InvalidRequestError(f"{DAG_ENV} is not JSON: {e}") from None
    if not isinstance(dag, dict) or not isinstance(dag.get("stages"), list):
        raise InvalidRequestError(f'{DAG_ENV} must be {{"stages": [...]}}')
    return pb.JobSpec(name=name, stages=[_stage(s, i) for i, s in enumerate(dag["stages"], 1)])


def submission_from_yarn(
    data: dict[str, Any], user: str
) -> tuple[client_pb.SubmitApplicationRequest, YarnContext]:
    """A YARN submission context as treadle's submission (a bad field: 400)."""
    name = data.get("application-name") or "application"
    queue = data.get("queue") or "default"
    if not isinstance(name, str) or not isinstance(queue, str):
        raise InvalidRequestError("application-name and queue must be strings")
    unmanaged = data.get("unmanaged-AM", False)
    if not isinstance(unmanaged, bool):
        raise InvalidRequestError(f"unmanaged-AM must be true or false, got {unmanaged!r}")
    _int(data, "max-app-attempts", 1, low=1)  # checked; the RM's --max-am-attempts applies
    app_type = data.get("application-type") or yj.APP_TYPE
    tags = data.get("application-tags") or {}
    tag_list = tags.get("tag", []) if isinstance(tags, dict) else tags
    if isinstance(tag_list, str):
        tag_list = [tag_list]
    if not isinstance(app_type, str) or not isinstance(tag_list, list):
        raise InvalidRequestError("application-type must be a string, application-tags tags")
    resource = _resources(data.get("resource"), "resource")
    job = _job(name, _environment(data.get("am-container-spec")), resource)
    request = client_pb.SubmitApplicationRequest(
        user=user, queue=queue, job=job, managed_am=not unmanaged
    )
    yarn = YarnContext(_int(data, "priority", 0), app_type, tuple(str(t) for t in tag_list))
    return request, yarn


def add_routes(r: web.UrlDispatcher, w: Writes, ws: str) -> None:
    r.add_post(f"{ws}/apps/new-application", w.new_application)
    r.add_post(f"{ws}/apps", w.submit)
    r.add_get(f"{ws}/apps/{{app_id}}/state", w.get_state)
    r.add_put(f"{ws}/apps/{{app_id}}/state", w.put_state)
    r.add_get(f"{ws}/apps/{{app_id}}/queue", w.get_queue)
    r.add_put(f"{ws}/apps/{{app_id}}/queue", w.put_queue)
    r.add_get(f"{ws}/apps/{{app_id}}/priority", w.get_priority)
    r.add_put(f"{ws}/apps/{{app_id}}/priority", w.put_priority)
    r.add_get(f"{ws}/appstatistics", w.statistics)
    r.add_get(f"{ws}/apps/{{app_id}}/appattempts/{{attempt_id}}/containers",
              w.attempt_containers)  # fmt: skip
