"""Gabbi fixtures: each YAML file gets a fresh database and app.

A gabbit names its fixture in `fixtures:`. APIFixture is the default
(noauth2, legacy policy); subclasses change settings for one file.
Useful uuids are exported to the environment so YAML can say
$ENVIRON['RP_UUID'].
"""
from __future__ import annotations

import os
import uuid
from contextlib import ExitStack

from gabbi import fixture

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import fresh_database

# The backend the runner in test_api.py is currently exercising.
CURRENT = {"backend": "sqlite", "app": None}

UUID_NAMES = [
    "RP_UUID", "RP_UUID1", "RP_UUID2", "RP_UUID3", "RP_UUID4", "RP_NAME",
    "PARENT_UUID", "CHILD_UUID", "GRANDCHILD_UUID", "ALT_PARENT_UUID",
    "SHARED_UUID", "CONSUMER_UUID", "CONSUMER_UUID1", "CONSUMER_UUID2",
    "CONSUMER_UUID3", "PROJECT_ID", "ALT_PROJECT_ID", "USER_ID", "ALT_USER_ID",
    "AGGA_UUID", "AGGB_UUID", "AGGC_UUID", "AGGD_UUID", "INSTANCE_UUID",
    "MIGRATION_UUID", "CN1_UUID", "CN2_UUID", "CN3_UUID", "NUMA0_UUID",
    "NUMA1_UUID", "PF0_UUID", "PF1_UUID", "PF2_UUID", "PF3_UUID", "SS_UUID",
    "SS2_UUID", "FPGA0_UUID", "FPGA1_UUID", "PGPU_UUID",
] + [f"UUID{i}" for i in range(1, 21)]


def wsgi_app(environ, start_response):
    """The intercept target: forwards to the app of the running file."""
    app = CURRENT["app"]
    if app is None:
        raise RuntimeError("no gabbi fixture has started an app")
    return app(environ, start_response)


def intercept():
    return wsgi_app


class APIFixture(fixture.GabbiFixture):
    settings_overrides: dict = {}

    def start_fixture(self):
        self._stack = ExitStack()
        db = self._stack.enter_context(fresh_database(CURRENT["backend"]))
        settings = Settings(db=db.url, **self.settings_overrides)
        CURRENT["app"] = create_app(settings, db)
        for name in UUID_NAMES:
            os.environ[name] = str(uuid.uuid4())
        self.prepare(db)

    def prepare(self, db):
        """Subclasses add rows the file starts from."""

    def stop_fixture(self):
        CURRENT["app"] = None
        self._stack.close()


class SecureRBACFixture(APIFixture):
    settings_overrides = {"policy_profile": "secure-rbac"}


class SecureRBACQuotaFixture(APIFixture):
    """secure-rbac, on a deployment that enforces quota (flat)."""
    settings_overrides = {"policy_profile": "secure-rbac", "quota_enforce": True}


class OpenPolicyFixture(APIFixture):
    settings_overrides = {"policy_profile": "open"}


class AllocatedProviderFixture(APIFixture):
    """RP_UUID ('allocated') with VCPU 8, DISK_GB 100 and CUSTOM_MAGIC 10,
    of which CONSUMER_UUID uses VCPU 4, DISK_GB 20 and CUSTOM_MAGIC 2.

    The rows are written directly so the provider-side checks (inventory
    in use, provider in use, class in use) are tested on their own.
    """

    def prepare(self, db):
        from sqlalchemy import insert

        from placement_lite.db import tables as t
        from placement_lite.db import usage_summary
        from placement_lite.ledger import inventories, providers, resource_classes

        with db.write() as conn:
            resource_classes.create(conn, "CUSTOM_MAGIC")
            rp = providers.create_provider(conn, "allocated", os.environ["RP_UUID"])
            inventories.replace_inventories(conn, rp, {
                "VCPU": inventories.make("VCPU", {"total": 8}),
                "DISK_GB": inventories.make("DISK_GB", {"total": 100}),
                "CUSTOM_MAGIC": inventories.make("CUSTOM_MAGIC", {"total": 10}),
            }, generation=0)
            project = conn.execute(insert(t.projects).values(
                external_id=os.environ["PROJECT_ID"])).inserted_primary_key[0]
            user = conn.execute(insert(t.users).values(
                external_id=os.environ["USER_ID"])).inserted_primary_key[0]
            consumer = conn.execute(insert(t.consumers).values(
                uuid=os.environ["CONSUMER_UUID"], project_id=project,
                user_id=user, generation=1)).inserted_primary_key[0]
            ids = resource_classes.ids_for(conn, ["VCPU", "DISK_GB", "CUSTOM_MAGIC"])
            conn.execute(insert(t.allocations), [
                {"resource_provider_id": rp.id, "consumer_id": consumer,
                 "resource_class_id": ids[name], "used": used}
                for name, used in (("VCPU", 4), ("DISK_GB", 20),
                                   ("CUSTOM_MAGIC", 2))])
            # Written around the ledger: its usage sums are recomputed.
            usage_summary.rebuild(conn)


class CORSFixture(APIFixture):
    """CORS on for one origin, with the headers a browser client sends."""
    settings_overrides = {
        "cors_allowed_origin": ("http://valid.example.com",),
        "cors_allow_headers": ("x-auth-token", "openstack-api-version"),
    }


class MetricsFixture(APIFixture):
    settings_overrides = {"metrics": True}


def _seed_claims(db, claims):
    """Write allocations straight through the ledger (no quota check):
    claims is [(project, VCPU used, consumer type)]."""
    from placement_lite.ledger import allocations as ledger_allocations
    from tests import factories

    with db.write() as conn:
        rp = factories.provider_with(conn, VCPU=1000)["uuid"]
        ledger_allocations.replace(conn, [
            ledger_allocations.ConsumerWrite(
                str(uuid.uuid4()), project, "seed-user", {rp: {"VCPU": used}},
                consumer_type=ctype)
            for project, used, ctype in claims])


class QuotaFlatFixture(APIFixture):
    """Flat quota; project proj-p already uses 4 VCPU in one INSTANCE."""
    settings_overrides = {"quota_enforce": True, "quota_model": "flat",
                          "quota_resource_usage": {"cores": "class:VCPU"}}

    def prepare(self, db):
        _seed_claims(db, [("proj-p", 4, "INSTANCE")])


class QuotaStrictFixture(APIFixture):
    """strict_two_level quota; proj-b and proj-c already use 8 VCPU each."""
    settings_overrides = {"quota_enforce": True,
                          "quota_model": "strict_two_level"}

    def prepare(self, db):
        _seed_claims(db, [("proj-b", 8, None), ("proj-c", 8, None)])


class LeasePolicyFixture(APIFixture):
    """The /v1 lease-policy service with Blazar's static token."""
    settings_overrides = {
        "lease_token": "lease-secret",
        "lease_max_duration_hours": 24,
        "lease_exempt_projects": ("vip",),
        "lease_max_amount": {"physical:host": 4},
    }


class CandidateBoundsFixture(APIFixture):
    settings_overrides = {"max_allocation_candidates": 3,
                          "randomize_allocation_candidates": True}


class ReservationCalendarFixture(APIFixture):
    """RP_UUID ('cn1') with VCPU 8, of which 2 are allocated, and three
    reservations written as the ledger stores them, all in 2100:
    UUID1 (PROJECT_ID) VCPU 4 over 00:00-02:00 on 1 January, UUID2
    (ALT_PROJECT_ID) VCPU 3 over 01:00-03:00 (together 9 of the 6 left:
    short over 01:00-02:00), and UUID3 (PROJECT_ID) MEMORY_MB 512 on
    RP_UUID1 ('cn2') over 2 January."""

    def prepare(self, db):
        from placement_lite.api.times import parse
        from tests import factories
        from tests.reservation_rows import allocate, reservation

        day = parse("2100-01-01T00:00:00Z", "day")
        with db.write() as conn:
            cn1 = factories.provider(conn, "cn1", os.environ["RP_UUID"])
            factories.inventory(conn, cn1, "VCPU", 8)
            cn2 = factories.provider(conn, "cn2", os.environ["RP_UUID1"])
            factories.inventory(conn, cn2, "MEMORY_MB", 4096)
            allocate(conn, cn1, "VCPU", 2, project=os.environ["PROJECT_ID"])
            reservation(conn, day, day + 7200, {cn1["id"]: {"VCPU": 4}},
                        project=os.environ["PROJECT_ID"], uuid=os.environ["UUID1"])
            reservation(conn, day + 3600, day + 10800, {cn1["id"]: {"VCPU": 3}},
                        project=os.environ["ALT_PROJECT_ID"], uuid=os.environ["UUID2"])
            reservation(conn, day + 86400, day + 2 * 86400,
                        {cn2["id"]: {"MEMORY_MB": 512}},
                        project=os.environ["PROJECT_ID"], uuid=os.environ["UUID3"])


class ReservedWindowsFixture(APIFixture):
    """For GET /reservations/allocation_candidates, written straight into
    the tables on 2100-01-01 (UTC), far ahead of any clock:

      cn1 (RP_UUID1, aggregate AGGA_UUID): VCPU 16
      cn2 (RP_UUID2, aggregate AGGA_UUID): VCPU 8
      ss  (SS_UUID, aggregate AGGA_UUID, MISC_SHARES_VIA_AGGREGATE): DISK_GB 1000

      reservation 1: VCPU 8 on cn1, 09:00 to 17:00
      reservation 2: VCPU 4 on cn1, 12:00 to 20:00 (so 12 from 12:00 to 17:00)
      reservation 3: VCPU 8 on cn2, all of 2100-01-02
      reservation 4: DISK_GB 900 on ss, 13:00 to 14:00
    """

    def prepare(self, db):
        from placement_lite.ledger import (
            aggregates, inventories, providers, resource_classes, traits)
        from tests.reserved_rows import reservation

        day = 4_102_444_800  # 2100-01-01T00:00:00Z
        hour = 3600
        made = {}
        with db.write() as conn:
            for name, env, inventory in (("cn1", "RP_UUID1", {"VCPU": 16}),
                                         ("cn2", "RP_UUID2", {"VCPU": 8}),
                                         ("ss", "SS_UUID", {"DISK_GB": 1000})):
                rp = providers.create_provider(conn, name, os.environ[env])
                inventories.replace_inventories(conn, rp, {
                    rc: inventories.make(rc, {"total": total})
                    for rc, total in inventory.items()}, generation=0)
                aggregates.set_provider_aggregates(conn, rp, [os.environ["AGGA_UUID"]])
                made[name] = rp.id
            traits.set_provider_traits(
                conn, providers.get_by_id(conn, made["ss"]),
                ["MISC_SHARES_VIA_AGGREGATE"], None)
            ids = resource_classes.ids_for(conn, ["VCPU", "DISK_GB"])
            vcpu, disk = ids["VCPU"], ids["DISK_GB"]
            reservation(conn, day + 9 * hour, day + 17 * hour, {(made["cn1"], vcpu): 8})
            reservation(conn, day + 12 * hour, day + 20 * hour, {(made["cn1"], vcpu): 4})
            reservation(conn, day + 24 * hour, day + 48 * hour, {(made["cn2"], vcpu): 8})
            reservation(conn, day + 13 * hour, day + 14 * hour, {(made["ss"], disk): 900})
