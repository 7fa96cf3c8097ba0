"""Import an OpenStack Placement database into placement_lite's.

The source is read, never written: it is opened read-only where the backend
allows it (SQLite `mode=ro`, a read-only session on MariaDB/MySQL and
PostgreSQL) and read in one repeatable-read transaction, so the copy is one
consistent moment of it even if a writer was left running.

Placement's schema (its releases 2023.1 to 16.0 share it: alembic revision
422ece571366 or a082b8bb98d0) is close to ours, with these differences the
import resolves:
- an allocation names its consumer by uuid (`allocations.consumer_id`), ours
  by the consumer row's id;
- nothing ties inventories, allocations, memberships or consumers to the rows
  they point at (no foreign keys), so a drifted database can hold rows that
  point nowhere; those are reported, with why, and not imported;
- a provider's name and generation, and an aggregate's uuid, may be NULL.

Standard resource classes and traits are matched by name with the ones
placement_lite syncs from os-resource-classes and os-traits; custom ones are
created. Providers, inventories, aggregates, consumers and allocations keep
their ids, so lists come back in the order Placement gave them.

Everything is written in one transaction on the target: all of it, or
nothing. A target that already holds a ledger is refused unless `force` is
given, which means: in that same transaction, first delete every resource
provider (with its inventories, traits and aggregate memberships),
aggregate, consumer, allocation, custom resource class and custom trait
already in the target. Projects, users and consumer types are kept and
matched by name; quota data (limits, registered limits, services, regions,
endpoints, the enforcement setting, the lease ledger) is never touched.

The steps live beside this module, one each: import_source reads
Placement's rows, import_plan maps them, import_write writes the plan,
import_compare checks the result against the source; import_report holds
what the operator is told. This module runs them in order; callers import
every name from here, so the steps can be rearranged without them.
"""
from __future__ import annotations

import os_resource_classes
from sqlalchemy import inspect, select
from sqlalchemy.engine import make_url

from placement_lite.db import tables as t
from placement_lite.db.import_compare import compare
from placement_lite.db.import_plan import Note, Plan, plan
from placement_lite.db.import_report import TARGET_TABLES, ImportRefused, Report
from placement_lite.db.import_source import (
    KNOWN_REVISIONS, SOURCE_TABLES, open_source, read_placement, read_source)
from placement_lite.db.import_write import (
    clear, planned_counts, target_ledger_counts, write)


def run(source_url: str, target, dry_run: bool = False, force: bool = False) -> Report:
    """Read `source_url`, map it, and (unless dry_run) write it into the
    Database `target`, whose schema must be current. ImportRefused when the
    source is not a Placement database this understands, or the target
    already holds a ledger and force is not given."""
    revision, rows = read_placement(source_url)
    report = Report(
        source=make_url(source_url).render_as_string(hide_password=True),
        target=target.engine.url.render_as_string(hide_password=True),
        revision=revision, dry_run=dry_run, forced=force,
        read={name: len(rows[name]) for name in TARGET_TABLES})
    out = plan(rows)
    report.skipped, report.adjusted = out.skipped, out.adjusted

    def refuse_if_full(conn):
        found = {k: v for k, v in target_ledger_counts(conn).items() if v}
        if found and not force:
            raise ImportRefused(
                "the target already holds a ledger ("
                + ", ".join(f"{n} {k}" for k, n in found.items())
                + "); import into an empty database, or give --force to delete "
                "those rows first, in the same transaction as the import")
        return found

    if dry_run:
        with target.read() as conn:
            if inspect(conn).has_table("resource_providers"):
                report.cleared = refuse_if_full(conn)
                known = set(conn.scalars(select(t.resource_classes.c.name)))
            else:  # no schema yet: nothing in it, standard names once synced
                known = set(os_resource_classes.STANDARDS)
        report.imported = planned_counts(out, () if report.cleared else known)
        return report
    with target.write() as conn:
        report.cleared = refuse_if_full(conn)
        if report.cleared:
            clear(conn)
        report.imported = write(conn, out)
    return report


__all__ = ["run", "plan", "read_source", "open_source", "compare", "Report", "Note",
           "ImportRefused", "KNOWN_REVISIONS", "SOURCE_TABLES", "TARGET_TABLES",
           "Plan", "read_placement", "target_ledger_counts", "clear", "write"]
