"""An answer too big to hold, given as it is found.

A full answer can hold a million candidates (with no cap on them, as
Placement has none): held whole, as Candidate values and then as JSON
text, that is gigabytes in a worker for one request. Past
engine.whole_size(plan) candidates, `search` gives a Flow instead: the
candidates found so far, then the rest as the search goes on finding
them, each once, in the order a whole answer would have them. The caller
writes each one out as it comes and keeps none.

What the summaries show depends on every candidate (the providers they
allocate from), and comes after them in the answer: a Flow gathers those
providers' ids as the candidates pass (a set bounded by the world, not
by the answer) and gives the summaries once the candidates are done.

Everything a request can be refused for is decided before a Flow exists
(names resolved, the first candidates found); over the process's copy
of the facts, every `used` is read before the Flow is given, so the rest
of the search reads nothing more from the database.
"""
from __future__ import annotations

from itertools import chain, islice
from typing import Iterator, Optional, Union

from sqlalchemy.engine import Connection

from placement_lite.candidates import engine, summaries
from placement_lite.candidates.kept import KeptCache
from placement_lite.candidates.memory import MemoryReader
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.plan import Candidate
from placement_lite.candidates.query import CandidateRequest
from placement_lite.candidates.snapshot import Snapshot


class Flow:
    """A search's candidates, given once, as they are found; then what
    their summaries show (over the copy: `shown` ids with `used`; from
    SQL: `summaries`), filled by `finish`."""

    def __init__(self, conn: Connection, search: engine.Search, found: list,
                 rest: Iterator, shown=None):
        """`shown`: what the summaries show (answer.Shown; None: all)."""
        self.conn, self.search, self._show = conn, search, shown
        self.class_names = {rc: name for name, rc in search.plan.lookups.rc_ids.items()}
        # Every provider read so far: a candidate's providers are read
        # before it is given.
        self.uuids = search.uuids
        reader = search.reader
        self.snapshot: Optional[Snapshot] = (
            reader.snap if isinstance(reader, MemoryReader) else None)
        self.used = reader.used if self.snapshot is not None else None
        self._found: Optional[list] = found
        self._rest = rest
        self._allocating: set = set()
        self.shown: Optional[list] = None
        self.summaries: Optional[list] = None

    def candidates(self) -> Iterator[Candidate]:
        """Each candidate, in the answer's order; a Flow gives them once."""
        if self._found is None:
            raise RuntimeError("a Flow's candidates are given once")
        found, self._found = self._found, None
        into = self._allocating
        for cand in chain(found, self._rest):
            into.update(engine.allocated_by(cand))
            yield cand

    # The SQL summaries take the search's own maps (summaries.summarize).
    @property
    def roots(self) -> dict:
        return self.search.roots

    @property
    def alone(self) -> set:
        return self.search.alone

    def allocating(self) -> set:
        """The providers the candidates given allocate from."""
        return self._allocating

    def finish(self) -> None:
        """Once every candidate has been given: what the summaries show
        (whole trees from microversion 1.29)."""
        whole_trees = self.search.plan.req.nested_aware
        if self.snapshot is not None:
            self.shown = engine.shown_ids(self.snapshot, self._allocating, whole_trees)
            self.search.reader.read_used(self.shown)
            return
        show = self._show
        self.summaries = summaries.summarize(
            self.conn, self, whole_trees, show.classes if show else None,
            with_traits=show.traits if show else True,
            with_tree=show.tree if show else True, overlay=self.search.overlay)


def search(conn: Connection, req: CandidateRequest, max_candidates: int = 0,
           randomize: bool = False, snapshot: Optional[Snapshot] = None,
           kept: Optional[KeptCache] = None, shown=None,
           overlay: Optional[Overlay] = None) -> Union[engine.Result, Flow]:
    """engine.find's answer, as an engine.Result while it has no more than
    engine.whole_size candidates, else as a Flow (to be read while
    `conn`'s transaction lasts; `shown`: what its summaries show, an
    answer.Shown). A random sample (randomize with `limit`) holds its
    `limit` candidates, not more. `overlay`: extra `used` (overlay.py)."""
    lookups = engine.resolve(conn, req, snapshot)
    if lookups is None:
        return engine.Result([], {}, {})
    bound = engine.bound_of(req, max_candidates, randomize)
    walk = engine.Search(conn, req, lookups, bound, snapshot=snapshot, kept=kept,
                         overlay=overlay)
    engine.over_viable_trees(walk, kept)
    whole = engine.whole_size(walk.plan)
    rest = walk.candidates()
    if bound:
        rest = islice(rest, bound)
    if randomize and req.limit:
        # The search is done: only the sample's text is left to write.
        found = engine.sample(rest, req.limit)
        if len(found) <= whole:
            return walk.result(found)
        return Flow(conn, walk, found, iter(()), shown)
    found = list(islice(rest, whole + 1))
    if len(found) <= whole:
        return walk.result(found)
    if isinstance(walk.reader, MemoryReader):
        walk.reader.read_all_used()
    return Flow(conn, walk, found, rest, shown)
