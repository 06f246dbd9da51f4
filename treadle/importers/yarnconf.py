"""Which YARN scheduler a configuration file is for, and reading it (``--queues``).

The readers are ``treadle.importers.capacityxml`` and ``treadle.importers.fairxml``; what
they build, and how a tree is put on a workload, is ``treadle.importers.yarnqueues``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from treadle.importers.capacityxml import read_capacity
from treadle.importers.fairxml import read_fair
from treadle.importers.yarnqueues import (
    ImportedQueues,
    QueueConfigError,
    check_leaf_names,
    parse_xml,
    with_root_acl_defaults,
)


def load_queues(path: str | Path, *, strict: bool = False) -> ImportedQueues:
    """Import a ``capacity-scheduler.xml`` or a Fair Scheduler allocation file. With
    ``strict``, a property treadle does not model is an error instead of a warning."""
    source = str(path)
    root = parse_xml(Path(path), source)
    if root.tag == "configuration":
        imported = read_capacity(root, source)
    elif root.tag == "allocations":
        imported = read_fair(root, source)
    else:
        raise QueueConfigError(
            source,
            f"<{root.tag}>",
            "neither a capacity-scheduler.xml (<configuration>) nor a Fair Scheduler "
            "allocation file (<allocations>)",
        )
    check_leaf_names(imported.root, source)
    imported = dataclasses.replace(imported, root=with_root_acl_defaults(imported.root))
    if strict and imported.unmodelled:
        first = imported.unmodelled[0]
        where = f"{first.where}.{first.prop}" if first.where else first.prop
        raise QueueConfigError(source, where, "not modelled by treadle (--strict)")
    return imported
