"""Room taken besides allocations, for one request: extra `used` per
(provider, class).

Asked for room throughout a window, a provider's free room for a class
is its capacity less what is allocated less the most that reservations
hold there at any instant of the window. That last term is an Overlay,
made once per request and read wherever a reader reads `used`:

- the reader over the process's copy of the facts (memory.py) adds it to
  the `used` it reads, so its filters, the combiner, the trees' kept
  parts (keyed by the usage they were made from) and the summaries all
  see allocated plus extra;
- the SQL reader (reader.py) lets its statements, which know only
  what is allocated, choose as always, then checks again, against
  allocated plus extra, the few providers the overlay names, and adds
  the extra to the rooms the combiner merges; summaries.py shows it in
  `used`.

An extra is below 0 where allocations drawn from a reservation (in
`used`) end before the instants asked about (ledger/reserved.py,
ahead.py): they give their room back. The SQL reader's statements have
refused such a provider already, so a search without the copy
(engine.Search) and the summaries read from SQL (summaries.py) take
`taking()`, the extras above 0 alone, and stay on the safe side there;
the copy's reader takes the room back.

The request language and every filter are untouched. An Overlay belongs
to its request: nothing keeps it, and it is never written into the copy
of the facts or anything derived from it that other requests read.
"""
from __future__ import annotations

from typing import Container, Iterable, Mapping, Optional

from sqlalchemy.engine import Connection

from placement_lite.ledger import reserved


class Overlay:
    """(provider id, class id) -> extra `used`; never changed once made."""

    __slots__ = ("extra", "by_provider")

    def __init__(self, extra: Mapping[tuple, int]):
        self.extra = {key: n for key, n in extra.items() if n}
        by_provider: dict = {}
        for (rp, rc), n in self.extra.items():
            by_provider.setdefault(rp, []).append((rc, n))
        # provider id -> ((class id, extra), ...)
        self.by_provider = {rp: tuple(rows) for rp, rows in by_provider.items()}

    @classmethod
    def made(cls, extra: dict, by_provider: dict) -> "Overlay":
        """From both mappings as the constructor would make them (no key
        with 0 in `extra`; `by_provider` grouping exactly its keys),
        without walking them: what carries an overlay over from the last
        one costs what changed (ahead.py)."""
        found = cls.__new__(cls)
        found.extra, found.by_provider = extra, by_provider
        return found

    def __bool__(self) -> bool:
        return bool(self.extra)

    def taking(self) -> Optional["Overlay"]:
        """The extras that take room (above 0), for the SQL reader; None
        when there are none."""
        if all(n > 0 for n in self.extra.values()):
            return self
        found = Overlay({key: n for key, n in self.extra.items() if n > 0})
        return found if found else None

    def get(self, key: tuple, default: int = 0) -> int:
        return self.extra.get(key, default)

    def add(self, used: dict, ids: Optional[Iterable[int]] = None,
            skip: Container = frozenset()) -> None:
        """Add the extra of providers `ids` (None: every provider named,
        but those in `skip`) into `used` ((provider, class) -> used,
        absent meaning 0)."""
        by_provider = self.by_provider
        if ids is None:
            rps = [rp for rp in by_provider if rp not in skip]
        else:
            ids = ids if isinstance(ids, (set, frozenset)) else set(ids)
            rps = ([rp for rp in by_provider if rp in ids]
                   if len(ids) > len(by_provider) else [rp for rp in ids if rp in by_provider])
        get = used.get
        for rp in rps:
            for rc, n in by_provider[rp]:
                key = (rp, rc)
                used[key] = get(key, 0) + n


def window(conn: Connection, start: int, end: int) -> Optional[Overlay]:
    """The overlay of what reservations hold over [start, end), or None
    where they hold nothing there (the request is then a plain one, and
    shares everything plain ones keep)."""
    # Less what is drawn from reservations: that is in `used` already.
    found = Overlay(reserved.peaks(conn, start, end, less_drawn=True))
    return found if found else None
