"""Quota enforcement as a property of the deployment: one row holding
enforcement on/off and the model, read by every process.

No row is written here: the first start writes it from its settings.

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "quota_enforcement",
        sa.Column("id", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("enforce", sa.Boolean, nullable=False),
        sa.Column("model", sa.String(64), nullable=False),
        sa.Column("set_by", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False,
                  server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_quota_enforcement"),
    )


def downgrade() -> None:
    op.drop_table("quota_enforcement")
