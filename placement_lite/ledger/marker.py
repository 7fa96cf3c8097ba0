"""The resource class that names a reservation: CUSTOM_RESERVATION_<ID>.

Blazar's instance reservations tell the scheduler which reserved room an
instance may take through a custom class named after the reservation (its
id upper-cased, dashes as underscores), requested by the reservation's
flavor. A reservation here answers to the same name, so a flavor made for
it works unchanged (docs/reservations.md, "Using a reservation").
"""
from __future__ import annotations

import re
import uuid as uuidlib
from typing import Optional

PREFIX = "CUSTOM_RESERVATION_"
_NAME = re.compile(PREFIX + r"([0-9A-F]{8}_[0-9A-F]{4}_[0-9A-F]{4}_[0-9A-F]{4}_[0-9A-F]{12})")


def class_name(reservation_uuid: str) -> str:
    """The class naming the reservation `reservation_uuid`."""
    return PREFIX + str(uuidlib.UUID(reservation_uuid)).upper().replace("-", "_")


def reservation_uuid(name: str) -> Optional[str]:
    """The reservation a class name names (its uuid, in the canonical
    spelling), or None for any other class."""
    found = _NAME.fullmatch(name)
    if found is None:
        return None
    return str(uuidlib.UUID(found.group(1).replace("_", "-")))
