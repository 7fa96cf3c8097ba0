"""The class naming a reservation, both ways."""
import uuid

from placement_lite.ledger import marker


def test_a_reservation_and_its_class_name_each_other():
    rid = str(uuid.uuid4())
    name = marker.class_name(rid)
    assert name == "CUSTOM_RESERVATION_" + rid.upper().replace("-", "_")
    assert marker.reservation_uuid(name) == rid
    # Any spelling of the id names the same class.
    assert marker.class_name(rid.upper().replace("-", "")) == name


def test_other_classes_name_no_reservation():
    for name in ("VCPU", "CUSTOM_RESERVATION_", "CUSTOM_RESERVATION_ABC",
                 "CUSTOM_RESERVATION_" + str(uuid.uuid4()).lower().replace("-", "_"),
                 "CUSTOM_RESERVATION_" + str(uuid.uuid4()).upper()):
        assert marker.reservation_uuid(name) is None
