"""What an import tells the operator: the refusal, the rows it left out or
changed, and the summary table `placement-lite db import` prints."""
from __future__ import annotations

from dataclasses import dataclass, field

# The target tables the summary counts, in the order they are written.
TARGET_TABLES = (
    "resource_classes", "traits", "resource_providers", "inventories",
    "resource_provider_traits", "placement_aggregates",
    "resource_provider_aggregates", "projects", "users", "consumer_types",
    "consumers", "allocations",
)


class ImportRefused(Exception):
    """The import cannot go ahead; the message says why and what to do."""


@dataclass
class Note:
    """A source row that was not imported (skipped) or was changed on the
    way in (adjusted), and why."""
    table: str
    row: str
    reason: str

    def __str__(self) -> str:
        return f"{self.table} {self.row}: {self.reason}"


@dataclass
class Report:
    source: str
    target: str
    revision: str
    dry_run: bool
    forced: bool
    read: dict = field(default_factory=dict)
    imported: dict = field(default_factory=dict)
    # Rows already in the target that `force` deleted, per table.
    cleared: dict = field(default_factory=dict)
    skipped: list = field(default_factory=list)
    adjusted: list = field(default_factory=list)

    def render(self) -> str:
        verb = "would import" if self.dry_run else "imported"
        lines = [f"source: {self.source} (OpenStack Placement schema {self.revision})",
                 f"target: {self.target}"]
        if self.cleared:
            lines.append(("would delete" if self.dry_run else "deleted")
                         + " what the target held first (--force): "
                         + ", ".join(f"{n} {k}" for k, n in self.cleared.items() if n))
        width = max(len(name) for name in TARGET_TABLES)
        lines.append(f"{'table':<{width}}  {'read':>8}  {verb:>12}  {'skipped':>8}")
        for name in TARGET_TABLES:
            read = self.read.get(name, 0)
            done = self.imported.get(name, 0)
            skipped = sum(1 for n in self.skipped if n.table == name)
            lines.append(f"{name:<{width}}  {read:>8}  {done:>12}  {skipped:>8}")
        if self.skipped:
            lines.append(f"not imported ({len(self.skipped)} rows):")
            lines.extend(f"  {note}" for note in self.skipped)
        if self.adjusted:
            lines.append(f"changed on the way in ({len(self.adjusted)} rows):")
            lines.extend(f"  {note}" for note in self.adjusted)
        lines.append("dry run: nothing was written" if self.dry_run
                     else "written in one transaction")
        return "\n".join(lines)
