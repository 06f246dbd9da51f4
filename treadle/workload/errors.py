"""Invalid input turned into one-line ``WorkloadError``s naming the file and the field.

Pydantic ``ValidationError``s become one message at a path such as
``jobs[2].stages[0].resources.vcores`` (the first problem, preferring a misspelt key,
with "did you mean" and a count of the others), YAML syntax errors name their line, and
resource maps that ``Resources.parse`` refuses name the resource. The rendering of
validation errors works for any model tree (``root``), so other YAML files that reuse
the schema's models (queues, users) report their errors the same way.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Mapping, Sequence

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from treadle.errors import WorkloadError
from treadle.resources import Resources
from treadle.workload.schema import (
    DEMAND_HELP,
    DISTRIBUTIONS,
    DRAWN_HELP,
    DURATION_HELP,
    DURATION_TAGS,
    GENERATOR_KINDS,
    WorkloadFile,
)

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def from_validation_error(
    err: ValidationError, source: str, root: type[BaseModel] = WorkloadFile
) -> WorkloadError:
    """The first problem of ``err`` (raised validating ``root``) as one line."""
    errors = err.errors(include_url=False)
    # A misspelt key usually also makes a required one "missing": report the cause.
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    message = _describe(first, root)
    loc = tuple(first["loc"])
    if first["type"] in ("union_tag_invalid", "union_tag_not_found") and isinstance(
        first.get("input"), dict
    ):
        loc += (str(first.get("ctx", {}).get("discriminator", "kind")).strip("'"),)
    if len(errors) > 1:
        more = len(errors) - 1
        message += f" (and {more} more problem{'s' if more > 1 else ''})"
    return WorkloadError(source, _loc_to_path(loc) or None, message)


_from_validation_error = from_validation_error  # its name in the single-module workload.py


def _loc_to_path(loc: Sequence[int | str]) -> str:
    out = ""
    previous: int | str | None = None
    before: int | str | None = None
    for part in loc:
        # Union member tags are not part of the user's document: a duration's, a
        # generator's kind, and the "~"-prefixed tags of the generators' parameters.
        tag = (
            (previous == "duration_s" and part in DURATION_TAGS)
            or (before == "generators" and isinstance(previous, int) and part in GENERATOR_KINDS)
            or (isinstance(part, str) and part.startswith("~"))
        )
        before, previous = previous, part
        if tag or part == "[key]":
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.match(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def _describe(error: ErrorDetails, root: type[BaseModel]) -> str:
    kind = error["type"]
    value = error.get("input")
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field" + _did_you_mean(error["loc"], root)
    if kind == "duration":
        return _describe_duration(value)
    if kind == "drawn":
        return _describe_drawn(value)
    if kind == "demand":
        return f"{DEMAND_HELP}, got {_brief(value)}"
    kinds = ", ".join(map(repr, GENERATOR_KINDS))
    if kind == "union_tag_invalid":
        return f"unknown kind {value.get('kind')!r}; expected one of {kinds}"
    if kind == "union_tag_not_found":
        return f"required field is missing (one of {kinds})"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a mapping, got {_brief(value)}"
    if kind == "string_pattern_mismatch":
        return f"must be a non-empty name without spaces, got {value!r}"
    if kind == "value_error":
        return str(error.get("ctx", {}).get("error", error["msg"]))
    if "[key]" in error["loc"]:
        return f"keys must be names, got {error['loc'][-2]!r}"
    message = error["msg"][:1].lower() + error["msg"][1:]
    if isinstance(value, str | int | float | bool) or value is None:
        message += f", got {value!r}"
    return message


def _describe_drawn(value: object) -> str:
    if isinstance(value, dict):
        if "dist" not in value:
            return f"a distribution needs a 'dist' key ({join(DISTRIBUTIONS)})"
        return f"unknown distribution {value['dist']!r}; expected one of {join(DISTRIBUTIONS)}"
    return f"{DRAWN_HELP}, got {_brief(value)}"


def _brief(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe_duration(value: object) -> str:
    if isinstance(value, dict):
        if "dist" not in value:
            return f"a distribution needs a 'dist' key ({join(DISTRIBUTIONS)})"
        return f"unknown distribution {value['dist']!r}; expected one of {join(DISTRIBUTIONS)}"
    return f"{DURATION_HELP}, got {value!r}"


def _did_you_mean(loc: Sequence[int | str], root: type[BaseModel]) -> str:
    allowed = sorted({f for m in _models_at(loc[:-1], root) for f in m.model_fields})
    close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _models_at(loc: Sequence[int | str], root: type[BaseModel]) -> set[type[BaseModel]]:
    """The schema models an error location can point into (for spelling suggestions)."""
    models: set[type[BaseModel]] = {root}
    for part in loc:
        # List indices, dict keys and union tags are not fields: they keep the models.
        fields = [
            m.model_fields[part] for m in models if isinstance(part, str) and part in m.model_fields
        ]
        if fields:
            models = {m for f in fields for m in _models_in(f.annotation)}
        elif part in GENERATOR_KINDS:  # a generator's kind tag narrows to its model
            models = {m for m in models if _kind_of(m) == part} or models
    return models


def _kind_of(model: type[BaseModel]) -> object:
    kind = model.model_fields.get("kind")
    args = typing.get_args(kind.annotation) if kind else ()
    return args[0] if args else None


def _models_in(annotation: object) -> set[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    return {m for arg in typing.get_args(annotation) for m in _models_in(arg)}


def join(names: Sequence[str] | Mapping[str, object]) -> str:
    """Names for a message: ``a, b, c``."""
    return ", ".join(names)


def from_yaml_error(e: yaml.YAMLError, source: str) -> WorkloadError:
    """A YAML syntax error as one line, at the line it names."""
    if isinstance(e, yaml.MarkedYAMLError):
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}" if mark else None
        parts = [p for p in (e.context, e.problem) if p]
        return WorkloadError(source, where, "invalid YAML: " + ", ".join(parts))
    return WorkloadError(source, None, f"invalid YAML: {e}")


def parse_resources(values: Mapping[str, object], source: str, where: str) -> Resources:
    """Resources.parse with errors as WorkloadError; at least one amount must be positive."""
    try:
        parsed = Resources.parse(values, where=where)
    except ValueError as e:
        # Resources.parse prefixes its message with "<where>[.<name>]: ".
        place, _, message = str(e).partition(": ")
        raise WorkloadError(source, place, message) from None
    if parsed.is_zero():
        raise WorkloadError(source, where, "at least one resource amount must be positive")
    return parsed
