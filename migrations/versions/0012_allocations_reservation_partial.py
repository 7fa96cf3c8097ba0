"""The index of allocations drawn from reservations holds only those rows
on SQLite and PostgreSQL (partial). As a full index it held NULL for
nearly every allocation, and SQLite's ANALYZE statistics then made its
planner read one reservation's allocations as a scan of all of them.
MariaDB has no partial indexes; its planner estimates such a lookup by
diving into the index, and the foreign key needs the index there.

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_DRAWN_ONLY = sa.text("reservation_id IS NOT NULL")


def upgrade() -> None:
    if op.get_bind().dialect.name not in ("sqlite", "postgresql"):
        return
    op.drop_index("ix_allocations_reservation", "allocations")
    op.create_index("ix_allocations_reservation", "allocations", ["reservation_id"],
                    sqlite_where=_DRAWN_ONLY, postgresql_where=_DRAWN_ONLY)


def downgrade() -> None:
    if op.get_bind().dialect.name not in ("sqlite", "postgresql"):
        return
    op.drop_index("ix_allocations_reservation", "allocations")
    op.create_index("ix_allocations_reservation", "allocations", ["reservation_id"])
