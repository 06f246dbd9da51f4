"""The books of the RM's usage totals (``rm.core.state``), kept lazily while that is exact.

A container counts in every book of its application (the application's own total, its
user's, its leaf queue's and each ancestor's) from its placement to its end: some eight
accumulator updates per container, the commonest arithmetic of a simulation, for totals
that many policies never read. While every amount that ever entered the books is an int
(the usual vcores and MB), or every one a whole float, each book holds a whole sum, and
these add exactly in any order:
a change is then only counted against its application (its containers of its one shape,
net) and the books are brought up to date when one of them is read (``Book``). They then
hold the very numbers, of the very types, that updating them at once gives (a total
brought to zero is int 0, as the clamp leaves it), so results are the same. The
float-dust clamp of an accumulator's subtraction never touches a whole total below 1e11
(the tolerance stays below one), and no total exceeds the cluster's capacity (a container
is placed only where it fits): a cluster of 1e11 or more in a dimension keeps its books
at once, as does every RM from the first amount that is not a positive whole number of
the type of those before, and one whose policy reads its books after nearly every change
(deferring saves nothing then).
"""

from __future__ import annotations

from typing import Any

from treadle.resources import Accumulator, Resources, _indexed, add_to_all, sub_from_all

#: Totals at or above this may be clamped by an accumulator's tolerance: kept at once.
_EXACT_BELOW = 1e11


def _kind(r: Resources) -> type | None:
    """The type of ``r``'s amounts if every one is a positive whole number of one type
    (int, or float); else None."""
    kinds = set()
    for v in r.values():
        if not (type(v) is int or (type(v) is float and v.is_integer())) or v <= 0:
            return None
        kinds.add(type(v))
    return kinds.pop() if len(kinds) == 1 else None


class BookLedger:
    """Changes counted against their applications, not yet in their books. An
    application (``rm.core.state.Application``) carries ``_book_shape`` (the shape its changes
    are counted in) and ``_book_n`` (its containers of that shape placed less ended)."""

    __slots__ = ("_book", "_books", "_done", "kind", "on", "pending")

    def __init__(self) -> None:
        # This ledger's books: instances of a ``Book`` class of its own (which names the
        # ledger), turned into plain accumulators when deferral stops.
        self._book: type[Book] = type("LedgerBook", (Book,), {"__slots__": (), "_ledger": self})
        self._books: list[Accumulator] = []
        #: Changes are deferred (until a change or cluster that makes it inexact).
        self.on = True
        #: Applications with changes counted (an ordered set).
        self.pending: dict[Any, None] = {}
        #: The type of every amount counted so far (None: none counted yet).
        self.kind: type | None = None
        #: Books in ``_books`` of applications that ended (dropped when half are).
        self._done = 0

    def book(self) -> Accumulator:
        """A new, empty book (a plain accumulator once deferral is off)."""
        if not self.on:
            return Accumulator()
        b = self._book()
        self._books.append(b)
        return b

    def add(self, app: Any, r: Resources) -> None:
        """A container of ``r`` counts in ``app``'s books from now on."""
        if self.on:
            if app._book_shape is r:  # the usual case: another of its shape (``_count``)
                app._book_n += 1
                self.pending[app] = None
                return
            if self._count(app, r, 1):
                return
        add_to_all(app._all_books, r)

    def sub(self, app: Any, r: Resources) -> None:
        """A container of ``r`` no longer counts in ``app``'s books."""
        if self.on:
            if app._book_shape is r:
                app._book_n -= 1
                self.pending[app] = None
                return
            if self._count(app, r, -1):
                return
        sub_from_all(app._all_books, r)

    def _count(self, app: Any, r: Resources, n: int) -> bool:
        if app._book_shape is not r:
            if app._book_n:
                self._apply(app)  # its changes of its former shape
            kind = _kind(r)
            if kind is None or (kind is not self.kind and self.kind is not None):
                self.stop()
                return False
            self.kind = kind
            app._book_shape = r
        app._book_n += n
        self.pending[app] = None
        return True

    def forget(self, app: Any) -> None:
        """``app`` ended (its containers released): its changes go into its books now,
        and neither it nor its own book is kept by the ledger any longer: that book,
        which nothing changes any more, becomes a plain accumulator (up to date, read
        without a flush)."""
        if app in self.pending:
            self._apply(app)
            del self.pending[app]
        own: Accumulator = app._allocated
        ledgers = type(own) is self._book
        if ledgers:
            own.__class__ = Accumulator
            self._done += 1
            if 2 * self._done > len(self._books):
                self._books = [b for b in self._books if type(b) is not Accumulator]
                self._done = 0

    def check_capacity(self, capacity: Resources) -> None:
        """The cluster's capacity grew to ``capacity``: keep the books at once from now
        on if totals may reach where ints are no longer exact."""
        if self.on and any(v >= _EXACT_BELOW for v in capacity.values()):
            self.stop()

    def stop(self) -> None:
        """Bring every book up to date and keep them at once from now on."""
        self.flush()
        self._off()

    def _off(self) -> None:
        self.on = False
        for b in self._books:
            b.__class__ = Accumulator  # reads need no test any more
        self._books.clear()
        self._done = 0

    def flush(self) -> None:
        """Bring every book up to date (before one is read)."""
        pending = self.pending
        few = len(pending) <= 2
        for app in pending:
            self._apply(app)
        pending.clear()
        if few:
            # Read after nearly every change: deferring only adds work.
            self._off()

    @staticmethod
    def _apply(app: Any) -> None:
        n = app._book_n
        app._book_n = 0
        iv = _indexed(app._book_shape) if n else ()
        for acc in app._all_books:
            v = acc._v
            if iv and iv[-1][0] >= len(v):
                v = acc._grow()
            for i, x in iv:
                y = v[i] + n * x
                # A total that an update at once leaves at zero is int 0 (the clamp).
                v[i] = y if y else 0
            acc._snap = None


_value: Any = Accumulator.value.fget  # type: ignore[attr-defined]
_covers = Accumulator.covers


class Book(Accumulator):
    """An accumulator among the books: up to date whenever it is read (``BookLedger.book``
    makes them)."""

    __slots__ = ()
    _ledger: BookLedger  # the ledger's own subclass names it

    @property
    def value(self) -> Resources:
        if self._ledger.pending:
            self._ledger.flush()
        out: Resources = _value(self)
        return out

    def covers(self, r: Resources) -> bool:
        if self._ledger.pending:
            self._ledger.flush()
        return _covers(self, r)

    def add(self, r: Resources) -> None:
        if self._ledger.pending:
            self._ledger.flush()
        Accumulator.add(self, r)

    def sub(self, r: Resources) -> None:
        if self._ledger.pending:
            self._ledger.flush()
        Accumulator.sub(self, r)
