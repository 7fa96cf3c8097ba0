"""Alembic environment: the target is placement_lite.db.tables.metadata.

The caller (placement_lite.db.migrate) passes an open connection in
config.attributes["connection"], so migrations run on the same engine
setup (SQLite pragmas, MySQL charset) as the service.
"""
from alembic import context

from placement_lite.db.tables import metadata

config = context.config
connection = config.attributes.get("connection")


def run_migrations_online() -> None:
    context.configure(connection=connection, target_metadata=metadata,
                      render_as_batch=connection.dialect.name == "sqlite",
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


if connection is None:
    raise RuntimeError("run migrations through `placement-lite db upgrade`")
run_migrations_online()
