"""Is a timed candidates answer the whole answer?

A latency is only worth reporting for a complete answer: a server whose
copy of the facts lost providers answers fast and wrong. So every
`GET /allocation_candidates` the benchmark times is counted, and the
count must be what the database holds, up to the answer's bound:
min(limit, or max_allocation_candidates when no limit is given, count).

The expected count comes from outside the server under test:
- a reference server (bench/serving.py's `Reference`): a second
  `placement-lite serve` over the same database with
  PLACEMENT_LITE_FACTS_IN_MEMORY=false, so it reads every fact from the
  database, asked the same query (same bound) once before the timed
  requests and once after them: a world that moved meanwhile makes the
  check impossible, and the run stops;
- the world's definition, where it is exact (bench/grow.py): `bounded`.

A wrong count raises `Incomplete`; `python -m bench` prints its message
and exits non-zero, so a figure timed over a wrong answer is never
reported.
"""
from __future__ import annotations

from typing import Optional

# The server's default max_allocation_candidates (placement_lite/config.py),
# which the matrix's servers run with.
DEFAULT_CAP = 1000
_KEY = b'"allocations"'


class Incomplete(RuntimeError):
    """A timed answer held another number of candidates than the database."""


def candidates_in(raw: bytes) -> int:
    """The allocation requests in a candidates answer, counted in its bytes
    without parsing them (throughput clients share the cores with the
    server, and parsing each answer would take CPU from it).

    Only an allocation request has an "allocations" key: a provider
    summary is keyed by its uuid and holds "resources", "traits" and its
    parent's and root's uuids, and a request group's key in "mappings" is
    its suffix, which starts with an underscore (or is empty).
    """
    return raw.count(_KEY)


def bounded(count: int, limit: Optional[int] = None,
            cap: Optional[int] = DEFAULT_CAP) -> int:
    """What a complete answer holds when the database has `count`
    candidates: at most `limit`, or `cap` (max_allocation_candidates;
    None or negative: no bound) when no limit is given."""
    bound = limit if limit else (cap if cap is not None and cap >= 0 else None)
    return count if bound is None else min(bound, count)


def message(workload: str, expected: int, got: int, where: str = "",
            source: str = "") -> str:
    """The failure's one line: the workload, then expected against got."""
    return (f"INCOMPLETE ANSWER: {workload}{where}: expected {expected} "
            f"candidates{(' (' + source + ')') if source else ''}, got {got}")


def check(workload: str, expected: int, got: int, where: str = "",
          source: str = "") -> None:
    if got != expected:
        raise Incomplete(message(workload, expected, got, where, source))


class Expected:
    """The count every timed answer to `path` must hold, as the reference
    server answers it just before the timed requests; `settle()` asks it
    again after them (the world must not have moved in between, or the
    check says nothing). `reference.count(path)`: the candidates the
    database holds, up to the bound (bench/serving.py's Reference).
    `define`: the count the world's definition gives, where it is exact;
    the reference must agree with it."""

    def __init__(self, workload: str, reference, path: str,
                 define: Optional[int] = None):
        self.workload, self.reference, self.path = workload, reference, path
        self.count = reference.count(path)
        # A reference may say where its count comes from (another
        # database holding the same world, for OpenStack Placement's side).
        self.source = getattr(reference, "source",
                              "what the database holds, from the reference server")
        if define is not None and define != self.count:
            raise Incomplete(
                f"INCOMPLETE ANSWER: {workload}: the world's definition gives "
                f"{define} candidates, {self.source} is {self.count}: GET {path}")
        if define is not None:
            self.source += " and the world's definition"
        self.checked = 0

    def check(self, raw: bytes, where: str = "") -> None:
        got = candidates_in(raw)
        self.tally(1, int(got != self.count), got, where)

    def tally(self, answers: int, wrong: int, example: Optional[int],
              where: str = "") -> None:
        """`answers` checked elsewhere (throughput clients), `wrong` of
        them with another count, `example` one such count."""
        if wrong:
            extra = f" ({wrong} of {answers} answers wrong)" if answers > 1 else ""
            raise Incomplete(message(self.workload, self.count, example,
                                     where + extra, self.source)
                             + f"; GET {self.path}")
        self.checked += answers

    def settle(self) -> None:
        now = self.reference.count(self.path)
        if now != self.count:
            raise RuntimeError(
                f"{self.workload}: the database's answer moved during the timed "
                f"requests ({self.count} -> {now} candidates), so their "
                f"completeness cannot be checked: GET {self.path}")
