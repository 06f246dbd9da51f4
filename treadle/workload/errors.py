"""Invalid input turned into one-line ``WorkloadError``s naming the file and the field.

Pydantic ``ValidationError``s become one message at a path such as
``jobs[2].stages[0].resources.vcores`` (``treadle.yamlfile.validation_error``, which every
YAML input file of treadle shares), with the words for the workload schema's own unions
(durations, drawn values, demand shapes, generator kinds) and its tags (a duration's, a
generator's kind) dropped from paths; YAML syntax errors name their line, and resource
maps that ``Resources.parse`` refuses name the resource.
"""

from __future__ import annotations

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
from treadle.yamlfile import brief, validation_error, yaml_error


def from_validation_error(
    err: ValidationError, source: str, root: type[BaseModel] = WorkloadFile
) -> WorkloadError:
    """The first problem of ``err`` (raised validating ``root``) as one line."""
    return validation_error(err, source, root, WorkloadError, _describe, _is_tag)


def _is_tag(before: int | str | None, previous: int | str | None, part: int | str) -> bool:
    # Union member tags are not part of the user's document: a duration's and a
    # generator's kind (the "~"-prefixed tags of the generators' parameters drop anyway).
    return (previous == "duration_s" and part in DURATION_TAGS) or (
        before == "generators" and isinstance(previous, int) and part in GENERATOR_KINDS
    )


def _describe(error: ErrorDetails) -> str | None:
    kind = error["type"]
    value = error.get("input")
    if kind == "duration":
        return _describe_duration(value)
    if kind == "drawn":
        return _describe_drawn(value)
    if kind == "demand":
        return f"{DEMAND_HELP}, got {brief(value)}"
    kinds = ", ".join(map(repr, GENERATOR_KINDS))
    if kind == "union_tag_invalid":
        return f"unknown kind {value.get('kind')!r}; expected one of {kinds}"
    if kind == "union_tag_not_found":
        return f"required field is missing (one of {kinds})"
    return None


def _describe_drawn(value: object) -> str:
    if isinstance(value, dict):
        if "dist" not in value:
            return f"a distribution needs a 'dist' key ({join(DISTRIBUTIONS)})"
        return f"unknown distribution {value['dist']!r}; expected one of {join(DISTRIBUTIONS)}"
    return f"{DRAWN_HELP}, got {brief(value)}"


def _describe_duration(value: object) -> str:
    if isinstance(value, dict):
        if "dist" not in value:
            return f"a distribution needs a 'dist' key ({join(DISTRIBUTIONS)})"
        return f"unknown distribution {value['dist']!r}; expected one of {join(DISTRIBUTIONS)}"
    return f"{DURATION_HELP}, got {value!r}"


def join(names: Sequence[str] | Mapping[str, object]) -> str:
    """Names for a message: ``a, b, c``."""
    return ", ".join(names)


def from_yaml_error(e: yaml.YAMLError, source: str) -> WorkloadError:
    """A YAML syntax error as one line, at the line it names."""
    return yaml_error(e, source, WorkloadError)


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
