"""The schema: SQLAlchemy Core tables on one MetaData.

Alembic revisions in migrations/ create exactly these tables; a test
compares the migrated schema with this module so the two cannot drift.
"""
from sqlalchemy import (
    BigInteger, Boolean, Column, DateTime, Float, ForeignKey, Index, Integer,
    MetaData, String, Table, Text, UniqueConstraint, false, func, text, true,
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
# A reservation's marker class (ledger/marker.py) takes this plus the
# reservation's own id, given by its autoincrement: creating one never
# reads another's id to pick the next, so reservations made at the same
# time do not queue on it. Custom classes count up below it.
MARKER_CLASS_MIN_ID = 1_000_000_000

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
    # The sum of the allocations of this class on this provider, kept by
    # every allocation write in its own transaction (ledger/capacity.py).
    # Summing allocation rows at read time made every candidate answer
    # and every capacity check cost one index walk per inventory row,
    # growing with the allocations a cloud holds.
    Column("used", BigInteger, nullable=False, default=0, server_default="0"),
    # Moved by every write that reserves room on this row (ledger/
    # reservations.py), though no reader looks at it: a claim raising
    # `used` and a reservation admitted beside it then write the same
    # row, so Galera's certification refuses one of them when they run on
    # two nodes at once, as it does two claims. A locking read alone is
    # not part of a node's write set.
    Column("booked", BigInteger, nullable=False, default=0, server_default="0"),
    # The part of `used` drawn from reservations (allocations whose
    # reservation_id is set), moved with `used` by the same statement.
    # What takes free room in time is the rest, `used - drawn`: a drawn
    # allocation lives inside its reservation's amount, which already
    # counts over the reservation's window (docs/reservations.md, "Using
    # a reservation").
    Column("drawn", BigInteger, nullable=False, default=0, server_default="0"),
    *_timestamps(),
    UniqueConstraint("resource_provider_id", "resource_class_id"),
    # The candidate prefilter scans by class first.
    Index("ix_inventories_rc_rp", "resource_class_id", "resource_provider_id"),
    # Candidates read the few keys where something is drawn.
    Index("ix_inventories_drawn", "drawn", "resource_provider_id", "resource_class_id"),
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

# Consumers create a project row on first sight of its id; the quota
# registry (name onwards) lives on the same row. A row nobody registered
# keeps the defaults and reads as an enabled top-level project.
projects = Table(
    "projects", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("external_id", String(255), nullable=False, unique=True),
    *_timestamps(),
    Column("name", String(255), nullable=True),
    Column("description", Text, nullable=True),
    Column("parent_id", Integer, ForeignKey("projects.id"), nullable=True,
           index=True),
    Column("domain_id", Integer, ForeignKey("projects.id"), nullable=True,
           index=True),
    Column("is_domain", Boolean, nullable=False, default=False,
           server_default=false()),
    Column("enabled", Boolean, nullable=False, default=True,
           server_default=true()),
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
    # The reservation this row draws from (it ends with it), or NULL for
    # an allocation with no end. A consumer's row of a reservation's
    # marker class carries it too, so ending the reservation finds every
    # row it takes along on one index.
    Column("reservation_id", Integer, ForeignKey("reservations.id"),
           nullable=True),
    *_timestamps(),
    # The few allocations drawn from reservations (ledger/draws.py). Only
    # those rows, where the backend has partial indexes: a full index
    # holds one value (NULL) for nearly every row, which SQLite's
    # statistics then read as every lookup by reservation matching every
    # allocation (migration 0012).
    Index("ix_allocations_reservation", "reservation_id",
          sqlite_where=text("reservation_id IS NOT NULL"),
          postgresql_where=text("reservation_id IS NOT NULL")),
    # Capacity checks sum `used` per (provider, class) without a table visit.
    Index("ix_allocations_rp_rc_used", "resource_provider_id",
          "resource_class_id", "used"),
    # Project usage sums a project's consumers' allocations from this
    # index alone (migration 0004).
    Index("ix_allocations_consumer_rc_used", "consumer_id", "resource_class_id",
          "used"),
    Index("ix_allocations_rc", "resource_class_id"),
)

# Project usage, kept summed: what GET /usages and quota counting answer
# from, in a handful of rows whatever the number of consumers. Every
# allocation write adds its deltas here in its own transaction
# (ledger/usage_summary.py), so the sums are always exactly those of the
# allocations table. Per owner (project, user, consumer type) and class:
#   consumer_type_id   0 for consumers without a type (a key column cannot
#                      be NULL and still collide);
#   resource_class_id  a class, or -1 for the row counting the owner's
#                      consumers (those holding any allocation);
#   shard              consumer id modulo a small number: the writes of
#                      one busy project spread over several rows, so
#                      parallel claims do not queue on a single row lock
#                      (or collide in Galera's certification); readers
#                      sum the shards.
# A row that falls to 0 stays (readers skip it). No foreign keys: the
# sentinels are not rows, and a zero row must not keep a project alive.
usage_summary = Table(
    "usage_summary", metadata,
    Column("project_id", Integer, primary_key=True, autoincrement=False),
    Column("user_id", Integer, primary_key=True, autoincrement=False),
    Column("consumer_type_id", Integer, primary_key=True, autoincrement=False),
    Column("resource_class_id", Integer, primary_key=True, autoincrement=False),
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("amount", BigInteger, nullable=False),
)


# The candidate engine keeps each process's copy of the providers' facts
# (existence, tree, inventory but `used`, traits, aggregates: see
# db/facts_log.py). Every write changing them logs the providers it
# changed, per shard (provider id modulo 16), under a serial bumped in
# the write's own transaction; a process compares its shards' serials
# with these and reloads the providers logged since.
#   serial  the shard's last change;
#   floor   changes up to this serial are no longer logged (pruned, or a
#           bulk writer reset the shard): a copy older than it reloads all.
facts_heads = Table(
    "facts_heads", metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("serial", BigInteger, nullable=False),
    Column("floor", BigInteger, nullable=False),
)

facts_changes = Table(
    "facts_changes", metadata,
    Column("shard", Integer, primary_key=True, autoincrement=False),
    Column("serial", BigInteger, primary_key=True, autoincrement=False),
    Column("provider_id", Integer, primary_key=True, autoincrement=False),
)


# Quota

# One row per project tree (keyed by the root project's id), bumped by every
# quota decision in that tree: the UPDATE takes the row lock that serialises
# claims of one tree across processes. It is not the projects row itself
# because inserting a consumer takes a shared lock on its project row (the
# foreign key check) on MariaDB, and two claims upgrading those shared locks
# would deadlock; nothing references this table.
quota_tree_locks = Table(
    "quota_tree_locks", metadata,
    Column("root_id", Integer, primary_key=True, autoincrement=False),
    Column("generation", Integer, nullable=False, default=0),
)

quota_services = Table(
    "quota_services", metadata,
    Column("id", String(64), primary_key=True),
    Column("type", String(255), nullable=False),
    Column("name", String(255), nullable=True),
    Column("description", Text, nullable=True),
    Column("enabled", Boolean, nullable=False, default=True,
           server_default=true()),
    *_timestamps(),
)

quota_regions = Table(
    "quota_regions", metadata,
    Column("id", String(255), primary_key=True),
    Column("description", Text, nullable=True),
    Column("parent_region_id", String(255), ForeignKey("quota_regions.id"),
           nullable=True),
    *_timestamps(),
)

quota_endpoints = Table(
    "quota_endpoints", metadata,
    Column("id", String(64), primary_key=True),
    Column("service_id", String(64), ForeignKey("quota_services.id"),
           nullable=False, index=True),
    Column("region_id", String(255), ForeignKey("quota_regions.id"),
           nullable=True),
    Column("interface", String(16), nullable=False),
    Column("url", String(1024), nullable=False),
    Column("enabled", Boolean, nullable=False, default=True,
           server_default=true()),
    *_timestamps(),
)

# region_key is region_id or '': NULLs never collide in a unique index, and
# "no region" must be unique too.
registered_limits = Table(
    "registered_limits", metadata,
    Column("id", String(64), primary_key=True),
    Column("service_id", String(64), ForeignKey("quota_services.id"),
           nullable=False),
    Column("region_id", String(255), ForeignKey("quota_regions.id"),
           nullable=True),
    Column("region_key", String(255), nullable=False),
    Column("resource_name", String(255), nullable=False),
    Column("default_limit", Integer, nullable=False),
    Column("description", Text, nullable=True),
    *_timestamps(),
    UniqueConstraint("service_id", "region_key", "resource_name"),
)

# owner_id is the project (or domain: a project row with is_domain) the
# limit applies to.
project_limits = Table(
    "project_limits", metadata,
    Column("id", String(64), primary_key=True),
    Column("owner_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("service_id", String(64), ForeignKey("quota_services.id"),
           nullable=False),
    Column("region_id", String(255), ForeignKey("quota_regions.id"),
           nullable=True),
    Column("region_key", String(255), nullable=False),
    Column("resource_name", String(255), nullable=False),
    Column("resource_limit", Integer, nullable=False),
    Column("description", Text, nullable=True),
    *_timestamps(),
    UniqueConstraint("owner_id", "service_id", "region_key", "resource_name"),
    Index("ix_project_limits_resource", "resource_name", "service_id",
          "region_key"),
)

# Append-only: every lease charge and refund, in unit-seconds (amount x
# seconds), so a project's reserved-time balance is one SUM and auditable.
lease_ledger = Table(
    "lease_ledger", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("resource_name", String(255), nullable=False),
    Column("lease_id", String(255), nullable=True),
    Column("lease_name", String(255), nullable=True),
    Column("event", String(32), nullable=False),
    Column("unit_seconds", BigInteger, nullable=False),
    Column("reason", Text, nullable=True),
    Column("created_at", DateTime, nullable=False, server_default=func.now()),
    Index("ix_lease_ledger_project_resource", "project_id", "resource_name"),
)

# The deployment's quota enforcement: one row (id 1), written on the first
# start from that process's settings, or by `placement-lite quota
# enforcement --set`. Every claim check and quota check reads it, so every
# process answers alike whatever its own flags say.
quota_enforcement = Table(
    "quota_enforcement", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("enforce", Boolean, nullable=False),
    Column("model", String(64), nullable=False),
    # Who wrote it: "first start" or "admin command", for messages.
    Column("set_by", String(64), nullable=False),
    *_timestamps(),
)

# A reservation holds room on providers for a window [start_at, end_at):
# times are whole seconds since the epoch, UTC, and "now" is always the
# database's (db/clock.py), so every process agrees on what has started
# and what has ended. Nothing expires by being deleted: a row whose
# end_at is not after now simply stops counting.
reservations = Table(
    "reservations", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("uuid", String(36), nullable=False, unique=True),
    Column("project_id", Integer, ForeignKey("projects.id"), nullable=False),
    Column("user_id", Integer, ForeignKey("users.id"), nullable=False),
    Column("start_at", BigInteger, nullable=False),
    Column("end_at", BigInteger, nullable=False),
    Column("generation", Integer, nullable=False, default=0),
    *_timestamps(),
    # A project's calendar, and its quota at every instant.
    Index("ix_reservations_project_end", "project_id", "end_at"),
)

# What a reservation holds, per provider and class. The window is copied
# onto each row (and moved with the reservation), so "what is reserved on
# these providers from now on" and "what overlaps this window" are each
# one index range, without visiting the reservations table.
reservation_amounts = Table(
    "reservation_amounts", metadata,
    Column("reservation_id", Integer, ForeignKey("reservations.id"),
           primary_key=True, autoincrement=False),
    Column("resource_provider_id", Integer,
           ForeignKey("resource_providers.id"), primary_key=True,
           autoincrement=False),
    Column("resource_class_id", Integer, ForeignKey("resource_classes.id"),
           primary_key=True, autoincrement=False),
    Column("amount", BigInteger, nullable=False),
    Column("start_at", BigInteger, nullable=False),
    Column("end_at", BigInteger, nullable=False),
    Index("ix_reservation_amounts_rp_rc_end", "resource_provider_id",
          "resource_class_id", "end_at"),
    # What overlaps a window: a range on end_at bounded by the longest
    # window (ledger/windows.py), answered from the index alone, without
    # visiting a row per window.
    Index("ix_reservation_amounts_windows", "end_at", "start_at",
          "resource_provider_id", "resource_class_id", "amount"),
)

# One row (id 1): at least the longest window, end_at - start_at, that
# any row of reservations or reservation_amounts has ever had. A window
# overlapping [start, end) ends before end + seconds, so the reads of
# what overlaps a window are a range bounded on both sides of the
# (end_at, start_at) index (ledger/windows.py). It only grows, in the
# transaction that writes the longer window.
reservation_longest = Table(
    "reservation_longest", metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("seconds", BigInteger, nullable=False),
)
