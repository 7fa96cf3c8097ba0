"""Providers, reservations and claims made through the HTTP API, for the
tests of using a reservation (drawing from it, being offered its room),
as Blazar and nova make them: an admin at microversion 1.39, the
project "lab", the user "alice".

Times are the database's (db/clock.py): `db_now` reads it.
"""
from __future__ import annotations

import uuid as uuidlib

import falcon.testing

from placement_lite.api.times import text
from placement_lite.app import create_app
from placement_lite.config import Settings
from placement_lite.db import clock

HOUR = 3600
ADMIN = {"X-Auth-Token": "admin", "OpenStack-API-Version": "placement 1.39"}


def client_for(db, **settings) -> falcon.testing.TestClient:
    """An in-process client of an app over `db`, with these settings."""
    return falcon.testing.TestClient(create_app(Settings(db=db.url, **settings), db))


def db_now(db) -> int:
    with db.read() as conn:
        return clock.now(conn)


def provider(client, parent=None, **inventory) -> str:
    """A new provider (under `parent`, when named) with `inventory`
    ({class: total}); its uuid."""
    rp = str(uuidlib.uuid4())
    body = {"name": f"rp-{rp}", "uuid": rp}
    if parent:
        body["parent_provider_uuid"] = parent
    got = client.simulate_post("/resource_providers", headers=ADMIN, json=body)
    assert got.status_code in (200, 201), got.text
    if inventory:
        got = client.simulate_put(
            f"/resource_providers/{rp}/inventories", headers=ADMIN,
            json={"resource_provider_generation": 0, "inventories": {
                name: {"total": n} for name, n in inventory.items()}})
        assert got.status_code == 200, got.text
    return rp


def reserve(client, holdings, start, end, project="lab") -> str:
    """A reservation of `holdings` ({provider uuid: {class: amount}}) over
    [start, end), which must be admitted; its uuid."""
    got = client.simulate_post("/reservations", headers=ADMIN, json={
        "project_id": project, "user_id": "alice", "start": text(start),
        "end": text(end), "allocations": {
            rp: {"resources": resources} for rp, resources in holdings.items()}})
    assert got.status_code == 201, got.text
    return got.json["id"]


def put_allocations(client, consumer, allocations, project="lab"):
    """PUT `allocations` ({provider uuid: {"resources": ...}}) for a new
    instance `consumer`; the response, whatever it is."""
    return client.simulate_put(f"/allocations/{consumer}", headers=ADMIN, json={
        "allocations": allocations, "project_id": project, "user_id": "alice",
        "consumer_generation": None, "consumer_type": "INSTANCE"})


def code(got) -> str:
    """The error code of a refused request."""
    return got.json["errors"][0]["code"]
