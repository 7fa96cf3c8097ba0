"""What the quota records refuse, on every configured backend: deleting a
project that still owns what names it (consumers, lease ledger entries),
and a limit created twice by creations that raced past each other's
check, which is a conflict (DELETE /v3/projects/..., POST /v3/limits and
/v3/registered_limits answer these 409s)."""
from __future__ import annotations

import uuid

import pytest
from sqlalchemy import func, insert, select

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.ledger import allocations
from placement_lite.quota import catalog, limits, models, projects
from tests import factories


def _delete(db, external_id: str) -> None:
    db.run_write(lambda conn: projects.delete_project(
        conn, projects.get(conn, external_id)))


def _claim(db, rp: str, project: str, resources: dict, consumer: str) -> None:
    db.run_write(lambda conn: allocations.replace(conn, [allocations.ConsumerWrite(
        consumer, project, "u", {rp: resources} if resources else {})]))


def test_a_project_owning_consumers_is_kept_until_their_allocations_go(db):
    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=8)["uuid"]
    consumer = str(uuid.uuid4())
    _claim(db, rp, "owner", {"VCPU": 2}, consumer)
    with pytest.raises(errors.ProjectInUse,
                       match="Project owner still owns consumers with allocations"):
        _delete(db, "owner")
    _claim(db, rp, "owner", {}, consumer)  # no allocations: the consumer goes
    _delete(db, "owner")
    with db.read() as conn:
        assert projects.find(conn, "owner") is None


def test_a_project_with_lease_ledger_entries_is_kept_for_audit(db):
    with db.write() as conn:
        project = projects.create(conn, external_id="leased", name="leased")
        conn.execute(insert(t.lease_ledger).values(
            project_id=project.id, resource_name="physical:host",
            event="charge", unit_seconds=3600))
    with pytest.raises(errors.ProjectInUse,
                       match="Project leased has lease ledger entries.*disable"):
        _delete(db, "leased")
    with db.read() as conn:
        assert projects.find(conn, "leased") is not None


@pytest.fixture
def service(db) -> str:
    with db.write() as conn:
        return catalog.create_service(conn, type="placement")["id"]


def _registered(service: str) -> dict:
    return {"service_id": service, "resource_name": "class:VCPU", "default_limit": 10}


def test_a_registered_limit_created_twice_at_once_is_a_duplicate(db, service, monkeypatch):
    with db.write() as conn:
        limits.create_registered(conn, [_registered(service)])
    # The second creation checked before the first committed: it found none.
    monkeypatch.setattr(limits, "_registered_exists", lambda *_a, **_k: False)
    with pytest.raises(errors.DuplicateLimit, match="already exists .created concurrently"):
        with db.write() as conn:
            limits.create_registered(conn, [_registered(service)])
    with db.read() as conn:
        assert conn.scalar(select(func.count()).select_from(t.registered_limits)) == 1


def test_a_project_limit_created_twice_at_once_is_a_duplicate(db, service, monkeypatch):
    item = {"project_id": "p", "service_id": service, "resource_name": "class:VCPU",
            "resource_limit": 5}
    model = models.get_model("flat")
    with db.write() as conn:
        limits.create_registered(conn, [_registered(service)])
        projects.create(conn, external_id="p", name="p")
    lock_owner = limits._lock_owner

    def the_other_creation_commits(conn, owner):
        # The other creation's row lands between this one's check and its
        # insert (it held the tree's lock first).
        lock_owner(conn, owner)
        conn.execute(insert(t.project_limits).values(
            id=uuid.uuid4().hex, owner_id=owner.id, service_id=service,
            region_key="", resource_name="class:VCPU", resource_limit=5))
    monkeypatch.setattr(limits, "_lock_owner", the_other_creation_commits)
    with pytest.raises(errors.DuplicateLimit,
                       match="A limit for resource class:VCPU of p already exists "
                             ".created concurrently"):
        with db.write() as conn:
            limits.create_limits(conn, [item], model)
    with db.read() as conn:
        assert conn.scalar(select(func.count()).select_from(t.project_limits)) == 0
