"""Each inventory row carries what is allocated of it (`used`), kept by
every allocation write in the same transaction, so capacity is read from
one row instead of summed from the allocations on every candidate query
and claim. Filled here from the allocations already stored.

Revision ID: 0006
Revises: 0005
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("inventories") as batch:
        batch.add_column(sa.Column("used", sa.BigInteger, nullable=False,
                                   server_default="0"))
    op.execute(
        "UPDATE inventories SET used = COALESCE(("
        "SELECT SUM(a.used) FROM allocations a"
        " WHERE a.resource_provider_id = inventories.resource_provider_id"
        " AND a.resource_class_id = inventories.resource_class_id), 0)")


def downgrade() -> None:
    with op.batch_alter_table("inventories") as batch:
        batch.drop_column("used")
