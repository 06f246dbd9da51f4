"""Building message (dataclass) instances on hot paths.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, which
costs more than the allocation itself. The cores build a few messages per task
(containers, asks, statuses, launches, heartbeats); they build them by setting the slots
directly. The instances are the same as the constructor's (same class, same field values).
"""

from __future__ import annotations

import dataclasses
from typing import Any


def slot_setters(cls: type, names: tuple[str, ...]) -> tuple[Any, ...]:
    """The setters of the slots ``names`` of the slotted dataclass ``cls``, in that
    order. Refuses a class whose fields are not exactly ``names`` (a field added to the
    message must be added to its fast constructor too) or that validates in
    ``__post_init__`` (bypassing the constructor would skip it)."""
    fields = tuple(f.name for f in dataclasses.fields(cls))
    if fields != names or hasattr(cls, "__post_init__"):
        raise RuntimeError(f"{cls.__name__}: fast constructor fields {names} do not match {fields}")
    return tuple(getattr(cls, n).__set__ for n in names)
