"""Quota: the project tree on `projects`, the per-tree lock rows, the
service/region/endpoint registry, registered and project limits, and the
lease ledger.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _ts():
    return [sa.Column("created_at", sa.DateTime, nullable=False,
                      server_default=sa.func.now()),
            sa.Column("updated_at", sa.DateTime, nullable=True)]


def upgrade() -> None:
    # batch mode: SQLite cannot add a foreign key with ALTER TABLE.
    with op.batch_alter_table("projects") as batch:
        batch.add_column(sa.Column("name", sa.String(255), nullable=True))
        batch.add_column(sa.Column("description", sa.Text, nullable=True))
        batch.add_column(sa.Column("parent_id", sa.Integer, nullable=True))
        batch.add_column(sa.Column("domain_id", sa.Integer, nullable=True))
        batch.add_column(sa.Column("is_domain", sa.Boolean, nullable=False,
                                   server_default=sa.false()))
        batch.add_column(sa.Column("enabled", sa.Boolean, nullable=False,
                                   server_default=sa.true()))
        batch.create_foreign_key("fk_projects_parent_id", "projects",
                                 ["parent_id"], ["id"])
        batch.create_foreign_key("fk_projects_domain_id", "projects",
                                 ["domain_id"], ["id"])
        batch.create_index("ix_projects_parent_id", ["parent_id"])
        batch.create_index("ix_projects_domain_id", ["domain_id"])

    op.create_table(
        "quota_tree_locks",
        sa.Column("root_id", sa.Integer, autoincrement=False, nullable=False),
        sa.Column("generation", sa.Integer, nullable=False),
        sa.PrimaryKeyConstraint("root_id", name="pk_quota_tree_locks"),
    )
    op.create_table(
        "quota_services",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("type", sa.String(255), nullable=False),
        sa.Column("name", sa.String(255), nullable=True),
        sa.Column("description", sa.Text, nullable=True),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_quota_services"),
    )
    op.create_table(
        "quota_regions",
        sa.Column("id", sa.String(255), nullable=False),
        sa.Column("description", sa.Text, nullable=True),
        sa.Column("parent_region_id", sa.String(255),
                  sa.ForeignKey("quota_regions.id",
                                name="fk_quota_regions_parent_region_id"),
                  nullable=True),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_quota_regions"),
    )
    op.create_table(
        "quota_endpoints",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("service_id", sa.String(64),
                  sa.ForeignKey("quota_services.id",
                                name="fk_quota_endpoints_service_id"),
                  nullable=False),
        sa.Column("region_id", sa.String(255),
                  sa.ForeignKey("quota_regions.id",
                                name="fk_quota_endpoints_region_id"),
                  nullable=True),
        sa.Column("interface", sa.String(16), nullable=False),
        sa.Column("url", sa.String(1024), nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_quota_endpoints"),
    )
    op.create_index("ix_quota_endpoints_service_id", "quota_endpoints",
                    ["service_id"])
    op.create_table(
        "registered_limits",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("service_id", sa.String(64),
                  sa.ForeignKey("quota_services.id",
                                name="fk_registered_limits_service_id"),
                  nullable=False),
        sa.Column("region_id", sa.String(255),
                  sa.ForeignKey("quota_regions.id",
                                name="fk_registered_limits_region_id"),
                  nullable=True),
        sa.Column("region_key", sa.String(255), nullable=False),
        sa.Column("resource_name", sa.String(255), nullable=False),
        sa.Column("default_limit", sa.Integer, nullable=False),
        sa.Column("description", sa.Text, nullable=True),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_registered_limits"),
        sa.UniqueConstraint(
            "service_id", "region_key", "resource_name",
            name="uq_registered_limits_service_id_region_key_resource_name"),
    )
    op.create_table(
        "project_limits",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("owner_id", sa.Integer,
                  sa.ForeignKey("projects.id", name="fk_project_limits_owner_id"),
                  nullable=False),
        sa.Column("service_id", sa.String(64),
                  sa.ForeignKey("quota_services.id",
                                name="fk_project_limits_service_id"),
                  nullable=False),
        sa.Column("region_id", sa.String(255),
                  sa.ForeignKey("quota_regions.id",
                                name="fk_project_limits_region_id"),
                  nullable=True),
        sa.Column("region_key", sa.String(255), nullable=False),
        sa.Column("resource_name", sa.String(255), nullable=False),
        sa.Column("resource_limit", sa.Integer, nullable=False),
        sa.Column("description", sa.Text, nullable=True),
        *_ts(),
        sa.PrimaryKeyConstraint("id", name="pk_project_limits"),
        sa.UniqueConstraint(
            "owner_id", "service_id", "region_key", "resource_name",
            name="uq_project_limits_owner_id_service_id_region_key_resource_name"),
    )
    op.create_index("ix_project_limits_resource", "project_limits",
                    ["resource_name", "service_id", "region_key"])
    op.create_table(
        "lease_ledger",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("project_id", sa.Integer,
                  sa.ForeignKey("projects.id", name="fk_lease_ledger_project_id"),
                  nullable=False),
        sa.Column("resource_name", sa.String(255), nullable=False),
        sa.Column("lease_id", sa.String(255), nullable=True),
        sa.Column("lease_name", sa.String(255), nullable=True),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("unit_seconds", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False,
                  server_default=sa.func.now()),
        sa.PrimaryKeyConstraint("id", name="pk_lease_ledger"),
    )
    op.create_index("ix_lease_ledger_project_resource", "lease_ledger",
                    ["project_id", "resource_name"])


def downgrade() -> None:
    for name in ("lease_ledger", "project_limits", "registered_limits",
                 "quota_endpoints", "quota_regions", "quota_services",
                 "quota_tree_locks"):
        op.drop_table(name)
    with op.batch_alter_table("projects") as batch:
        batch.drop_index("ix_projects_domain_id")
        batch.drop_index("ix_projects_parent_id")
        batch.drop_constraint("fk_projects_domain_id", type_="foreignkey")
        batch.drop_constraint("fk_projects_parent_id", type_="foreignkey")
        for column in ("enabled", "is_domain", "domain_id",
                       "parent_id", "description", "name"):
            batch.drop_column(column)
