"""Schema upgrade and version, through alembic, on an open connection."""
from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text


def _script_location() -> str:
    # Run from a source checkout: the migrations/ beside the code that
    # runs, first. An editable install elsewhere (another worktree of the
    # same repository) maps placement_lite.migrations to its own
    # migrations/, which need not match this code's tables.
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if (checkout / "env.py").is_file():
        return str(checkout)
    # Installed: placement_lite/migrations (setup.py maps the top-level
    # migrations/ there).
    spec = importlib.util.find_spec("placement_lite.migrations")
    if spec is not None and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    raise RuntimeError("placement_lite's migrations are not installed")


def _config(connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", _script_location())
    cfg.attributes["connection"] = connection
    return cfg


# Any constant shared by every placement-lite process: it names the lock
# that serialises schema upgrades started at the same time.
_LOCK_NAME = "placement_lite_schema_upgrade"
_PG_LOCK_KEY = 0x706C6974  # "plit"
_LOCK_WAIT_SECONDS = 600


@contextmanager
def _upgrade_lock(conn):
    """Hold a server-wide lock so two `serve`/`db upgrade` runs started at
    once do not both try to create the same tables.

    MySQL/MariaDB: a named lock (GET_LOCK); PostgreSQL: a session advisory
    lock. Both belong to the connection, survive the DDL's commits and are
    released explicitly (or when the connection closes). SQLite needs none:
    the upgrade runs in a BEGIN IMMEDIATE transaction, which already
    excludes every other writer of the file.
    """
    backend = conn.dialect.name
    if backend == "mysql":
        got = conn.execute(text("SELECT GET_LOCK(:n, :w)"),
                           {"n": _LOCK_NAME, "w": _LOCK_WAIT_SECONDS}).scalar()
        if got != 1:
            raise RuntimeError("timed out waiting for another schema upgrade")
        try:
            yield
        finally:
            conn.execute(text("SELECT RELEASE_LOCK(:n)"), {"n": _LOCK_NAME})
    elif backend == "postgresql":
        conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": _PG_LOCK_KEY})
        try:
            yield
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": _PG_LOCK_KEY})
    else:
        yield


class ForeignSchema(Exception):
    """The database's alembic revision is none of ours: it is another
    program's schema (OpenStack Placement's, when a placement.conf's
    connection still names Placement's own database)."""

    def __init__(self, revision: str):
        super().__init__(revision)
        self.revision = revision


def upgrade(engine, revision: str = "head") -> None:
    # The lock is taken on its own autocommit connection so that it is
    # held before the migration's transaction reads the current revision.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as lock_conn:
        with _upgrade_lock(lock_conn):
            writer = engine.execution_options(placement_write=True)
            with writer.begin() as conn:
                current = MigrationContext.configure(conn).get_current_revision()
                ours = {s.revision for s in
                        ScriptDirectory(_script_location()).walk_revisions()}
                if current is not None and current not in ours:
                    raise ForeignSchema(current)
                command.upgrade(_config(conn), revision)


def current_version(engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_version() -> str:
    return ScriptDirectory(_script_location()).get_current_head()


__all__ = ["ForeignSchema", "upgrade", "current_version", "head_version"]
