"""The smallest service catalog limits need: services, regions, endpoints.

Limits are scoped to a service (and optionally a region); oslo.limit finds
its service and region by reading its endpoint. Nothing else here.
"""
from __future__ import annotations

import uuid as uuidlib
from typing import Optional

from sqlalchemy import delete, exists, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placement_lite import errors
from placement_lite.db import tables as t


def _one(conn, table, ident, what):
    row = conn.execute(select(table).where(table.c.id == ident)).mappings().first()
    if row is None:
        raise errors.CatalogNotFound(f"No {what} with id {ident} exists.")
    return dict(row)


def _insert(conn, table, what, values: dict) -> dict:
    # A savepoint: a taken id is a 409 that leaves the transaction usable.
    try:
        with conn.begin_nested():
            conn.execute(insert(table).values(**values))
    except IntegrityError:
        article = "An" if what[0] in "aeiou" else "A"
        raise errors.DuplicateName(
            f"{article} {what} with id {values['id']} already exists.")
    return _one(conn, table, values["id"], what)


# Services -----------------------------------------------------------------

def create_service(conn: Connection, *, type: str, name: Optional[str] = None,
                   description: Optional[str] = None, enabled: bool = True,
                   id: Optional[str] = None) -> dict:
    ident = id or uuidlib.uuid4().hex
    return _insert(conn, t.quota_services, "service", dict(
        id=ident, type=type, name=name, description=description,
        enabled=enabled))


def get_service(conn: Connection, ident: str) -> dict:
    return _one(conn, t.quota_services, ident, "service")


def list_services(conn: Connection, type: Optional[str] = None,
                  name: Optional[str] = None) -> list[dict]:
    q = select(t.quota_services).order_by(t.quota_services.c.id)
    if type is not None:
        q = q.where(t.quota_services.c.type == type)
    if name is not None:
        q = q.where(t.quota_services.c.name == name)
    return [dict(r) for r in conn.execute(q).mappings()]


def delete_service(conn: Connection, ident: str) -> None:
    get_service(conn, ident)
    for table in (t.registered_limits, t.project_limits):
        if conn.scalar(select(exists().where(table.c.service_id == ident))):
            raise errors.CatalogInUse(f"Service {ident} has limits; delete them first.")
    conn.execute(delete(t.quota_endpoints).where(
        t.quota_endpoints.c.service_id == ident))
    conn.execute(delete(t.quota_services).where(t.quota_services.c.id == ident))


# Regions ------------------------------------------------------------------

def create_region(conn: Connection, *, id: Optional[str] = None,
                  description: Optional[str] = None,
                  parent_region_id: Optional[str] = None) -> dict:
    ident = id or uuidlib.uuid4().hex
    if parent_region_id is not None:
        get_region(conn, parent_region_id)
    return _insert(conn, t.quota_regions, "region", dict(
        id=ident, description=description, parent_region_id=parent_region_id))


def get_region(conn: Connection, ident: str) -> dict:
    return _one(conn, t.quota_regions, ident, "region")


def list_regions(conn: Connection) -> list[dict]:
    return [dict(r) for r in conn.execute(
        select(t.quota_regions).order_by(t.quota_regions.c.id)).mappings()]


def delete_region(conn: Connection, ident: str) -> None:
    get_region(conn, ident)
    for table in (t.registered_limits, t.project_limits, t.quota_endpoints):
        if conn.scalar(select(exists().where(table.c.region_id == ident))):
            raise errors.CatalogInUse(
                f"Region {ident} has endpoints or limits; delete them first.")
    if conn.scalar(select(exists().where(
            t.quota_regions.c.parent_region_id == ident))):
        raise errors.CatalogInUse(
            f"Region {ident} has child regions; delete them first.")
    conn.execute(delete(t.quota_regions).where(t.quota_regions.c.id == ident))


# Endpoints ----------------------------------------------------------------

def create_endpoint(conn: Connection, *, service_id: str, interface: str,
                    url: str, region_id: Optional[str] = None,
                    enabled: bool = True, id: Optional[str] = None) -> dict:
    get_service(conn, service_id)
    if region_id is not None:
        get_region(conn, region_id)
    ident = id or uuidlib.uuid4().hex
    return _insert(conn, t.quota_endpoints, "endpoint", dict(
        id=ident, service_id=service_id, region_id=region_id,
        interface=interface, url=url, enabled=enabled))


def get_endpoint(conn: Connection, ident: str) -> dict:
    return _one(conn, t.quota_endpoints, ident, "endpoint")


def list_endpoints(conn: Connection, service_id: Optional[str] = None,
                   interface: Optional[str] = None,
                   region_id: Optional[str] = None) -> list[dict]:
    e = t.quota_endpoints
    q = select(e).order_by(e.c.id)
    if service_id is not None:
        q = q.where(e.c.service_id == service_id)
    if interface is not None:
        q = q.where(e.c.interface == interface)
    if region_id is not None:
        q = q.where(e.c.region_id == region_id)
    return [dict(r) for r in conn.execute(q).mappings()]


def update_endpoint(conn: Connection, ident: str, changes: dict) -> dict:
    get_endpoint(conn, ident)
    if "service_id" in changes:
        get_service(conn, changes["service_id"])
    if changes.get("region_id") is not None:
        get_region(conn, changes["region_id"])
    if changes:
        conn.execute(update(t.quota_endpoints)
                     .where(t.quota_endpoints.c.id == ident).values(**changes))
    return get_endpoint(conn, ident)


def delete_endpoint(conn: Connection, ident: str) -> None:
    get_endpoint(conn, ident)
    conn.execute(delete(t.quota_endpoints).where(t.quota_endpoints.c.id == ident))
