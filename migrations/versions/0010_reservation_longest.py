"""The longest reservation window: one row bounding every read of the
windows that overlap a period (ledger/windows.py), set from the rows
already stored; and the index those reads range over, (end_at,
start_at), now covering what they read (provider, class, amount).

Writers of an earlier release do not raise it: stop them before this
upgrade, as for 0005 to 0007.

Revision ID: 0010
Revises: 0009
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reservation_longest",
        sa.Column("id", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("seconds", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_reservation_longest"),
    )
    # Both tables carry the window; an amount row's is its reservation's,
    # but the larger of the two costs nothing to take here.
    op.execute(
        "INSERT INTO reservation_longest (id, seconds) SELECT 1, "
        "COALESCE(MAX(n), 0) FROM ("
        "SELECT MAX(end_at - start_at) AS n FROM reservations "
        "UNION ALL SELECT MAX(end_at - start_at) AS n FROM reservation_amounts"
        ") AS spans")
    op.create_index("ix_reservation_amounts_windows", "reservation_amounts",
                    ["end_at", "start_at", "resource_provider_id",
                     "resource_class_id", "amount"])
    op.drop_index("ix_reservation_amounts_end_start", "reservation_amounts")


def downgrade() -> None:
    op.create_index("ix_reservation_amounts_end_start", "reservation_amounts",
                    ["end_at", "start_at"])
    op.drop_index("ix_reservation_amounts_windows", "reservation_amounts")
    op.drop_table("reservation_longest")
