"""Property-based fuzzing of every documented route against a live server.

Beside tests/test_schemathesis.py (which checks that the document and the
service agree on well-formed requests), this throws hostile ones
(tests/fuzzing.py) at a real `placement-lite serve` on SQLite, and on
MariaDB and PostgreSQL when PLACEMENT_LITE_TEST_DB_URLS names them, and
asserts after every request:
- no 5xx, and every error in the documented format (API-WG `errors`; on
  /v3 Keystone's `error` is accepted too), with a body that is strict JSON;
- a refused write (4xx) changed nothing at all in the database;
- a granted write raised no provider's usage past its capacity
  `(total - reserved) * allocation_ratio` (an inventory may shrink below
  what is already allocated, as in Placement; a claim may not grow past it);
and at the end that nothing half-written is stored.

Two tests per backend: a sweep that makes every field of every route's
body hostile in turn (deterministic coverage), and a random campaign
mixing operations, parameters, spellings and hostile values. The campaign
is bounded by default (PLACEMENT_LITE_FUZZ_EXAMPLES requests per backend,
300 unless set) so CI stays quick; set it higher for a long campaign.
Every failure is reported with a curl command that repeats it.
"""
from __future__ import annotations

import os
import time

import pytest

from tests import fuzzing
from tests.backends import backend_id, backend_urls, fresh_url
from tests.servers import serve

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("PLACEMENT_LITE_FUZZ_EXAMPLES", "300"))
# A hard stop per backend, however many examples were asked for, unless a
# long campaign sets its own.
TIME_BUDGET = float(os.environ.get("PLACEMENT_LITE_FUZZ_SECONDS",
                                   "90" if EXAMPLES <= 400 else "36000"))
HOSTILITY = 0.2
WRITES = {"PUT", "POST", "PATCH", "DELETE"}
MAX_REPORTED = 40


def _operations(base: str) -> list:
    status, doc = fuzzing.api(base, "GET", "/openapi.json")
    assert status == 200
    ops = []
    for path, item in sorted(doc["paths"].items()):
        for method, op in sorted(item.items()):
            if path == "/metrics":
                continue
            # Writes are where a wrong answer costs: draw them thrice as often.
            ops += [(path, method.upper(), op)] * (1 if method == "get" else 3)
    return ops


class Run:
    """One live server and its database: sends requests, checks each."""

    def __init__(self, srv, url: str):
        self.srv = srv
        self.ledger = fuzzing.Ledger(url)
        self.failures: list[str] = []
        self.statuses: dict[int, int] = {}

    @property
    def requests(self) -> int:
        return sum(self.statuses.values())

    def exercise(self, sent: fuzzing.Sent) -> None:
        write = sent.method in WRITES
        if write:
            digest = self.ledger.digest()
            before = self.ledger.usage_and_capacity()
        started = time.monotonic()
        status, headers, raw = fuzzing.send(self.srv.base, sent)
        took = time.monotonic() - started
        self.statuses[status] = self.statuses.get(status, 0) + 1
        problems = fuzzing.check_response(sent, status, headers, raw)
        if took > fuzzing.SLOW_SECONDS:
            problems.append(f"{status} after {took:.1f} s")
        if write and status >= 400 and self.ledger.digest() != digest:
            problems.append(f"a refused write ({status}) changed the database")
        if write and status < 400:
            problems += fuzzing.capacity_problems(before, self.ledger.usage_and_capacity())
        for problem in problems:
            self.failures.append(f"{problem}\n  {sent.curl(self.srv.base)}")

    def finish(self, backend: str, what: str) -> None:
        try:
            self.failures += [f"after the run: {p}"
                              for p in self.ledger.structure_problems()]
        finally:
            self.ledger.close()
        print(f"{what} on {backend_id(backend)}: {self.requests} requests, "
              f"statuses {dict(sorted(self.statuses.items()))}")
        assert not self.failures, (f"{len(self.failures)} problems:\n"
                                   + "\n".join(self.failures[:MAX_REPORTED]))
        assert "Traceback" not in self.srv.output, self.srv.output[-4000:]


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_every_field_of_every_route_refuses_hostile_values(backend):
    with fresh_url(backend) as url, serve(url, "--threads", "2") as srv:
        world = fuzzing.seed(srv.base)
        operations = sorted({(p, m): (p, m, op) for p, m, op in
                             _operations(srv.base)}.values(), key=lambda o: o[:2])
        run = Run(srv, url)

        for sent in fuzzing.sweep_requests(srv.base, world, operations):
            run.exercise(sent)
        assert run.requests > 300, run.statuses
        # The plausible bodies really are: most hostile ones were refused
        # only for their one hostile field.
        assert sum(n for s, n in run.statuses.items() if s < 300) >= 20, run.statuses
        run.finish(backend, "sweep")


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_hostile_requests_find_no_server_error_and_keep_the_ledger(backend):
    with fresh_url(backend) as url, serve(url, "--threads", "2") as srv:
        world = fuzzing.seed(srv.base)
        operations = _operations(srv.base)
        run = Run(srv, url)
        deadline = time.monotonic() + TIME_BUDGET

        @settings(max_examples=EXAMPLES, deadline=None, database=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        @given(data=st.data())
        def campaign(data):
            if time.monotonic() > deadline or len(run.failures) > MAX_REPORTED:
                return
            run.exercise(fuzzing.draw_request(data, world, operations, HOSTILITY))

        campaign()
        assert run.requests >= min(EXAMPLES, 100), run.statuses
        run.finish(backend, "campaign")
