"""Queue ACLs, as YARN reads and applies them: who may submit to a queue, who administers it.

An ACL is YARN's ``AccessControlList`` string: users, then a space, then groups, each a
comma-separated list (``"alice,bob eng,ops"``); ``*`` (alone, either part) is everyone;
a single space, or an empty string, is nobody; a string without a space names users
only. A user's groups are those the ``users:`` mapping of the workload or RM
configuration gives it (``groups: [eng]``; Hadoop's static group mapping), none if it has
no entry.

A queue has two: ``submit_acl`` (``acl_submit_applications`` / ``aclSubmitApps``) and
``admin_acl`` (``acl_administer_queue`` / ``aclAdministerApps``). As in YARN
(``AbstractCSQueue.hasAccess``, the Fair Scheduler's ``AllocationConfiguration.hasAccess``):

- an ACL is inherited down the tree: a user named at a queue or at any of its ancestors
  has that access there;
- administering implies submitting: a submission is refused only when neither ACL up the
  path names its user (``RMAppManager``); an administrator may also read and kill the
  other users' applications of the queue;
- a queue that does not set an ACL names nobody; the root of a YARN file that does not
  set one names everyone (``CapacitySchedulerConfiguration.getAcl``: the root's default
  is ``*``, every other queue's ``" "``), which the importers write into the tree. So a
  leaf's ACL restricts nobody until the root's two ACLs are narrowed. A workload's or RM
  configuration's tree has no root entry: its root sets none, so names nobody, and the
  queues' own ACLs decide.
- a tree in which no queue sets an ACL has none in force (YARN with ``yarn.acl.enable``
  false): everyone may submit anywhere, as before ACLs existed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from treadle.model import QueueSpec, UserSpec

EVERYONE = "*"
NOBODY = " "


@dataclass(frozen=True)
class Acl:
    """A parsed ACL: ``everyone``, or the users and groups it names."""

    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    everyone: bool = False

    @classmethod
    def parse(cls, text: str) -> Acl:
        """``AccessControlList(text)``: split at the first space into users and groups."""
        parts = text.split(" ", 1)
        if any(p.strip() == EVERYONE for p in parts):
            return cls(everyone=True)
        users = _names(parts[0])
        groups = _names(parts[1]) if len(parts) == 2 else frozenset()
        return cls(users, groups)

    def admits(self, user: str, groups: Iterable[str] = ()) -> bool:
        return self.everyone or user in self.users or not self.groups.isdisjoint(groups)


def _names(part: str) -> frozenset[str]:
    return frozenset(n.strip() for n in part.split(",") if n.strip())


def acls_given(root: QueueSpec) -> bool:
    """Whether any queue of the tree sets an ACL (if none does, none is in force)."""
    return any(q.submit_acl is not None or q.admin_acl is not None for q in root.walk())


def user_groups(users: Mapping[str, UserSpec]) -> dict[str, tuple[str, ...]]:
    """Each user's groups, from the ``users`` mapping."""
    return {name: u.groups for name, u in users.items() if u.groups}


_NONE = Acl()


class QueueAcls:
    """Who may submit to and administer each queue of a tree (queues by name)."""

    def __init__(self, root: QueueSpec, groups: Mapping[str, Sequence[str]]) -> None:
        #: False: the tree sets no ACL, and everyone may do everything.
        self.enabled = acls_given(root)
        self._groups = {u: tuple(g) for u, g in groups.items()}
        #: queue name -> (submit, administer) of each queue from the root down to it.
        self._chains: dict[str, tuple[tuple[Acl, Acl], ...]] = {}
        self._paths: dict[str, str] = {}
        if self.enabled:
            self._index(root, (), "")

    def _index(self, q: QueueSpec, above: tuple[tuple[Acl, Acl], ...], path: str) -> None:
        pair = (_parsed(q.submit_acl), _parsed(q.admin_acl))
        chain = (*above, pair)
        path = f"{path}.{q.name}" if path else q.name
        self._chains[q.name] = chain
        self._paths[q.name] = path
        for c in q.children:
            self._index(c, chain, path)

    def groups_of(self, user: str) -> tuple[str, ...]:
        return self._groups.get(user, ())

    def may_administer(self, user: str, queue: str) -> bool:
        """Whether ``user`` administers ``queue`` (an ``admin_acl`` up its path names it)."""
        if not self.enabled:
            return True
        groups = self.groups_of(user)
        return any(admin.admits(user, groups) for _, admin in self._chains.get(queue, ()))

    def may_submit(self, user: str, queue: str) -> bool:
        """Whether ``user`` may submit to ``queue``: either ACL up its path names it."""
        if not self.enabled:
            return True
        groups = self.groups_of(user)
        return any(
            s.admits(user, groups) or a.admits(user, groups) for s, a in self._chains.get(queue, ())
        )

    def submit_refusal(self, user: str, queue: str) -> str | None:
        """Why ``user`` may not submit to ``queue`` (one line); None if it may."""
        if self.may_submit(user, queue):
            return None
        path = self._paths.get(queue, queue)
        return (
            f"user {user!r} may not submit to queue {path!r}: neither acl_submit_applications "
            f"nor acl_administer_queue of {path} or a parent names the user or its groups"
        )


def _parsed(text: str | None) -> Acl:
    return _NONE if text is None else Acl.parse(text)
