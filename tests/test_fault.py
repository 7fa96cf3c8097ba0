"""Faults in the middle of a stream of allocation writes: a worker killed
with SIGKILL, and the database vanishing for a second.

Several clients write allocations (two resource classes per consumer) to
one small provider through `serve --workers 2` while one worker is killed
with SIGKILL. Afterwards the database must hold whole transactions only
(every consumer has both of its allocations or none), every write the
service acknowledged, and no provider above its capacity; the supervisor
must have replaced the worker and the service must keep answering. When
the database vanishes instead, no answer may be a 500 and a claim answered
503 "nothing was changed" must indeed not be stored.
"""
from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
import uuid

import pytest
from sqlalchemy import func, select

from placement_lite.app import routes
from placement_lite.db import tables as t
from placement_lite.db.engine import Database
from tests.backends import backend_id, backend_urls, fresh_url, server_url
from tests.servers import children, serve, wait_until
from tests.tcp_proxy import Proxy

VCPU_CAPACITY = 120
PER_CONSUMER = {"VCPU": 1, "MEMORY_MB": 64}
CLIENTS = 6
REQUESTS_PER_CLIENT = 40
VERSION = "placement 1.28"

pytestmark = pytest.mark.skipif(
    "/allocations/{consumer_uuid}" not in {tpl for tpl, _r in routes()},
    reason="PUT /allocations/{consumer_uuid} is not served by this build")


def _call(base, method, path, body=None, timeout=30):
    host, port = base.split("//")[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        headers = {"X-Auth-Token": "admin", "OpenStack-API-Version": VERSION}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None)
    finally:
        conn.close()


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_kill_9_during_allocation_writes_leaves_whole_transactions(backend):
    with fresh_url(backend) as url, serve(url, "--workers", "2", "--threads", "4") as srv:
        base = srv.base
        status, rp = _call(base, "POST", "/resource_providers", {"name": "fault-rp"})
        assert status == 200, rp
        status, body = _call(base, "PUT", f"/resource_providers/{rp['uuid']}/inventories", {
            "resource_provider_generation": rp["generation"],
            "inventories": {"VCPU": {"total": VCPU_CAPACITY},
                            "MEMORY_MB": {"total": 100_000}}})
        assert status == 200, body

        acknowledged, refused, lost = set(), set(), set()
        lock = threading.Lock()
        started = threading.Event()

        def client(n):
            project, user = f"project-{n}", f"user-{n}"
            for _ in range(REQUESTS_PER_CLIENT):
                consumer = str(uuid.uuid4())
                body = {"allocations": {rp["uuid"]: {"resources": PER_CONSUMER}},
                        "project_id": project, "user_id": user,
                        "consumer_generation": None}
                started.set()
                try:
                    status, answer = _call(base, "PUT", f"/allocations/{consumer}", body)
                except (OSError, http.client.HTTPException):
                    # Its worker died under it: outcome unknown to the client.
                    with lock:
                        lost.add(consumer)
                    continue
                assert status < 500, answer
                with lock:
                    (acknowledged if status == 204 else refused).add(consumer)

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for th in threads:
            th.start()
        started.wait(10)
        # Kill while successful writes are still streaming in.
        wait_until(lambda: len(acknowledged) >= 10, timeout=60, interval=0.005)
        with lock:
            at_kill = len(acknowledged)
        victims = children(srv.proc.pid)
        assert len(victims) == 2
        os.kill(victims[0], signal.SIGKILL)
        for th in threads:
            th.join(timeout=120)
        assert not any(th.is_alive() for th in threads)

        # The supervisor replaced the worker and the service answers.
        wait_until(lambda: len(children(srv.proc.pid)) == 2 and
                   victims[0] not in children(srv.proc.pid))
        status, usages = _call(base, "GET", f"/resource_providers/{rp['uuid']}/usages")
        assert status == 200

        db = Database(url)
        try:
            with db.read() as conn:
                classes = dict(conn.execute(select(t.resource_classes.c.name,
                                                   t.resource_classes.c.id)).all())
                rows = conn.execute(
                    select(t.consumers.c.uuid, t.allocations.c.resource_class_id,
                           t.allocations.c.used)
                    .join(t.allocations, t.allocations.c.consumer_id == t.consumers.c.id)
                ).all()
                capacity = {row.resource_class_id: (row.total - row.reserved) *
                            row.allocation_ratio for row in conn.execute(
                                select(t.inventories))}
                used = dict(conn.execute(
                    select(t.allocations.c.resource_class_id, func.sum(t.allocations.c.used))
                    .group_by(t.allocations.c.resource_class_id)).all())
        finally:
            db.dispose()

        expected = {classes[name]: amount for name, amount in PER_CONSUMER.items()}
        per_consumer: dict[str, dict] = {}
        for consumer, rc, amount in rows:
            per_consumer.setdefault(consumer, {})[rc] = amount
        torn = {c: a for c, a in per_consumer.items() if a != expected}
        assert not torn, f"partial transactions in the database: {torn}"
        assert acknowledged <= set(per_consumer), "an acknowledged write was lost"
        assert not (refused & set(per_consumer)), "a refused write was stored"
        assert set(per_consumer) <= acknowledged | lost
        for rc, total in used.items():
            assert total <= capacity[rc], f"class {rc}: {total} used of {capacity[rc]}"
        # The stream was long enough to fill the provider despite the kill.
        assert used[classes["VCPU"]] == VCPU_CAPACITY
        assert usages["usages"]["VCPU"] == VCPU_CAPACITY
        assert refused, "capacity was never reached: the test proved nothing"
        assert at_kill < VCPU_CAPACITY


@pytest.mark.parametrize("server", ["mysql", "postgresql"])
def test_a_database_that_vanishes_during_a_claims_race_is_503s_not_500s(server):
    """The database goes away for a second in the middle of a claims race
    through `serve --workers 2`, as a Galera node the service talks to does
    when it dies (every connection reset, new ones refused), then comes
    back. No answer is a 500; a 503 placement.database_unavailable stored
    nothing; every acknowledged claim is stored and no provider is over
    its capacity; the race still fills every provider exactly."""
    capacity = 60
    with fresh_url(server_url(server)) as url:
        proxy = Proxy(url)
        try:
            with serve(proxy.url, "--workers", "2", "--threads", "4") as srv:
                outcome = _race_through_an_outage(srv.base, proxy, capacity)
        finally:
            proxy.close()
        stored, used = _claims_stored(url)
    assert not outcome["bad"], outcome["bad"][:5]
    assert outcome["unavailable"], "no claim met the outage: the test proved nothing"
    assert not (outcome["unavailable"] & set(stored)), "a 503 claim was stored"
    assert outcome["acknowledged"] <= set(stored), "an acknowledged claim was lost"
    assert set(stored) <= outcome["acknowledged"] | outcome["unknown"]
    assert all(amount == 1 for amount in stored.values())
    assert used == {rp: capacity for rp in outcome["providers"]}


def _race_through_an_outage(base, proxy, capacity, clients=6):
    providers = []
    for n in range(2):
        status, rp = _call(base, "POST", "/resource_providers", {"name": f"outage-{n}"})
        assert status == 200, rp
        status, body = _call(base, "PUT", f"/resource_providers/{rp['uuid']}/inventories", {
            "resource_provider_generation": rp["generation"],
            "inventories": {"VCPU": {"total": capacity}}})
        assert status == 200, body
        providers.append(rp["uuid"])
    out = {"acknowledged": set(), "unavailable": set(), "unknown": set(), "bad": [],
           "providers": providers}
    lock = threading.Lock()

    def client(n):
        full = set()
        while len(full) < len(providers):
            rp = providers[n % 2] if providers[n % 2] not in full else \
                next(p for p in providers if p not in full)
            consumer = str(uuid.uuid4())
            status, answer = _call(base, "PUT", f"/allocations/{consumer}", {
                "allocations": {rp: {"resources": {"VCPU": 1}}},
                "project_id": f"project-{n}", "user_id": "u", "consumer_generation": None})
            code = (answer or {}).get("errors", [{}])[0].get("code") if answer else None
            with lock:
                if status == 204:
                    out["acknowledged"].add(consumer)
                elif status == 409 and "capacity" in json.dumps(answer):
                    full.add(rp)
                elif status == 503 and code == "placement.database_unavailable":
                    out["unavailable"].add(consumer)
                elif status == 503 and code == "placement.outcome_unknown":
                    out["unknown"].add(consumer)
                else:
                    out["bad"].append((status, answer))
                    return
            if status == 503:
                time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for th in threads:
        th.start()
    wait_until(lambda: len(out["acknowledged"]) >= 20, timeout=60, interval=0.005)
    proxy.cut()
    time.sleep(1.0)
    proxy.restore()
    for th in threads:
        th.join(timeout=180)
    assert not any(th.is_alive() for th in threads)
    return out


def _claims_stored(url):
    """({consumer uuid: VCPU it holds}, {provider uuid: VCPU used})."""
    db = Database(url)
    try:
        with db.read() as conn:
            stored = dict(conn.execute(
                select(t.consumers.c.uuid, func.sum(t.allocations.c.used))
                .join(t.allocations, t.allocations.c.consumer_id == t.consumers.c.id)
                .group_by(t.consumers.c.uuid)).all())
            used = dict(conn.execute(
                select(t.resource_providers.c.uuid, func.sum(t.allocations.c.used))
                .join(t.allocations,
                      t.allocations.c.resource_provider_id == t.resource_providers.c.id)
                .group_by(t.resource_providers.c.uuid)).all())
    finally:
        db.dispose()
    return stored, used
