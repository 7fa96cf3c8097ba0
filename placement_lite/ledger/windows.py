"""The windows overlapping a period, read as a range bounded on both
sides.

A window [start_at, end_at) overlaps [start, end) when it ends after
`start` and starts before `end`. On the index (end_at, start_at) the
first condition alone is every window ending after `start`: for a week a
month ahead, nearly all of the future. But no window is longer than the
longest one stored (the one row of reservation_longest), so one that
starts before `end` ends before `end + longest`: the read is the index
range `start < end_at < end + longest`, which holds what overlaps and at
most `longest` more, whatever lies beyond.

Exact, because the row is never less than any window stored:

- every write that stores a window (ledger/reservations.py, and anything
  writing the rows directly, as the bench's loader and the tests'
  factories) calls `widen` in its own transaction, so the longer bound
  commits with the window, or neither does;
- the bound is read in the same statement as the windows (a join with
  that row), so one snapshot serves both, on PostgreSQL and MariaDB
  under READ COMMITTED as on SQLite: a window visible to the read comes
  with a bound that covers it, and a transaction's own writes come with
  its own widening;
- it only grows, so a writer that reads it committed at least as long
  as its window need not write it: the bound can only have grown since.
  Only a write that lengthens it writes the row (an UPDATE whose
  condition is checked again on the row as committed, so of two writers
  lengthening it at once the later writes only if longer still). The
  others take no lock on it and add nothing to a Galera write set:
  reservations do not queue on one row. (MariaDB's UPDATE of a locked
  row found by its key waits even where its condition will not hold,
  hence the plain read first.)

Shortening or ending a window leaves the bound as it was: larger than
needed is still exact, only a little wider.
"""
from __future__ import annotations

from typing import Optional

from sqlalchemy import BigInteger, and_, bindparam, select, update
from sqlalchemy.sql import Select

from placement_lite.db import tables as t

_L, _RA = t.reservation_longest, t.reservation_amounts
ROW = 1
_READ = select(_L.c.seconds).where(_L.c.id == ROW)
_WIDEN = (update(_L).where(_L.c.id == ROW, _L.c.seconds < bindparam("seconds"))
          .values(seconds=bindparam("seconds")))


def widen(conn, start: int, end: int, known: Optional[int] = None) -> None:
    """Make the bound cover the window [start, end) about to be stored,
    in the transaction storing it. `known`: the bound as read earlier in
    this transaction, if it was (it can only have grown since); without
    it, one plain read. Writes only when the window is longer."""
    seconds = int(end) - int(start)
    if known is None:
        known = conn.scalar(_READ)
    if known is None or int(known) < seconds:
        conn.execute(_WIDEN, {"seconds": seconds})


def longest_expr():
    """The bound, as a scalar subquery to read with something else."""
    return _READ.scalar_subquery()


def joined(table=_RA, start=None, end=None):
    """The row of the bound joined to the rows of `table`
    (reservation_amounts or reservations) whose window overlaps [start,
    end), bounded by it: a FROM to build on, with `ON_ROW` in the WHERE.
    Bind parameters `w_start` and `w_end` unless given."""
    start = bindparam("w_start", type_=BigInteger) if start is None else start
    end = bindparam("w_end", type_=BigInteger) if end is None else end
    return _L.join(table, and_(
        table.c.end_at > start, table.c.end_at < end + _L.c.seconds,
        table.c.start_at < end))


ON_ROW = _L.c.id == ROW


def overlapping(query: Select, table=_RA, start=None, end=None) -> Select:
    """`query` (a select over `table` alone) narrowed to the rows whose
    window overlaps [start, end), bounded by the longest window."""
    return query.select_from(joined(table, start, end)).where(ON_ROW)
