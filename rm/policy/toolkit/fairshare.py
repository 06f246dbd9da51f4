"""Fair-share entitlements, shared by the policies that need them (drf, carbyne, fair).

``progressive_fill`` is weighted DRF progressive filling over demand vectors;
``drf_entitlements`` turns it into each application's entitlement: every entity (a user,
or a job) grows along its own demand vector (used + asked for) at the rate of its weight
in dominant share, until it gets all it asks for or a resource it needs is exhausted; an
entity's entitlement is split among its jobs in submission order (each takes as much of
its own demand as still fits). O(n log n + n x resource kinds).

``water_fill`` splits an amount in proportion to weights, each part capped (YARN's fair
share of a queue's children).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rm.policy.views import AppView, ClusterView
from treadle.resources import Resources, total


def progressive_fill(cap: Resources, demands: list[Resources], weights: list[float]) -> list[float]:
    """Weighted DRF progressive filling: the dominant share each demand vector reaches."""
    n = len(demands)
    dom = [d.dominant_share(cap) for d in demands]
    # Consumption of each resource per unit of dominant share.
    unit = [{k: d[k] / dom[i] for k in cap if d[k]} for i, d in enumerate(demands)]
    fixed = dict.fromkeys(cap, 0.0)  # held by frozen entities
    slope = dict.fromkeys(cap, 0.0)  # growth per unit of the fill level
    users = dict.fromkeys(cap, 0)  # active entities needing each resource
    for i in range(n):
        for k, v in unit[i].items():
            slope[k] += weights[i] * v
            users[k] += 1
    share = [0.0] * n
    done = [False] * n

    def freeze(i: int, s: float) -> None:
        share[i], done[i] = s, True
        for k, v in unit[i].items():
            fixed[k] += s * v
            slope[k] -= weights[i] * v
            users[k] -= 1

    order = sorted(range(n), key=lambda i: dom[i] / weights[i])
    p, active = 0, n
    while active:
        while done[order[p]]:
            p += 1
        i = order[p]
        level, sat = dom[i] / weights[i], ""  # next event: entity i gets all it asks for ...
        for k in cap:  # ... unless a resource runs out first
            if users[k] and slope[k] > 0 and (cap[k] - fixed[k]) / slope[k] < level:
                level, sat = max(0.0, (cap[k] - fixed[k]) / slope[k]), k
        frozen = [j for j in range(n) if not done[j] and sat in unit[j]] if sat else [i]
        for j in frozen:
            freeze(j, min(dom[j], level * weights[j]))
        active -= len(frozen)
    return share


def drf_entitlements(
    cluster: ClusterView,
    entity: Callable[[AppView], str],
    weight: Callable[[str], float],
) -> dict[str, Resources]:
    """Each running application's DRF entitlement (by app id); ``entity`` names the party
    an application belongs to (its user, or itself) and ``weight`` gives a party's weight
    (> 0). Applications without demand (nothing held, nothing asked) get no entry."""
    cap = cluster.capacity
    groups: dict[str, list[tuple[AppView, Resources]]] = {}
    for app in cluster.apps.values():  # submission order
        d = app.allocated + app.demand
        if d.dominant_share(cap) > 0:
            groups.setdefault(entity(app), []).append((app, d))
    names = list(groups)
    demands = [total([d for _, d in groups[n]]) for n in names]
    weights = [weight(n) for n in names]
    out: dict[str, Resources] = {}
    for name, d, s in zip(names, demands, progressive_fill(cap, demands, weights), strict=True):
        rest = d * (s / d.dominant_share(cap))
        if len(groups[name]) == 1:
            out[groups[name][0][0].app_id] = rest
            continue
        for app, want in groups[name]:  # submission order within the entity
            frac = min((rest[k] / want[k] for k in want if cap[k]), default=0.0)
            out[app.app_id] = give = want * max(0.0, min(1.0, frac))
            rest = rest - give
    return out


def water_fill(amount: float, weights: Sequence[float], caps: Sequence[float]) -> list[float]:
    """Split ``amount`` in proportion to ``weights``, none above its cap, excess redistributed."""
    out = [0.0] * len(caps)
    order = sorted((i for i, w in enumerate(weights) if w > 0), key=lambda i: caps[i] / weights[i])
    wsum = sum(weights[i] for i in order)
    for i in order:
        out[i] = min(caps[i], weights[i] * amount / wsum)
        amount, wsum = amount - out[i], wsum - weights[i]
    return out
