"""Schema upgrade and version, through alembic, on an open connection."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory


def _script_location() -> str:
    # Installed: placement_lite/migrations (setup.py maps the top-level
    # migrations/ there). Run from a source checkout: migrations/ itself.
    spec = importlib.util.find_spec("placement_lite.migrations")
    if spec is not None and spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if (checkout / "env.py").is_file():
        return str(checkout)
    raise RuntimeError("placement_lite's migrations are not installed")


def _config(connection) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", _script_location())
    cfg.attributes["connection"] = connection
    return cfg


def upgrade(engine, revision: str = "head") -> None:
    with engine.begin() as conn:
        command.upgrade(_config(conn), revision)


def current_version(engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_version() -> str:
    return ScriptDirectory(_script_location()).get_current_head()


__all__ = ["upgrade", "current_version", "head_version"]
