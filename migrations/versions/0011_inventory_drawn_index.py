"""An index on what inventories have drawn from reservations: the window
and plain candidates read every key where something is drawn (ledger/
reserved.py, candidates/ahead.py), a handful of rows among all the
inventories, on every window request.

Revision ID: 0011
Revises: 0010
"""
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_inventories_drawn", "inventories",
                    ["drawn", "resource_provider_id", "resource_class_id"])


def downgrade() -> None:
    op.drop_index("ix_inventories_drawn", "inventories")
