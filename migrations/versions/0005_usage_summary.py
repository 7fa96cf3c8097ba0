"""Project usage kept summed: the usage_summary table (db/tables.py says
what its keys mean), filled here from the allocations already stored.
From this revision on every allocation write keeps it in step, in the
write's own transaction; a process of an earlier release writing
allocations after this upgrade would not, so stop those first (as with
any upgrade).

The fill is written out here rather than imported from the ledger, so
this revision does the same whatever the code does later.

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

NO_TYPE = 0
CONSUMERS = -1
SHARDS = 16


def upgrade() -> None:
    summary = op.create_table(
        "usage_summary",
        sa.Column("project_id", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("user_id", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("consumer_type_id", sa.Integer, autoincrement=False,
                  nullable=False),
        sa.Column("resource_class_id", sa.Integer, autoincrement=False,
                  nullable=False),
        sa.Column("shard", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("project_id", "user_id", "consumer_type_id",
                                "resource_class_id", "shard",
                                name="pk_usage_summary"),
    )
    c = sa.table("consumers", sa.column("id"), sa.column("project_id"),
                 sa.column("user_id"), sa.column("consumer_type_id"))
    a = sa.table("allocations", sa.column("id"), sa.column("consumer_id"),
                 sa.column("resource_class_id"), sa.column("used"))
    # Constants written into the SQL: PostgreSQL matches a grouped
    # expression to its GROUP BY only when no bound parameter differs.
    kind = sa.func.coalesce(c.c.consumer_type_id, sa.literal_column(str(NO_TYPE)))
    shard = c.c.id % sa.literal_column(str(SHARDS))
    owner = (c.c.project_id, c.c.user_id, kind)
    sums = (sa.select(*owner, a.c.resource_class_id, shard, sa.func.sum(a.c.used))
            .select_from(c).join(a, a.c.consumer_id == c.c.id)
            .group_by(*owner, a.c.resource_class_id, shard))
    # A consumer counts while it holds any allocation.
    counts = (sa.select(*owner, sa.literal_column(str(CONSUMERS)), shard, sa.func.count())
              .where(sa.select(a.c.id).where(a.c.consumer_id == c.c.id).exists())
              .group_by(*owner, shard))
    op.execute(summary.insert().from_select(
        ["project_id", "user_id", "consumer_type_id", "resource_class_id",
         "shard", "amount"], sa.union_all(sums, counts)))


def downgrade() -> None:
    op.drop_table("usage_summary")
