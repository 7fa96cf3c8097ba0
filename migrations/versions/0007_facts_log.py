"""The log of provider facts changes (db/facts_log.py): one head row per
shard, and a change row per provider a write changed. Every head starts at
serial 0 with floor 0, so a process's first read loads everything. Row
-1 holds a random number naming this database: a process serving a
database dropped and created again under it sees a new name and reloads,
though the serials started over.

Writers of an earlier release do not log their changes: stop them before
this upgrade, as for 0005 and 0006.

Revision ID: 0007
Revises: 0006
"""
import secrets

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

SHARDS = 16


def upgrade() -> None:
    heads = op.create_table(
        "facts_heads",
        sa.Column("shard", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("serial", sa.BigInteger, nullable=False),
        sa.Column("floor", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("shard", name="pk_facts_heads"),
    )
    op.create_table(
        "facts_changes",
        sa.Column("shard", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("serial", sa.BigInteger, autoincrement=False, nullable=False),
        sa.Column("provider_id", sa.Integer, autoincrement=False, nullable=False),
        sa.PrimaryKeyConstraint("shard", "serial", "provider_id",
                                name="pk_facts_changes"),
    )
    op.bulk_insert(heads, [{"shard": -1, "serial": secrets.randbits(62), "floor": 0}]
                   + [{"shard": s, "serial": 0, "floor": 0} for s in range(SHARDS)])


def downgrade() -> None:
    op.drop_table("facts_changes")
    op.drop_table("facts_heads")
