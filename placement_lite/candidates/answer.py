"""GET /allocation_candidates' one call into the candidate engine.

The API parses a request, calls `answer` once, and renders what comes
back; nothing here calls back up. Three shapes of plain values come back:

- Parts (by_tree.py): over the process's copy of the facts, with no
  sharing provider, the answer as each tree's kept part;
- Result (engine.py): a search's candidates, with what the summaries
  show filled in: Summary values read from SQL, or over the copy the ids
  of the providers shown and the `used` read for them;
- Flow (flow.py): an answer too big to hold, its candidates given as they
  are found, and what the summaries show once they are done.
Parts and Result hold at most engine.whole_size candidates.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from sqlalchemy.engine import Connection

from placement_lite.candidates import by_tree, engine, flow, summaries
from placement_lite.candidates.kept import KeptCache
from placement_lite.candidates.overlay import Overlay
from placement_lite.candidates.query import CandidateRequest
from placement_lite.candidates.snapshot import Snapshot


@dataclass(frozen=True)
class Shown:
    """What the caller will show of an answer, where it changes what is read."""
    classes: Optional[frozenset] = None  # classes summaries show (None: all)
    traits: bool = True  # summaries show traits
    tree: bool = True  # summaries show parent and root
    # The answer may come as trees' parts (the caller renders them).
    by_tree: bool = True


def answer(conn: Connection, req: CandidateRequest, shown: Shown = Shown(),
           max_candidates: int = 0, randomize: bool = False,
           snapshot: Optional[Snapshot] = None,
           kept: Optional[KeptCache] = None, overlay: Optional[Overlay] = None
           ) -> Union[by_tree.Parts, engine.Result, flow.Flow]:
    """The candidates for a parsed request and what their summaries show,
    bounded by `limit` and max_candidates (<= 0: unbounded), a random
    sample when randomize. `snapshot`: the process's copy of the facts,
    read in `conn`'s transaction (None: everything from SQL); `kept`:
    what the process keeps derived from its copies. An answer of more
    than engine.whole_size candidates comes as a flow.Flow, to be read
    while `conn`'s transaction lasts, then finished. `overlay`: extra
    `used` per (provider, class) for this request alone (overlay.py)."""
    if snapshot is not None and shown.by_tree and not (randomize and req.limit):
        parts = by_tree.tree_parts(
            conn, req, snapshot, engine.bound_of(req, max_candidates, randomize), kept,
            overlay)
        if parts is not None:
            return parts
    result = flow.search(conn, req, max_candidates, randomize, snapshot, kept, shown,
                         overlay)
    if isinstance(result, flow.Flow):
        return result
    if result.snapshot is not None:
        result.shown = result.summary_ids(req.nested_aware)
    else:
        result.summaries = summaries.summarize(
            conn, result, req.nested_aware, shown.classes,
            with_traits=shown.traits, with_tree=shown.tree, overlay=overlay)
    return result
