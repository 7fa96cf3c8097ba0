"""Using a reservation: allocations drawn from one, and how much of each
inventory's usage is drawn.

Revision ID: 0009
Revises: 0008
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("inventories", sa.Column("drawn", sa.BigInteger, nullable=False,
                                           server_default="0"))
    with op.batch_alter_table("allocations") as batch:
        batch.add_column(sa.Column("reservation_id", sa.Integer, nullable=True))
        batch.create_foreign_key("fk_allocations_reservation_id", "reservations",
                                 ["reservation_id"], ["id"])
        batch.create_index("ix_allocations_reservation", ["reservation_id"])
    _marker_classes()


def _marker_classes() -> None:
    """Each reservation already on record gets its marker class, as a
    new one does when it is created (CUSTOM_RESERVATION_<ID>: the id
    upper-cased, dashes as underscores; ledger/marker.py)."""
    conn = op.get_bind()
    rc = sa.table("resource_classes", sa.column("id", sa.Integer),
                  sa.column("name", sa.String))
    r = sa.table("reservations", sa.column("id", sa.Integer),
                 sa.column("uuid", sa.String))
    # Its id: 1,000,000,000 plus the reservation's (tables.MARKER_CLASS_MIN_ID).
    wanted = {"CUSTOM_RESERVATION_" + u.upper().replace("-", "_"): 1_000_000_000 + rid
              for rid, u in conn.execute(sa.select(r.c.id, r.c.uuid))}
    have = set(conn.execute(sa.select(rc.c.name).where(
        rc.c.name.in_(sorted(wanted)))).scalars()) if wanted else set()
    rows = [{"id": rid, "name": name} for name, rid in sorted(wanted.items())
            if name not in have]
    if rows:
        conn.execute(sa.insert(rc), rows)


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        # The foreign key first: MariaDB keeps the index while a key needs it.
        batch.drop_constraint("fk_allocations_reservation_id", type_="foreignkey")
        batch.drop_index("ix_allocations_reservation")
        batch.drop_column("reservation_id")
    with op.batch_alter_table("inventories") as batch:
        batch.drop_column("drawn")
