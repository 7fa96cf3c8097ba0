"""The inventory and traits PUTs read what a provider holds together with
the provider, before its generation is bumped; that read is trusted only
because the bump checks the generation. A writer that commits in between
must make the bump fail (409), never be overwritten from a stale read.
Aggregates are read under the lock instead, since a PUT before 1.19
changes them without a bump.

SQLite's write transactions take the database lock at BEGIN, so no
writer can come in between there: these run on MariaDB and PostgreSQL."""
from __future__ import annotations

import pytest

from placement_lite import errors
from placement_lite.ledger import aggregates, inventories, providers, traits

AGG_A = "1d0c9a8e-7f35-4a8e-9a1b-0c2d3e4f5a61"
AGG_B = "1d0c9a8e-7f35-4a8e-9a1b-0c2d3e4f5a62"


@pytest.fixture
def provider(db):
    if db.backend == "sqlite":
        pytest.skip("SQLite serialises writers at BEGIN: nothing comes in between")
    return db.run_write(lambda conn: providers.create_provider(conn, "cn1"))


def test_traits_changed_after_the_read_make_the_write_a_409(db, provider):
    with db.write() as conn:
        seen, held = traits.provider_for_write(conn, provider.uuid)
        # Another writer sets the traits and commits meanwhile.
        db.run_write(lambda other: traits.set_provider_traits(
            other, providers.get_by_uuid(other, provider.uuid),
            ["HW_CPU_X86_AVX2"], seen.generation))
        with pytest.raises(errors.ConcurrentUpdate):
            traits.replace_provider_traits(conn, seen, ["STORAGE_DISK_SSD"],
                                           seen.generation, held=held)
    with db.read() as conn:
        stored = traits.provider_traits(conn, providers.get_by_uuid(conn, provider.uuid))
    assert [tr.name for tr in stored] == ["HW_CPU_X86_AVX2"]


def test_inventory_changed_after_the_read_makes_the_write_a_409(db, provider):
    vcpu = inventories.make("VCPU", {"total": 8})
    disk = inventories.make("DISK_GB", {"total": 100})
    with db.write() as conn:
        seen, held = inventories.provider_for_write(conn, provider.uuid)
        assert held == {}
        db.run_write(lambda other: inventories.replace_inventories(
            other, providers.get_by_uuid(other, provider.uuid), {"VCPU": vcpu},
            seen.generation))
        with pytest.raises(errors.ConcurrentUpdate):
            inventories.replace_and_read(conn, seen, {"DISK_GB": disk},
                                         seen.generation, held=held)
    with db.read() as conn:
        stored = inventories.get_inventories(conn, providers.get_by_uuid(conn, provider.uuid))
    assert list(stored) == ["VCPU"]


def test_aggregates_set_without_a_bump_meanwhile_are_replaced_not_kept(db, provider):
    with db.write() as conn:
        seen = providers.get_ref(conn, provider.uuid)
        # A caller before 1.19 changes the aggregates without a bump, so
        # the generation the write checks has not moved.
        db.run_write(lambda other: aggregates.set_provider_aggregates(
            other, providers.get_by_uuid(other, provider.uuid), [AGG_A], bump=False))
        aggregates.set_provider_aggregates(conn, seen, [AGG_B], seen.generation)
    with db.read() as conn:
        stored = aggregates.provider_aggregates(conn, providers.get_by_uuid(conn, provider.uuid))
    assert stored == [AGG_B]


def test_deleting_all_inventory_removes_a_class_added_just_before_the_lock(db, provider):
    """Without a generation, what to remove is known only under the
    provider's lock: a class another writer adds just before it goes too."""
    from sqlalchemy import event

    disk = inventories.make("DISK_GB", {"total": 100})
    vcpu = inventories.make("VCPU", {"total": 8})
    db.run_write(lambda conn: inventories.replace_inventories(
        conn, providers.get_by_uuid(conn, provider.uuid), {"DISK_GB": disk}, None))
    added = []

    def just_before_the_bump(conn, cursor, statement, *args):
        if not added and statement.lstrip().upper().startswith("UPDATE resource_providers".upper()):
            added.append(db.run_write(lambda other: inventories.add_inventory(
                other, providers.get_by_uuid(other, provider.uuid), vcpu)))

    with db.write() as conn:
        seen = providers.get_ref(conn, provider.uuid)
        event.listen(conn, "before_cursor_execute", just_before_the_bump)
        inventories.delete_all_inventories(conn, seen)
    assert added
    with db.read() as conn:
        assert inventories.get_inventories(
            conn, providers.get_by_uuid(conn, provider.uuid)) == {}
