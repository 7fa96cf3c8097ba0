"""Reading an OpenStack Placement database for the import, without ever
writing to it: a read-only connection where the backend can say so, and one
repeatable-read transaction, so the rows are one moment of it."""
from __future__ import annotations

import os

from sqlalchemy import MetaData, Table, create_engine, inspect, select, text
from sqlalchemy.engine import Connection, Engine, make_url

from placement_lite.db.import_report import ImportRefused

# Placement's alembic revisions whose schema this reads (2023.1 .. 16.0).
KNOWN_REVISIONS = {
    "422ece571366": "consumer types (Xena and later)",
    "a082b8bb98d0": "redundant indexes dropped (2023.1 .. 16.0)",
}
SOURCE_TABLES = (
    "resource_classes", "traits", "resource_providers", "inventories",
    "resource_provider_traits", "placement_aggregates",
    "resource_provider_aggregates", "projects", "users", "consumer_types",
    "consumers", "allocations",
)


def open_source(url: str) -> Engine:
    """An engine that can only read `url` (where the backend can say so)."""
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        path = parsed.database
        if not path or path == ":memory:":
            raise ImportRefused(f"--from {url}: an in-memory SQLite database has "
                                "nothing to import; give the path of Placement's file")
        if not os.path.isfile(path):
            raise ImportRefused(f"--from {url}: no such file: {path}")
        ro = parsed.set(database=f"file:{os.path.abspath(path)}?mode=ro",
                        query={"uri": "true"})
        return create_engine(ro)
    kwargs: dict = {"isolation_level": "REPEATABLE READ"}
    if backend == "mysql":
        kwargs["connect_args"] = {"init_command": "SET SESSION TRANSACTION READ ONLY"}
        query = dict(parsed.query)
        query.setdefault("charset", "utf8mb4")
        parsed = parsed.set(query=query)
    elif backend == "postgresql":
        kwargs["connect_args"] = {"options": "-c default_transaction_read_only=on"}
    return create_engine(parsed, **kwargs)


def _revision(conn: Connection, names: set) -> str:
    if "alembic_version" not in names or "resource_providers" not in names:
        raise ImportRefused(
            "the source is not an OpenStack Placement database (it has no "
            "alembic_version or resource_providers table)")
    revisions = list(conn.scalars(text("SELECT version_num FROM alembic_version")))
    if len(revisions) != 1 or revisions[0] not in KNOWN_REVISIONS:
        shown = ", ".join(map(str, revisions)) or "none"
        raise ImportRefused(
            f"the source's schema revision is {shown}, not one of Placement's "
            f"2023.1 .. 16.0 ({', '.join(sorted(KNOWN_REVISIONS))}); run "
            "`placement-manage db sync` with Placement 2023.1 or later first")
    return revisions[0]


def read_placement(source_url: str) -> tuple[str, dict]:
    """read_source over a read-only connection to `source_url`, in one
    repeatable-read transaction."""
    engine = open_source(source_url)
    try:
        with engine.connect() as conn:
            with conn.begin():
                return read_source(conn)
    finally:
        engine.dispose()


def read_source(conn: Connection) -> tuple[str, dict]:
    """(revision, {table: [row mappings]}) for every table the import uses."""
    names = set(inspect(conn).get_table_names())
    revision = _revision(conn, names)
    missing = [name for name in SOURCE_TABLES if name not in names]
    if missing:
        raise ImportRefused(f"the source lacks Placement's table(s) {', '.join(missing)}")
    meta = MetaData()
    rows = {}
    for name in SOURCE_TABLES:
        table = Table(name, meta, autoload_with=conn)
        order = [c for c in table.primary_key.columns]
        rows[name] = [dict(r._mapping) for r in
                      conn.execute(select(table).order_by(*order))]
    return revision, rows
