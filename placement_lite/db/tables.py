"""The schema: SQLAlchemy Core tables on one MetaData.

Alembic revisions in migrations/ create exactly these tables; a test
compares the migrated schema with this module so the two cannot drift.
"""
from sqlalchemy import (
    BigInteger, Boolean, Column, DateTime, Float, ForeignKey, Index, Integer,
    MetaData, String, Table, Text, UniqueConstraint, func,
)

metadata = MetaData(naming_convention={
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s",
    "pk": "pk_%(table_name)s",
})


def _timestamps():
    return [
        Column("created_at", DateTime, nullable=False, server_default=func.now()),
        Column("updated_at", DateTime, nullable=True),
    ]


resource_providers = Table(
    "resource_providers", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("name", String(200), nullable=False, unique=True),
    Column("generation", Integer, nullable=False, default=0),
    # Nullable only while the row is being inserted: a root points at itself.
    Column("root_provider_id", Integer,
           ForeignKey("resource_providers.id"), nullable=True, index=True),
    Column("parent_provider_id", Integer,
           ForeignKey("resource_providers.id"), nullable=True, index=True),
    *_timestamps(),
)

resource_classes = Table(
    "resource_classes", metadata,
    # Standard classes keep their os-resource-classes index as id; custom
    # classes start at CUSTOM_CLASS_MIN_ID so the two ranges never meet.
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("name", String(255), nullable=False, unique=True),
    *_timestamps(),
)
CUSTOM_CLASS_MIN_ID = 10000

inventories = Table(
    "inventories", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("resource_provider_id", Integer,
           ForeignKey("resource_providers.id"), nullable=False),
    Column("resource_class_id", Integer,
           ForeignKey("resource_classes.id"), nullable=False),
    Column("total", BigInteger, nullable=False),
    Column("reserved", BigInteger, nullable=False, default=0),
    Column("min_unit", BigInteger, nullable=False, default=1),
    Column("max_unit", BigInteger, nullable=False),
    Column("step_size", BigInteger, nullable=False, default=1),
    Column("allocation_ratio", Float, nullable=False, default=1.0),
    *_timestamps(),
    UniqueConstraint("resource_provider_id", "resource_class_id"),
    # The candidate prefilter scans by class first.
    Index("ix_inventories_rc_rp", "resource_class_id", "resource_provider_id"),
)

traits = Table(
    "traits", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False, unique=True),
    *_timestamps(),
)

resource_provider_traits = Table(
    "resource_provider_traits", metadata,
    Column("resource_provider_id", Integer,
           ForeignKey("resource_providers.id"), primary_key=True),
    Column("trait_id", Integer, ForeignKey("traits.id"), primary_key=True),
    Column("created_at", DateTime, nullable=False, server_default=func.now()),
    Index("ix_resource_provider_traits_trait", "trait_id", "resource_provider_id"),
)

placement_aggregates = Table(
    "placement_aggregates", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("created_at", DateTime, nullable=False, server_default=func.now()),
)

resource_provider_aggregates = Table(
    "resource_provider_aggregates", metadata,
    Column("resource_provider_id", Integer,
           ForeignKey("resource_providers.id"), primary_key=True),
    Column("aggregate_id", Integer,
           ForeignKey("placement_aggregates.id"), primary_key=True),
    Column("created_at", DateTime, nullable=False, server_default=func.now()),
    Index("ix_resource_provider_aggregates_agg", "aggregate_id",
          "resource_provider_id"),
)

projects = Table(
    "projects", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("external_id", String(255), nullable=False, unique=True),
    *_timestamps(),
)

users = Table(
    "users", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("external_id", String(255), nullable=False, unique=True),
    *_timestamps(),
)

consumer_types = Table(
    "consumer_types", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(255), nullable=False, unique=True),
    *_timestamps(),
)

consumers = Table(
    "consumers", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("consumer_type_id", Integer, ForeignKey("consumer_types.id"),
           nullable=True),
    Column("generation", Integer, nullable=False, default=0),
    *_timestamps(),
    # GET /usages?project_id=..[&user_id=..] is one indexed join from here.
    Index("ix_consumers_project_uuid", "project_id", "uuid"),
    Index("ix_consumers_project_user_uuid", "project_id", "user_id", "uuid"),
)

allocations = Table(
    "allocations", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("resource_provider_id", Integer,
           ForeignKey("resource_providers.id"), nullable=False),
    Column("consumer_id", Integer, ForeignKey("consumers.id"), nullable=False),
    Column("resource_class_id", Integer,
           ForeignKey("resource_classes.id"), nullable=False),
    Column("used", BigInteger, nullable=False),
    *_timestamps(),
    # Capacity checks sum `used` per (provider, class) without a table visit.
    Index("ix_allocations_rp_rc_used", "resource_provider_id",
          "resource_class_id", "used"),
    Index("ix_allocations_consumer", "consumer_id"),
    Index("ix_allocations_rc", "resource_class_id"),
)
