"""Reservations: room on providers held for a window of time.

Revision ID: 0008
Revises: 0007
"""
import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("inventories", sa.Column("booked", sa.BigInteger, nullable=False,
                                           server_default="0"))
    op.create_table(
        "reservations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("project_id", sa.Integer, nullable=False),
        sa.Column("user_id", sa.Integer, nullable=False),
        sa.Column("start_at", sa.BigInteger, nullable=False),
        sa.Column("end_at", sa.BigInteger, nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False,
                  server_default=sa.func.now()),
        sa.Column("updated_at", sa.DateTime, nullable=True),
        sa.ForeignKeyConstraint(["project_id"], ["projects.id"],
                                name="fk_reservations_project_id"),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"],
                                name="fk_reservations_user_id"),
        sa.UniqueConstraint("uuid", name="uq_reservations_uuid"),
    )
    op.create_index("ix_reservations_project_end", "reservations",
                    ["project_id", "end_at"])
    op.create_table(
        "reservation_amounts",
        sa.Column("reservation_id", sa.Integer, autoincrement=False,
                  nullable=False),
        sa.Column("resource_provider_id", sa.Integer, autoincrement=False,
                  nullable=False),
        sa.Column("resource_class_id", sa.Integer, autoincrement=False,
                  nullable=False),
        sa.Column("amount", sa.BigInteger, nullable=False),
        sa.Column("start_at", sa.BigInteger, nullable=False),
        sa.Column("end_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("reservation_id", "resource_provider_id",
                                "resource_class_id",
                                name="pk_reservation_amounts"),
        sa.ForeignKeyConstraint(["reservation_id"], ["reservations.id"],
                                name="fk_reservation_amounts_reservation_id"),
        sa.ForeignKeyConstraint(["resource_provider_id"],
                                ["resource_providers.id"],
                                name="fk_reservation_amounts_resource_provider_id"),
        sa.ForeignKeyConstraint(["resource_class_id"], ["resource_classes.id"],
                                name="fk_reservation_amounts_resource_class_id"),
    )
    op.create_index("ix_reservation_amounts_rp_rc_end", "reservation_amounts",
                    ["resource_provider_id", "resource_class_id", "end_at"])
    op.create_index("ix_reservation_amounts_end_start", "reservation_amounts",
                    ["end_at", "start_at"])


def downgrade() -> None:
    op.drop_table("reservation_amounts")
    op.drop_table("reservations")
    with op.batch_alter_table("inventories") as batch:
        batch.drop_column("booked")
