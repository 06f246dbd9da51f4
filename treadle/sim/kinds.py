"""The kinds of the simulator's heap events (``treadle.sim.engine``), in the order they
run when they fall at the same instant; each is also the index of its handler in
``treadle.sim.handlers.EventHandlers.table``.

A container ends exactly ``duration`` after the AM call that launched it, so the AM's call
at that same instant runs first: a real launch takes a moment, and the AM learns of the
end on its next call, as on a live cluster.
"""

SUBMIT, AM, TICK, HB, WAKE = 0, 1, 2, 3, 4
#: Event-driven scheduling only (``treadle.sim.eventmode``): an AM called back at once,
#: and the RM's placement pass; both after everything else of their instant.
NEWS, PLACE = 5, 6
#: An admin's account change runs before anything else at its instant: a tick then sees
#: it. As an index of the handler table, -1 is its last entry.
ADMIN = -1
#: How many kinds there are (the length of the handler table).
KINDS = 8
