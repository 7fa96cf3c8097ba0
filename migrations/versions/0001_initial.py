"""Initial schema: providers, inventories, classes, traits, aggregates,
projects, users, consumer types, consumers and allocations.

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _ts():
    return [sa.Column("created_at", sa.DateTime, nullable=False,
                      server_default=sa.func.now()),
            sa.Column("updated_at", sa.DateTime, nullable=True)]


def upgrade() -> None:
    op.create_table(
        "resource_providers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.Column("root_provider_id", sa.Integer,
                  sa.ForeignKey("resource_providers.id",
                                name="fk_resource_providers_root_provider_id"),
                  nullable=True),
        sa.Column("parent_provider_id", sa.Integer,
                  sa.ForeignKey("resource_providers.id",
                                name="fk_resource_providers_parent_provider_id"),
                  nullable=True),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_resource_providers"),
        sa.UniqueConstraint("uuid", name="uq_resource_providers_uuid"),
        sa.UniqueConstraint("name", name="uq_resource_providers_name"),
    )
    op.create_index("ix_resource_providers_root_provider_id",
                    "resource_providers", ["root_provider_id"])
    op.create_index("ix_resource_providers_parent_provider_id",
                    "resource_providers", ["parent_provider_id"])

    op.create_table(
        "resource_classes",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(255), nullable=False),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_resource_classes"),
        sa.UniqueConstraint("name", name="uq_resource_classes_name"),
    )

    op.create_table(
        "inventories",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("resource_provider_id", sa.Integer,
                  sa.ForeignKey("resource_providers.id",
                                name="fk_inventories_resource_provider_id"),
                  nullable=False),
        sa.Column("resource_class_id", sa.Integer,
                  sa.ForeignKey("resource_classes.id",
                                name="fk_inventories_resource_class_id"),
                  nullable=False),
        sa.Column("total", sa.BigInteger, nullable=False),
        sa.Column("reserved", sa.BigInteger, nullable=False),
        sa.Column("min_unit", sa.BigInteger, nullable=False),
        sa.Column("max_unit", sa.BigInteger, nullable=False),
        sa.Column("step_size", sa.BigInteger, nullable=False),
        sa.Column("allocation_ratio", sa.Float, nullable=False),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_inventories"),
        sa.UniqueConstraint("resource_provider_id", "resource_class_id",
                            name="uq_inventories_resource_provider_id_resource_class_id"),
    )
    op.create_index("ix_inventories_rc_rp", "inventories",
                    ["resource_class_id", "resource_provider_id"])

    op.create_table(
        "traits",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_traits"),
        sa.UniqueConstraint("name", name="uq_traits_name"),
    )

    op.create_table(
        "resource_provider_traits",
        sa.Column("resource_provider_id", sa.Integer,
                  sa.ForeignKey("resource_providers.id",
                                name="fk_resource_provider_traits_resource_provider_id"),
                  nullable=False),
        sa.Column("trait_id", sa.Integer,
                  sa.ForeignKey("traits.id",
                                name="fk_resource_provider_traits_trait_id"),
                  nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False,
                  server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("resource_provider_id", "trait_id",
                                name="pk_resource_provider_traits"),
    )
    op.create_index("ix_resource_provider_traits_trait",
                    "resource_provider_traits",
                    ["trait_id", "resource_provider_id"])

    op.create_table(
        "placement_aggregates",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False,
                  server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("id", name="pk_placement_aggregates"),
        sa.UniqueConstraint("uuid", name="uq_placement_aggregates_uuid"),
    )

    op.create_table(
        "resource_provider_aggregates",
        sa.Column("resource_provider_id", sa.Integer,
                  sa.ForeignKey("resource_providers.id",
                                name="fk_resource_provider_aggregates_resource_provider_id"),
                  nullable=False),
        sa.Column("aggregate_id", sa.Integer,
                  sa.ForeignKey("placement_aggregates.id",
                                name="fk_resource_provider_aggregates_aggregate_id"),
                  nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False,
                  server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("resource_provider_id", "aggregate_id",
                                name="pk_resource_provider_aggregates"),
    )
    op.create_index("ix_resource_provider_aggregates_agg",
                    "resource_provider_aggregates",
                    ["aggregate_id", "resource_provider_id"])

    for name in ("projects", "users"):
        op.create_table(
            name,
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("external_id", sa.String(255), nullable=False),
            *_ts(),
            sa.PrimaryKeyConstraint("id", name=f"pk_{name}"),
            sa.UniqueConstraint("external_id", name=f"uq_{name}_external_id"),
        )

    op.create_table(
        "consumer_types",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(255), nullable=False),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_consumer_types"),
        sa.UniqueConstraint("name", name="uq_consumer_types_name"),
    )

    op.create_table(
        "consumers",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("uuid", sa.String(36), nullable=False),
        sa.Column("project_id", sa.Integer,
                  sa.ForeignKey("projects.id", name="fk_consumers_project_id"),
                  nullable=False),
        sa.Column("user_id", sa.Integer,
                  sa.ForeignKey("users.id", name="fk_consumers_user_id"),
                  nullable=False),
        sa.Column("consumer_type_id", sa.Integer,
                  sa.ForeignKey("consumer_types.id",
                                name="fk_consumers_consumer_type_id"),
                  nullable=True),
        sa.Column("generation", sa.Integer, nullable=False),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_consumers"),
        sa.UniqueConstraint("uuid", name="uq_consumers_uuid"),
    )
    op.create_index("ix_consumers_project_uuid", "consumers", ["project_id", "uuid"])
    op.create_index("ix_consumers_project_user_uuid", "consumers",
                    ["project_id", "user_id", "uuid"])

    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("resource_provider_id", sa.Integer,
                  sa.ForeignKey("resource_providers.id",
                                name="fk_allocations_resource_provider_id"),
                  nullable=False),
        sa.Column("consumer_id", sa.Integer,
                  sa.ForeignKey("consumers.id", name="fk_allocations_consumer_id"),
                  nullable=False),
        sa.Column("resource_class_id", sa.Integer,
                  sa.ForeignKey("resource_classes.id",
                                name="fk_allocations_resource_class_id"),
                  nullable=False),
        sa.Column("used", sa.BigInteger, nullable=False),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_allocations"),
    )
    op.create_index("ix_allocations_rp_rc_used", "allocations",
                    ["resource_provider_id", "resource_class_id", "used"])
    op.create_index("ix_allocations_consumer", "allocations", ["consumer_id"])
    op.create_index("ix_allocations_rc", "allocations", ["resource_class_id"])


def downgrade() -> None:
    for name in ("allocations", "consumers", "consumer_types", "users",
                 "projects", "resource_provider_aggregates",
                 "placement_aggregates", "resource_provider_traits", "traits",
                 "inventories", "resource_classes", "resource_providers"):
        op.drop_table(name)
