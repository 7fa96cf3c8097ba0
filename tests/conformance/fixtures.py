"""Gabbi fixtures for Placement 16.0.0's own gabbi files, written for us.

Each upstream file names one fixture class from Placement's test tree
(`fixtures: [AllocationFixture]`). The classes here carry the same names
and build the same world, but only through placement_lite's HTTP API, on
the live server the runner started for that file:

- `settings` says how the server must be configured for the file
  (policy profile, CORS); the runner reads it before starting the server.
- `start_fixture` exports the same `$ENVIRON` names upstream exports, then
  creates the same providers (same names, parents, aggregates, inventories
  with the same fields, traits, resource classes, consumers, users,
  projects and allocations) in the same order, so ids, generations and
  orderings the tests see come out as upstream's do.

Upstream writes its rows with its object layer, which has some effects
the API spells differently; the helpers below pick the API call with the
same effect, and say which where it matters (aggregates set without a
generation bump, inventory added one class at a time).

A request that does not answer as expected raises FixtureError, naming
the call: the runner reports it as a fixture failure of the whole file,
never as failures of the file's tests.
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
import uuid as uuidlib

from gabbi import fixture

# Set by the runner before a file's suite starts: the base URL of the
# server built for that file.
CURRENT = {"url": None}

# The admin token of noauth2, as Placement's own fixtures act as admin.
ADMIN_HEADERS = {"x-auth-token": "admin", "accept": "application/json"}


class FixtureError(Exception):
    """Building a file's world through the API failed."""


class _Sentinels:
    """One random uuid per name for the whole process, as upstream's
    `uuidsentinel` gives (`create_provider` defaults a provider's uuid
    to the sentinel of its name)."""

    def __init__(self):
        self._values: dict[str, str] = {}

    def __getattr__(self, name: str) -> str:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._values.setdefault(name, str(uuidlib.uuid4()))


uuids = _Sentinels()


def new_uuid() -> str:
    return str(uuidlib.uuid4())


class Api:
    """A small JSON client for the server under test, acting as admin."""

    def __init__(self, base_url: str):
        self.base_url = base_url.rstrip("/")

    def call(self, method: str, path: str, body=None, version: str = "1.0",
             expect=(200, 201, 204)):
        headers = dict(ADMIN_HEADERS)
        headers["openstack-api-version"] = f"placement {version}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["content-type"] = "application/json"
        req = urllib.request.Request(self.base_url + path, data=data,
                                     headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                status, raw = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read()
        if status not in expect:
            raise FixtureError(
                f"fixture request {method} {path} (placement {version}) "
                f"answered {status}, expected {'/'.join(map(str, expect))}: "
                f"{raw.decode(errors='replace')[:800]}")
        return json.loads(raw) if raw else None


class Provider:
    """What the builders need to remember of a provider they made."""

    def __init__(self, api: Api, name: str, uuid: str):
        self.api, self.name, self.uuid = api, name, uuid

    @property
    def generation(self) -> int:
        body = self.api.call("GET", f"/resource_providers/{self.uuid}",
                             version="1.14")
        return body["generation"]

    def set_aggregates(self, aggs):
        # Upstream's fixtures set aggregates without bumping the
        # provider's generation; the list-bodied PUT of microversions
        # before 1.19 is the API call that does the same.
        self.api.call("PUT", f"/resource_providers/{self.uuid}/aggregates",
                      list(aggs), version="1.1")


class Builder:
    """The operations of upstream's test_base helpers, over HTTP."""

    def __init__(self, api: Api):
        self.api = api
        self.consumers: list[dict] = []

    def create_provider(self, name, *aggs, uuid=None, parent=None) -> Provider:
        rp_uuid = uuid or getattr(uuids, name)
        body = {"name": name, "uuid": rp_uuid}
        if parent:
            body["parent_provider_uuid"] = parent
        self.api.call("POST", "/resource_providers", body, version="1.14",
                      expect=(201,))
        rp = Provider(self.api, name, rp_uuid)
        if aggs:
            rp.set_aggregates(aggs)
        return rp

    def _ensure(self, collection: str, name: str, put_version: str,
                get_version: str, found: int):
        """A custom name is created (201, or 204 when it already exists);
        a standard one must be there (`found`)."""
        if name.startswith("CUSTOM_"):
            self.api.call("PUT", f"/{collection}/{name}", version=put_version,
                          expect=(201, 204))
        else:
            self.api.call("GET", f"/{collection}/{name}", version=get_version,
                          expect=(found,))

    def ensure_rc(self, name: str):
        self._ensure("resource_classes", name, "1.7", "1.2", 200)

    def add_inventory(self, rp: Provider, rc: str, total: int, **kwargs):
        """One class added on its own (one generation bump), max_unit
        defaulting to total, other fields to Placement's defaults."""
        self.ensure_rc(rc)
        kwargs.setdefault("max_unit", total)
        body = {"resource_class": rc, "total": total, **kwargs}
        self.api.call("POST", f"/resource_providers/{rp.uuid}/inventories",
                      body, version="1.0", expect=(201,))

    def ensure_trait(self, name: str):
        self._ensure("traits", name, "1.6", "1.6", 204)

    def set_traits(self, rp: Provider, *traits):
        for name in traits:
            self.ensure_trait(name)
        self.api.call("PUT", f"/resource_providers/{rp.uuid}/traits",
                      {"traits": list(traits),
                       "resource_provider_generation": rp.generation},
                      version="1.6")

    def ensure_consumer(self, user: str, project: str, consumer_id=None) -> dict:
        """A consumer exists in Placement once it holds allocations; this
        remembers who it belongs to until set_allocation writes them."""
        consumer = {"uuid": consumer_id or new_uuid(), "user": user,
                    "project": project}
        self.consumers.append(consumer)
        return consumer

    def set_allocation(self, rp: Provider, consumer: dict, used: dict):
        """Replace the consumer's allocations with `used` on `rp` (before
        consumer generations, as upstream's replace_all ignores them)."""
        self.api.call("PUT", f"/allocations/{consumer['uuid']}",
                      {"allocations": {rp.uuid: {"resources": dict(used)}},
                       "project_id": consumer["project"],
                       "user_id": consumer["user"]},
                      version="1.12", expect=(204,))

    @staticmethod
    def create_user_and_project(prefix="fake"):
        return f"{prefix}-user", f"{prefix}-project"


# The variables upstream's base fixture exports for every file.
BASE_UUID_NAMES = (
    "RP_UUID", "RP_NAME", "RP_UUID1", "RP_NAME1", "RP_UUID2", "RP_NAME2",
    "PROJECT_ID", "ADMIN_PROJECT_ID", "SERVICE_PROJECT_ID", "USER_ID",
    "PROJECT_ID_ALT", "USER_ID_ALT", "INSTANCE_UUID", "MIGRATION_UUID",
    "CONSUMER_UUID", "PARENT_PROVIDER_UUID", "ALT_PARENT_PROVIDER_UUID",
)
BASE_VALUES = {
    "CUSTOM_RES_CLASS": "CUSTOM_IRON_NFV",
    "CUSTOM_RES_CLASS1": "CUSTOM_IRON_NFV1",
    "CUSTOM_RES_CLASS2": "CUSTOM_IRON_NFV2",
}


class APIFixture(fixture.GabbiFixture):
    """An empty placement, noauth2, the legacy (deprecated-rule) policy."""

    # Server settings for the file (placement_lite Settings fields).
    settings: dict = {"policy_profile": "legacy"}

    def start_fixture(self):
        if not CURRENT["url"]:
            raise FixtureError("no server: the conformance runner starts "
                               "one per file before its fixture")
        for name in BASE_UUID_NAMES:
            os.environ[name] = new_uuid()
        os.environ.update(BASE_VALUES)
        self.api = Api(CURRENT["url"])
        self.tb = Builder(self.api)
        self.build(self.tb)

    def build(self, tb: Builder):
        """Subclasses create the file's starting world here."""

    def stop_fixture(self):
        """The runner drops the server and its database after the file."""


class LegacyRBACPolicyFixture(APIFixture):
    settings = {"policy_profile": "legacy"}


class SecureRBACPolicyFixture(APIFixture):
    """New policy defaults with scope checks enforced."""
    settings = {"policy_profile": "secure-rbac"}


class OpenPolicyFixture(APIFixture):
    """Every rule but admin_api open to any authenticated caller."""
    settings = {"policy_profile": "open"}


class CORSFixture(APIFixture):
    """CORS on for one origin, allowing the microversion header only."""
    settings = {"policy_profile": "legacy",
                "cors_allowed_origin": ("http://valid.example.com",),
                "cors_allow_headers": ("openstack-api-version",)}


class AllocationFixture(APIFixture):
    """RP (VCPU 10, DISK_GB 2048 in steps of 10) with three consumers:
    CONSUMER_0 DISK_GB 1000, CONSUMER_ID VCPU 6 (both USER_ID), and
    ALT_CONSUMER_ID DISK_GB 20 + VCPU 1 (ALT_USER_ID), all in PROJECT_ID."""

    def build(self, tb):
        os.environ["ALT_USER_ID"] = new_uuid()
        project_id = os.environ["PROJECT_ID"]
        user_id = os.environ["USER_ID"]
        alt_user_id = os.environ["ALT_USER_ID"]

        rp = tb.create_provider(os.environ["RP_NAME"], uuid=os.environ["RP_UUID"])
        tb.add_inventory(rp, "DISK_GB", 2048, step_size=10, min_unit=10,
                         max_unit=1000)
        tb.add_inventory(rp, "VCPU", 10, max_unit=10)

        consumer1 = tb.ensure_consumer(user_id, project_id)
        tb.set_allocation(rp, consumer1, {"DISK_GB": 1000})
        os.environ["CONSUMER_0"] = consumer1["uuid"]

        consumer2 = tb.ensure_consumer(user_id, project_id)
        tb.set_allocation(rp, consumer2, {"VCPU": 6})
        os.environ["CONSUMER_ID"] = consumer2["uuid"]

        alt_consumer = tb.ensure_consumer(alt_user_id, project_id)
        os.environ["ALT_CONSUMER_ID"] = alt_consumer["uuid"]
        tb.set_allocation(rp, alt_consumer, {"DISK_GB": 20, "VCPU": 1})

        # A provider the file creates itself later.
        os.environ["ALT_RP_UUID"] = new_uuid()
        os.environ["ALT_RP_NAME"] = new_uuid()


class SharedStorageFixture(APIFixture):
    """cn1 (VCPU, MEMORY_MB, SSE/SSE2) and cn2 (VCPU, MEMORY_MB, DISK_GB)
    sharing DISK_GB from ss and ss2 through one aggregate; each compute
    node has two NUMA children, each with a PF child holding 8 VFs."""

    def build(self, tb):
        agg_uuid = new_uuid()
        cn1 = tb.create_provider("cn1", agg_uuid)
        cn2 = tb.create_provider("cn2", agg_uuid)
        ss = tb.create_provider("ss", agg_uuid)
        ss2 = tb.create_provider("ss2", agg_uuid)

        numa1_1 = tb.create_provider("numa1_1", parent=cn1.uuid)
        numa1_2 = tb.create_provider("numa1_2", parent=cn1.uuid)
        numa2_1 = tb.create_provider("numa2_1", parent=cn2.uuid)
        numa2_2 = tb.create_provider("numa2_2", parent=cn2.uuid)

        pf1_1 = tb.create_provider("pf1_1", parent=numa1_1.uuid)
        pf1_2 = tb.create_provider("pf1_2", parent=numa1_2.uuid)
        pf2_1 = tb.create_provider("pf2_1", parent=numa2_1.uuid)
        pf2_2 = tb.create_provider("pf2_2", parent=numa2_2.uuid)

        os.environ["AGG_UUID"] = agg_uuid
        for key, rp in (("CN1", cn1), ("CN2", cn2), ("SS", ss), ("SS2", ss2),
                        ("NUMA1_1", numa1_1), ("NUMA1_2", numa1_2),
                        ("NUMA2_1", numa2_1), ("NUMA2_2", numa2_2),
                        ("PF1_1", pf1_1), ("PF1_2", pf1_2),
                        ("PF2_1", pf2_1), ("PF2_2", pf2_2)):
            os.environ[f"{key}_UUID"] = rp.uuid

        for cn in (cn1, cn2):
            tb.add_inventory(cn, "VCPU", 24, allocation_ratio=16.0)
            tb.add_inventory(cn, "MEMORY_MB", 128 * 1024, allocation_ratio=1.5)
        tb.set_traits(cn1, "HW_CPU_X86_SSE", "HW_CPU_X86_SSE2")
        tb.add_inventory(cn2, "DISK_GB", 2000, reserved=100,
                         allocation_ratio=1.0)
        for shared in (ss, ss2):
            tb.add_inventory(shared, "DISK_GB", 2000, reserved=100,
                             allocation_ratio=1.0)
            tb.set_traits(shared, "MISC_SHARES_VIA_AGGREGATE")
        for pf in (pf1_1, pf1_2, pf2_1, pf2_2):
            tb.add_inventory(pf, "SRIOV_NET_VF", 8, allocation_ratio=1.0)


class NUMAAggregateFixture(APIFixture):
    """Resourceless cn1 (aggA) and cn2 (aggA, aggB), each with two NUMA
    children of 24 VCPU; ss1 shares DISK_GB in aggA, ss2 in aggC, and
    numa1_1 is in aggC."""

    def build(self, tb):
        agg_a, agg_b, agg_c = new_uuid(), new_uuid(), new_uuid()
        cn1 = tb.create_provider("cn1", agg_a)
        cn2 = tb.create_provider("cn2", agg_a, agg_b)
        ss1 = tb.create_provider("ss1", agg_a)
        ss2 = tb.create_provider("ss2", agg_c)

        numa1_1 = tb.create_provider("numa1_1", agg_c, parent=cn1.uuid)
        numa1_2 = tb.create_provider("numa1_2", parent=cn1.uuid)
        numa2_1 = tb.create_provider("numa2_1", parent=cn2.uuid)
        numa2_2 = tb.create_provider("numa2_2", parent=cn2.uuid)

        os.environ.update(AGGA_UUID=agg_a, AGGB_UUID=agg_b, AGGC_UUID=agg_c)
        for key, rp in (("CN1", cn1), ("CN2", cn2), ("SS1", ss1), ("SS2", ss2),
                        ("NUMA1_1", numa1_1), ("NUMA1_2", numa1_2),
                        ("NUMA2_1", numa2_1), ("NUMA2_2", numa2_2)):
            os.environ[f"{key}_UUID"] = rp.uuid

        for numa in (numa1_1, numa1_2, numa2_1, numa2_2):
            tb.add_inventory(numa, "VCPU", 24, allocation_ratio=16.0)
        for ss in (ss1, ss2):
            tb.add_inventory(ss, "DISK_GB", 2000, reserved=100,
                             allocation_ratio=1.0)
            tb.set_traits(ss, "MISC_SHARES_VIA_AGGREGATE")


class NUMANetworkFixture(APIFixture):
    """cn1: no inventory, two NUMA nodes (VCPU, MEMORY_MB with unit
    limits; 2 VCPU of numa0 used) with FPGA/VGPU children, an SR-IOV
    agent with two PHYSNET devices and an OVS agent with br_int; cn2:
    VCPU (3 used), MEMORY_MB, DISK_GB, CUSTOM_FOO, three NICs with VF
    PFs on PHYSNET1/2; ss1 shares DISK_GB with both through aggA."""

    # Pre-created by DeepNUMANetworkFixture under extra parents.
    cn1 = None
    cn2 = None

    def build(self, tb):
        self.make_entities(tb)

    def make_entities(self, tb):
        agg_a = new_uuid()
        os.environ["AGGA_UUID"] = agg_a

        ss1 = tb.create_provider("ss1", agg_a)
        tb.set_traits(ss1, "MISC_SHARES_VIA_AGGREGATE")
        tb.add_inventory(ss1, "DISK_GB", 2000)
        os.environ["SS1_UUID"] = ss1.uuid

        if not self.cn1:
            self.cn1 = tb.create_provider("cn1", agg_a)
        self.cn1.set_aggregates([agg_a])
        tb.set_traits(self.cn1, "COMPUTE_VOLUME_MULTI_ATTACH")
        os.environ["CN1_UUID"] = self.cn1.uuid

        numas = []
        for i in (0, 1):
            numa = tb.create_provider(f"numa{i}", parent=self.cn1.uuid)
            traits = ["HW_NUMA_ROOT"] + (["CUSTOM_FOO"] if i == 1 else [])
            tb.set_traits(numa, *traits)
            tb.add_inventory(numa, "VCPU", 4)
            numas.append(numa)
            os.environ[f"NUMA{i}_UUID"] = numa.uuid
        tb.add_inventory(numas[0], "MEMORY_MB", 2048, min_unit=512,
                         step_size=256)
        tb.add_inventory(numas[1], "MEMORY_MB", 2048, min_unit=256,
                         max_unit=1024)
        user, proj = tb.create_user_and_project(prefix="numafx")
        consumer = tb.ensure_consumer(user, proj)
        tb.set_allocation(numas[0], consumer, {"VCPU": 2})

        fpga = tb.create_provider("fpga0", parent=numas[0].uuid)
        tb.add_inventory(fpga, "FPGA", 1)
        os.environ["FPGA0_UUID"] = fpga.uuid

        pgpu = tb.create_provider("pgpu0", parent=numas[0].uuid)
        tb.add_inventory(pgpu, "VGPU", 8)
        os.environ["PGPU0_UUID"] = pgpu.uuid

        for i in (0, 1):
            fpga = tb.create_provider(f"fpga1_{i}", parent=numas[1].uuid)
            tb.add_inventory(fpga, "FPGA", 1)
            os.environ[f"FPGA1_{i}_UUID"] = fpga.uuid

        agent = tb.create_provider("sriov_agent", parent=self.cn1.uuid)
        tb.set_traits(agent, "CUSTOM_VNIC_TYPE_DIRECT")
        os.environ["SRIOV_AGENT_UUID"] = agent.uuid

        for i in (1, 2):
            dev = tb.create_provider(f"esn{i}", parent=agent.uuid)
            tb.set_traits(dev, f"CUSTOM_PHYSNET{i}")
            tb.add_inventory(dev, "NET_BW_EGR_KILOBIT_PER_SEC", 10000 * i)
            os.environ[f"ESN{i}_UUID"] = dev.uuid

        agent = tb.create_provider("ovs_agent", parent=self.cn1.uuid)
        tb.set_traits(agent, "CUSTOM_VNIC_TYPE_NORMAL")
        os.environ["OVS_AGENT_UUID"] = agent.uuid

        dev = tb.create_provider("br_int", parent=agent.uuid)
        tb.set_traits(dev, "CUSTOM_PHYSNET0")
        tb.add_inventory(dev, "NET_BW_EGR_KILOBIT_PER_SEC", 1000)
        os.environ["BR_INT_UUID"] = dev.uuid

        if not self.cn2:
            self.cn2 = tb.create_provider("cn2")
        self.cn2.set_aggregates([agg_a])
        tb.add_inventory(self.cn2, "VCPU", 8)
        consumer = tb.ensure_consumer(user, proj)
        tb.set_allocation(self.cn2, consumer, {"VCPU": 3})
        tb.add_inventory(self.cn2, "MEMORY_MB", 2048, min_unit=1024,
                         step_size=128)
        tb.add_inventory(self.cn2, "DISK_GB", 1000)
        tb.set_traits(self.cn2, "CUSTOM_FOO")
        os.environ["CN2_UUID"] = self.cn2.uuid

        nics = []
        for i in (1, 2, 3):
            nic = tb.create_provider(f"nic{i}", parent=self.cn2.uuid)
            tb.set_traits(nic, "CUSTOM_HW_NIC_ROOT")
            nics.append(nic)
            os.environ[f"NIC{i}_UUID"] = nic.uuid
        for i in (1, 2):
            suf = f"1_{i}"
            pf = tb.create_provider(f"pf{suf}", parent=nics[0].uuid)
            tb.set_traits(pf, f"CUSTOM_PHYSNET{i}")
            tb.add_inventory(pf, "CUSTOM_VF", 4)
            os.environ[f"PF{suf}_UUID"] = pf.uuid
        for i in (0, 1, 2, 3):
            suf = f"2_{i + 1}"
            pf = tb.create_provider(f"pf{suf}", parent=nics[1].uuid)
            tb.set_traits(pf, f"CUSTOM_PHYSNET{(i % 2) + 1}")
            tb.add_inventory(pf, "CUSTOM_VF", 2)
            os.environ[f"PF{suf}_UUID"] = pf.uuid
        suf = "3_1"
        pf = tb.create_provider(f"pf{suf}", parent=nics[2].uuid)
        tb.set_traits(pf, "CUSTOM_PHYSNET1")
        tb.add_inventory(pf, "CUSTOM_VF", 8)
        os.environ[f"PF{suf}_UUID"] = pf.uuid


class DeepNUMANetworkFixture(NUMANetworkFixture):
    """NUMANetworkFixture with cn1 under p1 and cn2 under p2, both
    children of gp1 (all three without resources)."""

    def make_entities(self, tb):
        grandparent1 = tb.create_provider("gp1")
        parent1 = tb.create_provider("p1", parent=grandparent1.uuid)
        parent2 = tb.create_provider("p2", parent=grandparent1.uuid)
        self.cn1 = tb.create_provider("cn1", parent=parent1.uuid)
        self.cn2 = tb.create_provider("cn2", parent=parent2.uuid)
        super().make_entities(tb)


class NonSharedStorageFixture(APIFixture):
    """Three compute nodes with VCPU, MEMORY_MB and local DISK_GB; three
    aggregate uuids exported but not yet used."""

    def build(self, tb):
        agg_a, agg_b, agg_c = new_uuid(), new_uuid(), new_uuid()
        os.environ.update(AGGA_UUID=agg_a, AGGB_UUID=agg_b, AGGC_UUID=agg_c)
        cns = [tb.create_provider(name) for name in ("cn1", "cn2", "cn3")]
        for i, cn in enumerate(cns, 1):
            os.environ[f"CN{i}_UUID"] = cn.uuid
        for cn in cns:
            tb.add_inventory(cn, "VCPU", 24)
            tb.add_inventory(cn, "MEMORY_MB", 128 * 1024)
            tb.add_inventory(cn, "DISK_GB", 2000)


class GranularFixture(APIFixture):
    """cn_left (aggA), cn_middle (aggA, aggB), cn_right (aggB, aggC) with
    the inventories and traits of upstream's diagram; shr_disk_1 (aggA,
    SSD), shr_disk_2 (aggA, aggB) and shr_net (aggC) sharing."""

    def build(self, tb):
        tb.ensure_rc("CUSTOM_NET_MBPS")
        os.environ.update(AGGA=uuids.aggA, AGGB=uuids.aggB, AGGC=uuids.aggC)

        cn_left = tb.create_provider("cn_left", uuids.aggA)
        os.environ["CN_LEFT"] = cn_left.uuid
        tb.add_inventory(cn_left, "VCPU", 8)
        tb.add_inventory(cn_left, "MEMORY_MB", 4096)
        tb.add_inventory(cn_left, "DISK_GB", 500)
        tb.add_inventory(cn_left, "VGPU", 8)
        tb.add_inventory(cn_left, "SRIOV_NET_VF", 8)
        tb.add_inventory(cn_left, "CUSTOM_NET_MBPS", 4000)
        tb.set_traits(cn_left, "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2",
                      "HW_GPU_API_DXVA", "HW_NIC_DCB_PFC", "CUSTOM_FOO")

        cn_middle = tb.create_provider("cn_middle", uuids.aggA, uuids.aggB)
        os.environ["CN_MIDDLE"] = cn_middle.uuid
        tb.add_inventory(cn_middle, "VCPU", 8)
        tb.add_inventory(cn_middle, "MEMORY_MB", 4096)
        tb.add_inventory(cn_middle, "SRIOV_NET_VF", 8)
        tb.add_inventory(cn_middle, "CUSTOM_NET_MBPS", 4000)
        tb.set_traits(cn_middle, "HW_CPU_X86_AVX", "HW_CPU_X86_AVX2",
                      "HW_CPU_X86_SSE", "HW_NIC_ACCEL_TLS")

        cn_right = tb.create_provider("cn_right", uuids.aggB, uuids.aggC)
        os.environ["CN_RIGHT"] = cn_right.uuid
        tb.add_inventory(cn_right, "VCPU", 8)
        tb.add_inventory(cn_right, "MEMORY_MB", 4096)
        tb.add_inventory(cn_right, "DISK_GB", 500)
        tb.add_inventory(cn_right, "VGPU", 8, max_unit=2)
        tb.set_traits(cn_right, "HW_CPU_X86_MMX", "HW_GPU_API_DXVA",
                      "CUSTOM_DISK_SSD")

        shr_disk_1 = tb.create_provider("shr_disk_1", uuids.aggA)
        os.environ["SHR_DISK_1"] = shr_disk_1.uuid
        tb.add_inventory(shr_disk_1, "DISK_GB", 1000)
        tb.set_traits(shr_disk_1, "MISC_SHARES_VIA_AGGREGATE", "CUSTOM_DISK_SSD")

        shr_disk_2 = tb.create_provider("shr_disk_2", uuids.aggA, uuids.aggB)
        os.environ["SHR_DISK_2"] = shr_disk_2.uuid
        tb.add_inventory(shr_disk_2, "DISK_GB", 1000)
        tb.set_traits(shr_disk_2, "MISC_SHARES_VIA_AGGREGATE")

        shr_net = tb.create_provider("shr_net", uuids.aggC)
        os.environ["SHR_NET"] = shr_net.uuid
        tb.add_inventory(shr_net, "SRIOV_NET_VF", 16)
        tb.add_inventory(shr_net, "CUSTOM_NET_MBPS", 40000)
        tb.set_traits(shr_net, "MISC_SHARES_VIA_AGGREGATE")


class NeutronQoSMultiSegmentFixture(APIFixture):
    """Four compute trees as Neutron builds them with QoS minimum
    bandwidth and packet rate on a multi-segment network: compute0 on
    PHYSNET_OTHER, compute1 on segment 1, compute2 on segment 2, and
    compute3 on both with little bandwidth."""

    OVS_NORMAL = ("CUSTOM_VNIC_TYPE_NORMAL",)
    SRIOV_TYPES = ("CUSTOM_VNIC_TYPE_DIRECT", "CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL",
                   "CUSTOM_VNIC_TYPE_MACVTAP")

    def _compute(self, tb, name):
        compute = tb.create_provider(name)
        os.environ[name] = compute.uuid
        tb.add_inventory(compute, "VCPU", 8)
        tb.add_inventory(compute, "MEMORY_MB", 4096)
        tb.add_inventory(compute, "DISK_GB", 500)
        ovs = tb.create_provider(f"{name}:Open vSwitch agent", parent=compute.uuid)
        os.environ[f"{name}:ovs_agent"] = ovs.uuid
        tb.add_inventory(ovs, "NET_PACKET_RATE_KILOPACKET_PER_SEC", 1000)
        tb.set_traits(ovs, *self.OVS_NORMAL)
        return compute, ovs

    def _device(self, tb, agent, name, env, bandwidth, *traits):
        """A bridge or a PF below `agent` (named `name`, exported as `env`)
        with `bandwidth` kbit/s each way."""
        rp = tb.create_provider(name, parent=agent.uuid)
        os.environ[env] = rp.uuid
        tb.add_inventory(rp, "NET_BW_EGR_KILOBIT_PER_SEC", bandwidth)
        tb.add_inventory(rp, "NET_BW_IGR_KILOBIT_PER_SEC", bandwidth)
        tb.set_traits(rp, *traits)

    def _bridge(self, tb, ovs, compute_name, bridge, env, bandwidth, physnet):
        self._device(tb, ovs, f"{compute_name}:Open vSwitch agent:{bridge}",
                     f"{compute_name}:{env}", bandwidth, *self.OVS_NORMAL, physnet)

    def _sriov_agent(self, tb, compute, compute_name):
        agent = tb.create_provider(f"{compute_name}:NIC Switch agent",
                                   parent=compute.uuid)
        tb.set_traits(agent, *self.SRIOV_TYPES)
        return agent

    def _pf(self, tb, agent, compute_name, dev, env, bandwidth, physnet):
        self._device(tb, agent, f"{compute_name}:NIC Switch agent:{dev}",
                     f"{compute_name}:{env}", bandwidth, *self.SRIOV_TYPES, physnet)

    def build(self, tb):
        agents = {}
        for name, physnet in (("compute0", "CUSTOM_PHYSNET_OTHER"),
                              ("compute1", "CUSTOM_PHYSNET_MSN_S1"),
                              ("compute2", "CUSTOM_PHYSNET_MSN_S2")):
            compute, ovs = self._compute(tb, name)
            self._bridge(tb, ovs, name, "br-ex", "br_ex", 5000, physnet)
            agent = self._sriov_agent(tb, compute, name)
            os.environ[f"{name}:sriov_agent"] = agent.uuid
            agents[name] = agent
            self._pf(tb, agent, name, "enp129s0f0", "pf0", 10000, physnet)

        compute3, ovs = self._compute(tb, "compute3")
        self._bridge(tb, ovs, "compute3", "br-ex", "br_ex", 1000,
                     "CUSTOM_PHYSNET_MSN_S1")
        self._bridge(tb, ovs, "compute3", "br-ex2", "br_ex2", 1000,
                     "CUSTOM_PHYSNET_MSN_S2")
        agent = self._sriov_agent(tb, compute3, "compute3")
        # Upstream exports compute2's agent under compute3's name; the
        # files' expectations are written against that value.
        os.environ["compute3:sriov_agent"] = agents["compute2"].uuid
        self._pf(tb, agent, "compute3", "enp129s0f0", "pf0", 1000,
                 "CUSTOM_PHYSNET_MSN_S1")
        self._pf(tb, agent, "compute3", "enp129s0f1", "pf1", 1000,
                 "CUSTOM_PHYSNET_MSN_S2")
