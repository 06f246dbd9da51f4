"""Asks as the RM takes them: checked whole before any is applied, and netted of the
containers the AM has not seen yet. Pure functions of their arguments."""

from __future__ import annotations

from collections.abc import Sequence

from treadle.errors import InvalidRequestError
from treadle.messages import Ask, Container, new_ask
from treadle.resources import Resources


def ask_with_count(ask: Ask, count: int) -> Ask:
    """``ask`` with another ``count`` (a new Ask: asks are immutable), faster."""
    return new_ask(
        ask.priority,
        ask.resources,
        count,
        ask.kind,
        ask.expected_duration_s,
        ask.remaining_work,
        ask.remaining_usage,
        ask.group,
    )


def net_of_undelivered(asks: Sequence[Ask], undelivered: Sequence[Container]) -> list[Ask]:
    """``asks`` less the containers granted since the AM counted them (it has not seen
    those yet). Per priority; within a group (``Ask.group``) the grants at any of its
    priorities count against its asks most important first, so an AM that moves tasks
    between a stage's asks does not get them twice (YARN-1902's over-allocation)."""
    if not undelivered:
        return list(asks)
    granted: dict[int, int] = {}
    for c in undelivered:
        granted[c.priority] = granted.get(c.priority, 0) + 1
    pooled: dict[int, int] = {}  # group -> grants at its priorities
    for ask in asks:
        if ask.group:
            pooled[ask.group] = pooled.get(ask.group, 0) + granted.get(ask.priority, 0)
    out: list[Ask] = []
    for ask in sorted(asks, key=_by_priority) if pooled else asks:
        if ask.group:
            seen = pooled[ask.group]
            take = min(seen, ask.count)
            pooled[ask.group] = seen - take
        else:
            take = min(granted.get(ask.priority, 0), ask.count)
        out.append(ask_with_count(ask, ask.count - take) if take else ask)
    return out


def _by_priority(ask: Ask) -> int:
    return ask.priority


def validate_asks(asks: Sequence[Ask], largest: Resources | None) -> None:
    """Check every ask of one request (nothing is applied when one is wrong). ``largest``
    is the componentwise maximum of the live nodes (None: no node yet)."""
    seen: set[int] = set()
    shape_of_group: dict[int, Resources] = {}
    fine: Resources | None = None  # the last shape that passed the checks of a shape
    for ask in asks:
        priority = ask.priority
        if priority < 0:
            raise InvalidRequestError(f"ask priority must be >= 0, got {priority}")
        if priority in seen:
            raise InvalidRequestError(f"two asks at priority {priority}")
        seen.add(priority)
        count = ask.count
        if count < 0:
            raise InvalidRequestError(f"ask count must be >= 0, got {count}")
        res = ask.resources
        # Asks of one request mostly share a shape: one equal to a shape that passed
        # every check of a shape (not negative, not zero, fits a node) passes them again.
        known = count and fine is not None and (res is fine or res == fine)
        if not known and res.any_negative():
            raise InvalidRequestError(f"ask resources must be >= 0, got {res}")
        if count and not known and res.is_zero():
            raise InvalidRequestError("an ask must request some resources")
        group = ask.group
        if group < 0:
            raise InvalidRequestError(
                f"ask at priority {priority}: group must be >= 0, got {group}"
            )
        if group and count:
            shape = shape_of_group.setdefault(group, res)
            if shape is not res and shape != res:
                raise InvalidRequestError(
                    f"ask at priority {priority}: group {group} pools "
                    f"interchangeable tasks, but asks {res} where another "
                    f"ask of the group asks {shape}"
                )
        if count and not known:
            if largest is not None and not res.fits_in(largest):
                raise InvalidRequestError(
                    f"ask {res} at priority {priority} fits no node (largest node {largest})"
                )
            fine = res


def same_but_hints(a: Ask, b: Ask) -> bool:
    """Whether ``a`` and ``b`` ask for the same (count, shape, kind, group and priority),
    whatever their hints (``expected_duration_s``, ``remaining_work``,
    ``remaining_usage``)."""
    return (
        a.count == b.count
        and a.priority == b.priority
        and a.group == b.group
        and a.kind is b.kind
        and (a.resources is b.resources or a.resources == b.resources)
    )
