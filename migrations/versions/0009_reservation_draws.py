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


def downgrade() -> None:
    with op.batch_alter_table("allocations") as batch:
        batch.drop_index("ix_allocations_reservation")
        batch.drop_constraint("fk_allocations_reservation_id", type_="foreignkey")
        batch.drop_column("reservation_id")
    with op.batch_alter_table("inventories") as batch:
        batch.drop_column("drawn")
