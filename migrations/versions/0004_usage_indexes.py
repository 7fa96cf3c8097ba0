"""Project usage (GET /usages) sums allocations of a project's consumers:
an index on allocations led by consumer_id and carrying the class and the
amount answers that join from the index alone (no row visit per
allocation) on SQLite, MariaDB/MySQL and PostgreSQL. It replaces the
single-column consumer index, which it covers as a prefix (MySQL's
foreign key on consumer_id is served by it too).

Revision ID: 0004
Revises: 0003
"""
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Created first: MySQL refuses to drop the only index its foreign key
    # on consumer_id can use.
    op.create_index("ix_allocations_consumer_rc_used", "allocations",
                    ["consumer_id", "resource_class_id", "used"])
    op.drop_index("ix_allocations_consumer", table_name="allocations")


def downgrade() -> None:
    op.create_index("ix_allocations_consumer", "allocations", ["consumer_id"])
    op.drop_index("ix_allocations_consumer_rc_used", table_name="allocations")
