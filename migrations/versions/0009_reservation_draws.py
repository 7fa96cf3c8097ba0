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
    r = sa.table("reservations", sa.column("uuid", sa.String))
    names = {"CUSTOM_RESERVATION_" + u.upper().replace("-", "_")
             for u in conn.execute(sa.select(r.c.uuid)).scalars()}
    names -= set(conn.execute(sa.select(rc.c.name).where(
        rc.c.name.in_(sorted(names)))).scalars()) if names else set()
    if not names:
        return
    top = conn.execute(sa.select(sa.func.max(rc.c.id))
                       .where(rc.c.id >= 10000)).scalar()
    first = 10000 if top is None else top + 1
    conn.execute(sa.insert(rc), [{"id": first + i, "name": name}
                                 for i, name in enumerate(sorted(names))])


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.drop_index("ix_allocations_reservation")
        batch.drop_constraint("fk_allocations_reservation_id", type_="foreignkey")
        batch.drop_column("reservation_id")
    with op.batch_alter_table("inventories") as batch:
        batch.drop_column("drawn")
