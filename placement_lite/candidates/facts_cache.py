"""One process's current copy of the providers' facts, kept current.

`FactsCache.current(conn)` reads the facts log's heads first, in the
request's own read transaction; when they moved it reads again the
providers logged since (or everything, when the log cannot tell) and
only then answers (candidates/snapshot.py builds the copies). Now and
then it also checks the copy against the database (selfcheck.py) and
reads everything again when they differ.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Optional

from sqlalchemy.engine import Connection

from placement_lite.candidates import selfcheck
from placement_lite.candidates.ahead import AheadOverlays
from placement_lite.candidates.kept import KeptCache
from placement_lite.candidates.snapshot import Snapshot, load, refresh
from placement_lite.db import facts_log

LOG = logging.getLogger(__name__)
# Seconds between checks of a process's copy against the database.
CHECK_EVERY = 60.0
# Seconds a request may wait for the lock while another refreshes the
# copy; a log behind the copy for longer than that went back.
BEHIND_AT_MOST = 30.0


class FactsCache:
    """One process's current Snapshot, for every thread of it; checked
    against the database every `check_every` seconds (0: never) by
    keep_checking (candidates/selfcheck.py)."""

    def __init__(self, check_every: float = CHECK_EVERY):
        self._snapshot: Optional[Snapshot] = None
        self._lock = threading.Lock()
        self.check_every = check_every
        self._checking = threading.Lock()
        # Self-checks by outcome: same, different, or inconclusive (a
        # write landed during the check).
        self.checks = {"same": 0, "different": 0, "inconclusive": 0}
        # What requests derive from the copy per request shape; advanced
        # to each copy before it is published.
        self.kept = KeptCache()
        # The last overlay of what is reserved ahead made from a copy
        # (candidates/ahead.py): plain candidates leave room for it.
        self.ahead = AheadOverlays()
        self.loads = 0  # full reads, for tests and metrics
        self.refreshes = 0

    def latest(self) -> Optional[Snapshot]:
        """The copy as last read, without asking whether it is current."""
        return self._snapshot

    def current(self, conn: Connection) -> Snapshot:
        """The facts as of now, read in `conn`'s transaction."""
        heads = facts_log.heads(conn)
        snap = self._snapshot
        if snap is not None and snap.heads == heads:
            return snap
        with self._lock:
            snap = self._snapshot
            if snap is not None and _covers(snap.heads, heads):
                if snap.heads == heads or time.monotonic() - snap.built < BEHIND_AT_MOST:
                    # As new as this transaction's view, or newer: built
                    # by a request whose transaction began later, while
                    # this one waited for the lock.
                    return snap
                # The database's log is behind this copy for longer than
                # any request waits: it went back (a backup restored in
                # place). Nothing it logs can be trusted against the copy.
                LOG.warning("the facts log is behind this process's copy "
                            "(database restored?): reading all facts again")
                snap = None
            changed = None if snap is None else facts_log.changes(conn, snap.heads, heads)
            if changed is None:
                built = load(conn, heads)
                self.loads += 1
            else:
                built = refresh(conn, snap, heads, changed)
                self.refreshes += 1
            self.kept.advance(built)
            self._snapshot = built
            return built


    def check(self, conn: Connection) -> Optional[list]:
        """Compare the current copy with the database now (a sample of
        it; see selfcheck.py); a copy found different is replaced by a
        whole read before anything else reads it. The differences found
        ([]: none), or None when the check could not tell."""
        snap = self.current(conn)
        with self._checking:
            return self._check(conn, snap)[0]

    def keep_checking(self, db) -> None:
        """Check the copy every `check_every` seconds for as long as the
        process lives (0: never), each in a read transaction of its own:
        a serving process's facts thread runs this, so no request waits
        for a check."""
        while self.check_every > 0:
            time.sleep(self.check_every)
            try:
                with db.read() as conn:
                    self.check(conn)
            except Exception:  # noqa: BLE001 - the next check tries again
                LOG.warning("could not check this process's copy of the "
                            "providers' facts against the database", exc_info=True)

    def _check(self, conn: Connection, snap: Snapshot) -> tuple:
        found = selfcheck.differences(conn, snap)
        if found is None:
            self.checks["inconclusive"] += 1
            return None, snap
        if not found:
            self.checks["same"] += 1
            return found, snap
        self.checks["different"] += 1
        LOG.error("this process's copy of the providers' facts differs from the "
                  "database (%d difference%s; first: %s): reading all facts again",
                  len(found), "" if len(found) == 1 else "s", found[0])
        with self._lock:
            if self._snapshot is snap:
                # Heads are the copy's in this transaction: a whole read
                # now is what the copy should have held.
                built = load(conn, snap.heads)
                self.loads += 1
                self.kept.advance(built)
                self._snapshot = built
            return found, self._snapshot


def _covers(have: tuple, wanted: tuple) -> bool:
    """A copy built at heads `have` holds every change up to `wanted`."""
    return (len(have) == len(wanted) and have[:1] == wanted[:1] and all(
        h.serial >= w.serial and h.floor >= w.floor
        for h, w in zip(have[1:], wanted[1:])))
