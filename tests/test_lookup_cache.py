"""Names to ids: standard classes and traits, once read, cost no query
(their rows never change); custom ones, which can be deleted and made
again with another id, are read every time."""
from __future__ import annotations

import pytest
from sqlalchemy import event

from placement_lite import errors
from placement_lite.db import tables as t
from placement_lite.ledger import lookup, resource_classes, traits


def _selects(db):
    seen = []

    def count(conn, cursor, statement, *args):
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append(statement)
    event.listen(db.engine, "before_cursor_execute", count)
    return seen, lambda: event.remove(db.engine, "before_cursor_execute", count)


def _trait_ids(conn, names):
    return lookup.ids_by_name(conn, t.traits.c.name, t.traits.c.id, names,
                              lambda missing: f"No such trait {missing}")


def test_standard_names_are_read_once(db):
    with db.read() as conn:
        first = (resource_classes.ids_for(conn, ["VCPU", "DISK_GB"]),
                 _trait_ids(conn, ["HW_CPU_X86_AVX2"]))
    seen, stop = _selects(db)
    try:
        with db.read() as conn:
            again = (resource_classes.ids_for(conn, ["DISK_GB", "VCPU"]),
                     _trait_ids(conn, ["HW_CPU_X86_AVX2"]))
    finally:
        stop()
    assert again == first
    assert seen == []


def test_a_custom_trait_made_again_is_found_with_its_new_id(db):
    def make(conn):
        return traits.ensure(conn, "CUSTOM_AGAIN")[0].id

    first = db.run_write(make)
    with db.read() as conn:
        assert _trait_ids(conn, ["CUSTOM_AGAIN"]) == {"CUSTOM_AGAIN": first}
    db.run_write(lambda conn: traits.delete_trait(conn, "CUSTOM_AGAIN"))
    # Another row takes the next id, so the name's new row cannot reuse it.
    db.run_write(lambda conn: traits.ensure(conn, "CUSTOM_OTHER"))
    second = db.run_write(make)
    assert second != first
    with db.read() as conn:
        assert _trait_ids(conn, ["CUSTOM_AGAIN"]) == {"CUSTOM_AGAIN": second}


def test_a_custom_class_deleted_is_unknown_again(db):
    db.run_write(lambda conn: resource_classes.create(conn, "CUSTOM_GONE"))
    with db.read() as conn:
        assert "CUSTOM_GONE" in resource_classes.ids_for(conn, ["CUSTOM_GONE"])
    db.run_write(lambda conn: resource_classes.delete_class(conn, "CUSTOM_GONE"))
    with db.read() as conn:
        with pytest.raises(errors.UnknownResourceClass, match="CUSTOM_GONE"):
            resource_classes.ids_for(conn, ["CUSTOM_GONE"])
