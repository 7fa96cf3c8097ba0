"""A claims race over HTTP, for any running server.

`request(method, path, body=None, version=...)` -> (status, headers, body)
is the server's client (tests.servers.Served, the uwsgi wrapper...). The
race: providers with VCPU inventories of the given totals, then claimers
in two projects that each take one VCPU at a time on a random provider
until every provider has answered them "no capacity".
"""
from __future__ import annotations

import random
import threading
import uuid
from dataclasses import dataclass, field


@dataclass
class ClaimRace:
    statuses: list = field(default_factory=list)
    granted: dict = field(default_factory=lambda: {"p0": 0, "p1": 0})


def make_vcpu_providers(request, capacities: dict, version: str) -> None:
    """One provider per uuid in `capacities`, with that many VCPUs."""
    for n, (rp, total) in enumerate(capacities.items()):
        status, _h, body = request("POST", "/resource_providers", {
            "name": f"host-{n}", "uuid": rp}, version=version)
        assert status == 200, body
        status, _h, body = request(
            "PUT", f"/resource_providers/{rp}/inventories",
            {"resource_provider_generation": 0,
             "inventories": {"VCPU": {"total": total}}}, version=version)
        assert status == 200, body


def claim_until_full(request, capacities: dict, version: str,
                     claimers: int = 8) -> ClaimRace:
    """Race `claimers` threads (alternating projects p0 and p1) until each
    has seen every provider full, or got an answer other than 204/409."""
    race = ClaimRace()
    lock = threading.Lock()

    def claimer(project):
        full: set[str] = set()
        rng = random.Random()
        while len(full) < len(capacities):
            rp = rng.choice([u for u in capacities if u not in full])
            status, _h, body = request(
                "PUT", f"/allocations/{uuid.uuid4()}",
                {"allocations": {rp: {"resources": {"VCPU": 1}}},
                 "project_id": project, "user_id": "u",
                 "consumer_generation": None, "consumer_type": "INSTANCE"},
                version=version)
            with lock:
                race.statuses.append(status)
                if status == 204:
                    race.granted[project] += 1
            if status == 409 and "capacity" in str(body):
                full.add(rp)
            elif status not in (204, 409):
                return

    threads = [threading.Thread(target=claimer, args=(f"p{i % 2}",))
               for i in range(claimers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return race


def assert_granted_exactly_capacity(request, capacities: dict,
                                    race: ClaimRace, version: str) -> None:
    """Every VCPU was granted once: the grants add up to the capacity, and
    the provider and project usages say the same."""
    assert sum(race.granted.values()) == sum(capacities.values())
    for rp, total in capacities.items():
        _s, _h, body = request("GET", f"/resource_providers/{rp}/usages",
                               version=version)
        assert body["usages"]["VCPU"] == total
    for project, count in race.granted.items():
        _s, _h, body = request("GET", f"/usages?project_id={project}",
                               version="1.9")
        assert body["usages"] == ({"VCPU": count} if count else {})


@dataclass
class ReserveRace:
    statuses: list = field(default_factory=list)
    granted: dict = field(default_factory=lambda: {"claim": 0, "reserve": 0})


# One window every reserver wants, far enough ahead to stay pending.
WINDOW = ("2098-01-01T00:00:00Z", "2098-01-02T00:00:00Z")


def _take_one(request, kind: str, rp: str, version: str):
    if kind == "claim":
        return request("PUT", f"/allocations/{uuid.uuid4()}", {
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": "claims", "user_id": "u",
            "consumer_generation": None, "consumer_type": "INSTANCE"},
            version=version)
    return request("POST", "/reservations", {
        "project_id": "reservations", "user_id": "u",
        "start": WINDOW[0], "end": WINDOW[1],
        "allocations": {rp: {"resources": {"VCPU": 1}}}}, version=version)


def reserve_and_claim_until_full(request, capacities: dict, version: str,
                                 workers: int = 8) -> ReserveRace:
    """Race `workers` threads, alternately claiming one VCPU and reserving
    one over WINDOW, until each has seen every provider full (a 409 that
    names no room) or got an answer other than 201/204/409."""
    race = ReserveRace()
    lock = threading.Lock()

    def worker(kind):
        full: set[str] = set()
        rng = random.Random()
        while len(full) < len(capacities):
            rp = rng.choice([u for u in capacities if u not in full])
            status, _h, body = _take_one(request, kind, rp, version)
            with lock:
                race.statuses.append(status)
                if status in (201, 204):
                    race.granted[kind] += 1
            if status == 409 and ("capacity" in str(body)
                                  or "reservation.no_room" in str(body)):
                full.add(rp)
            elif status not in (201, 204, 409):
                return

    threads = [threading.Thread(target=worker, args=(("claim", "reserve")[i % 2],))
               for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return race
