"""A random world of providers, classes, traits, aggregates and
consumers, written through the API (ours or Placement's), and random
queries over it in the 1.39 language: shared by the sameness test
(against Placement itself) and the candidate readers' test (the copy of
the facts against SQL)."""
from __future__ import annotations

import io
import json
import random
import uuid as uuidlib

VERSION = "1.39"

CUSTOM_CLASSES = ["CUSTOM_GPU", "CUSTOM_FPGA"]
CUSTOM_TRAITS = ["CUSTOM_A", "CUSTOM_B", "CUSTOM_C"]
STD_TRAITS = ["HW_CPU_X86_AVX2", "COMPUTE_VOLUME_MULTI_ATTACH", "STORAGE_DISK_SSD"]
TRAITS = CUSTOM_TRAITS + STD_TRAITS
PROJECTS = ["proj-1", "proj-2", "proj-3"]
USERS = ["user-1", "user-2", "user-3"]
TYPES = ["INSTANCE", "MIGRATION", None]


def wsgi(app, method, path, body=None, version=VERSION, token="admin"):
    """(status, parsed body) of one request, straight through a WSGI app,
    or over HTTP when `app` is a base URL."""
    from wsgiref.util import setup_testing_defaults

    if isinstance(app, str):
        return _http(app, method, path, body, version, token)
    path, _, query = path.partition("?")
    data = json.dumps(body).encode() if body is not None else b""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
               "HTTP_X_AUTH_TOKEN": token,
               "HTTP_OPENSTACK_API_VERSION": f"placement {version}",
               "HTTP_ACCEPT": "application/json",
               "wsgi.input": io.BytesIO(data)}
    if body is not None:
        environ.update(CONTENT_TYPE="application/json", CONTENT_LENGTH=str(len(data)))
    setup_testing_defaults(environ)
    seen = []
    raw = b"".join(app(environ, lambda status, headers, exc=None: seen.append(status)))
    status = int(seen[0].split()[0])
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw.decode("utf-8", "replace")
    return status, parsed


def _http(base, method, path, body, version, token):
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    headers = {"X-Auth-Token": token, "OpenStack-API-Version": f"placement {version}",
               "Accept": "application/json"}
    if data is not None:
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(base + path, data=data, method=method,
                                     headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw.decode("utf-8", "replace")
    return status, parsed


# The world -----------------------------------------------------------------

class Builder:
    """Writes a random world through an API and remembers what it wrote."""

    def __init__(self, app, rng: random.Random):
        self.app, self.rng = app, rng
        self.providers: dict[str, dict] = {}  # uuid -> {name, inventory, parent}
        self.aggregates = [self.uuid() for _ in range(3)]
        self.consumers: dict[str, dict] = {}

    def uuid(self) -> str:
        """From the seed, so a seed names one world and one set of queries."""
        return str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))

    def call(self, method, path, body=None, version=VERSION, ok=(200, 201, 204)):
        status, out = wsgi(self.app, method, path, body, version)
        assert status in ok, (method, path, body, status, out)
        return status, out

    def provider(self, name, parent=None, inventory=None, traits=(), aggs=()):
        rp = self.uuid()
        body = {"name": name, "uuid": rp}
        if parent:
            body["parent_provider_uuid"] = parent
        self.call("POST", "/resource_providers", body)
        gen = 0
        if inventory:
            _s, out = self.call("PUT", f"/resource_providers/{rp}/inventories", {
                "resource_provider_generation": gen, "inventories": inventory})
            gen = out["resource_provider_generation"]
        if traits:
            _s, out = self.call("PUT", f"/resource_providers/{rp}/traits", {
                "resource_provider_generation": gen, "traits": sorted(traits)})
            gen = out["resource_provider_generation"]
        if aggs:
            _s, out = self.call("PUT", f"/resource_providers/{rp}/aggregates", {
                "resource_provider_generation": gen, "aggregates": sorted(aggs)})
        self.providers[rp] = {"name": name, "inventory": inventory or {},
                              "parent": parent, "traits": sorted(traits),
                              "aggregates": sorted(aggs)}
        return rp

    def inv(self, total, **extra):
        spec = {"total": total, "max_unit": extra.pop("max_unit", total)}
        spec.update(extra)
        return spec

    def build(self, sharing: bool = True):
        """A random world; without `sharing`, the providers that would
        share (disks, addresses) are trees of their own."""
        rng = self.rng
        shares = ["MISC_SHARES_VIA_AGGREGATE"] if sharing else []
        for rc in CUSTOM_CLASSES:
            self.call("PUT", f"/resource_classes/{rc}", version="1.7")
        for trait in CUSTOM_TRAITS:
            self.call("PUT", f"/traits/{trait}")
        for n in range(rng.randint(4, 6)):
            root_inv = {"MEMORY_MB": self.inv(rng.choice([2048, 4096, 8192]),
                                              reserved=rng.choice([0, 512]),
                                              allocation_ratio=rng.choice([1.0, 1.5]))}
            if rng.random() < 0.5:
                root_inv["VCPU"] = self.inv(rng.randint(2, 8),
                                            allocation_ratio=rng.choice([1.0, 4.0]))
            if rng.random() < 0.4:
                root_inv["DISK_GB"] = self.inv(rng.choice([100, 500]), step_size=10,
                                               min_unit=10, max_unit=100)
            root = self.provider(
                f"cn{n}", inventory=root_inv,
                traits=rng.sample(TRAITS, rng.randint(0, 2)),
                aggs=rng.sample(self.aggregates, rng.randint(0, 2)))
            for m in range(rng.randint(0, 2)):
                numa_inv = {"VCPU": self.inv(rng.randint(2, 6))}
                if rng.random() < 0.3:
                    numa_inv["CUSTOM_GPU"] = self.inv(rng.randint(1, 2))
                numa = self.provider(f"cn{n}_numa{m}", parent=root, inventory=numa_inv,
                                     traits=rng.sample(TRAITS, rng.randint(0, 2)))
                if rng.random() < 0.4:
                    self.provider(f"cn{n}_numa{m}_pf", parent=numa,
                                  inventory={"SRIOV_NET_VF": self.inv(rng.randint(2, 8))},
                                  traits=rng.sample(TRAITS, rng.randint(0, 1)))
        for s in range(2):
            self.provider(f"shared-disk{s}",
                          inventory={"DISK_GB": self.inv(rng.choice([200, 1000]),
                                                         max_unit=200)},
                          traits=shares + rng.sample(["STORAGE_DISK_SSD", "CUSTOM_C"], 1),
                          aggs=[self.aggregates[s]])
        self.provider("shared-ip", inventory={"IPV4_ADDRESS": self.inv(16, max_unit=4)},
                      traits=shares, aggs=self.aggregates[1:])
        self.provider("empty")
        self.consume()

    def _pick(self, rc):
        holders = [u for u, p in self.providers.items() if rc in p["inventory"]]
        return self.rng.choice(holders) if holders else None

    def _allocation(self):
        rng = self.rng
        out: dict = {}
        for rc, amount in (("VCPU", rng.randint(1, 2)), ("MEMORY_MB", 256),
                           ("DISK_GB", 10), ("CUSTOM_GPU", 1), ("SRIOV_NET_VF", 1),
                           ("IPV4_ADDRESS", 1)):
            if rc in ("VCPU", "MEMORY_MB") or rng.random() < 0.25:
                rp = self._pick(rc)
                if rp:
                    out.setdefault(rp, {"resources": {}})["resources"][rc] = amount
        return out

    def write(self, consumer, allocations):
        rng = self.rng
        state = self.consumers.get(consumer)
        ctype = state["type"] if state else rng.choice(TYPES)
        body = {"allocations": allocations,
                "project_id": state["project"] if state else rng.choice(PROJECTS),
                "user_id": state["user"] if state else rng.choice(USERS),
                "consumer_generation": state["generation"] if state else None}
        if ctype is not None:
            body["consumer_type"] = ctype
        # A consumer without a type is written at 1.37, before types.
        status, _out = wsgi(self.app, "PUT", f"/allocations/{consumer}", body,
                            "1.38" if ctype is not None else "1.37")
        if status == 204:
            self.consumers[consumer] = {"project": body["project_id"],
                                        "user": body["user_id"], "type": ctype,
                                        "generation": body["consumer_generation"] + 1
                                        if state else 1}
        return status

    def consume(self):
        rng = self.rng
        for _ in range(18):
            consumer = self.uuid()
            # Small providers fill up: a new consumer tries a few placements.
            for _attempt in range(4):
                if self.write(consumer, self._allocation()) == 204:
                    break
        for consumer in rng.sample(sorted(self.consumers), min(4, len(self.consumers))):
            self.write(consumer, self._allocation())  # moved: generation 2
        for consumer in rng.sample(sorted(self.consumers), min(2, len(self.consumers))):
            self.call("DELETE", f"/allocations/{consumer}")
            del self.consumers[consumer]
        # Two consumers written at once (POST /allocations).
        pair = [self.uuid(), self.uuid()]
        body = {c: {"allocations": self._allocation(), "project_id": "proj-post",
                    "user_id": "user-post", "consumer_generation": None,
                    "consumer_type": "INSTANCE"} for c in pair}
        status, _o = wsgi(self.app, "POST", "/allocations", body, "1.38")
        if status == 204:
            for c in pair:
                self.consumers[c] = {"project": "proj-post", "user": "user-post",
                                     "type": "INSTANCE", "generation": 1}


CANDIDATE_CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GPU", "SRIOV_NET_VF",
                     "IPV4_ADDRESS"]
AMOUNTS = {"VCPU": (1, 4), "MEMORY_MB": (128, 2048), "DISK_GB": (10, 100),
           "CUSTOM_GPU": (1, 2), "SRIOV_NET_VF": (1, 3), "IPV4_ADDRESS": (1, 2)}


def _amount(rng, rc):
    low, high = AMOUNTS[rc]
    if rc in ("MEMORY_MB", "DISK_GB"):
        return rng.choice([low, (low + high) // 2, high])
    return rng.randint(low, high)


def _resources(rng, k):
    return ",".join(f"{rc}:{_amount(rng, rc)}"
                    for rc in sorted(rng.sample(CANDIDATE_CLASSES, k)))


def _trait_filter(rng):
    pick = rng.random()
    if pick < 0.4:
        return rng.choice(TRAITS)
    if pick < 0.6:
        return "!" + rng.choice(TRAITS)
    if pick < 0.8:
        return "in:" + ",".join(rng.sample(TRAITS, 2))
    a, b = rng.sample(TRAITS, 2)
    return f"{a},!{b}"


def _member_of(rng, aggs):
    pick = rng.random()
    if pick < 0.4:
        return rng.choice(aggs)
    if pick < 0.7:
        return "in:" + ",".join(rng.sample(aggs, 2))
    return "!" + rng.choice(aggs)


def candidate_query(rng, world: Builder) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    roots = [u for u, p in world.providers.items() if p["parent"] is None]
    if rng.random() < 0.8:
        params.append(("resources", _resources(rng, rng.randint(1, 3))))
        if rng.random() < 0.35:
            params.append(("required", _trait_filter(rng)))
        if rng.random() < 0.2:
            params.append(("member_of", _member_of(rng, world.aggregates)))
        if rng.random() < 0.1:
            params.append(("in_tree", rng.choice(roots)))
    groups = rng.randint(0 if params else 1, 2)
    suffixes = rng.sample(["1", "2", "_NET", "_ACC"], groups)
    resourceless = False
    for i, suffix in enumerate(suffixes):
        if i == 1 and rng.random() < 0.2:
            # A resourceless group: only a trait, tied by same_subtree.
            params.append((f"required{suffix}", rng.choice(TRAITS)))
            resourceless = True
            continue
        params.append((f"resources{suffix}", _resources(rng, 1)))
        if rng.random() < 0.35:
            params.append((f"required{suffix}", _trait_filter(rng)))
        if rng.random() < 0.15:
            params.append((f"member_of{suffix}", _member_of(rng, world.aggregates)))
    if groups > 1 or (groups == 1 and rng.random() < 0.3):
        params.append(("group_policy", rng.choice(["none", "isolate"])))
    if resourceless or (groups > 1 and rng.random() < 0.3):
        params.append(("same_subtree", ",".join(suffixes)))
    if rng.random() < 0.15:
        params.append(("root_required", rng.choice(
            ["CUSTOM_A", "!CUSTOM_B", "HW_CPU_X86_AVX2,!CUSTOM_C"])))
    return params


def provider_query(rng, world: Builder) -> list[tuple[str, str]]:
    params: list[tuple[str, str]] = []
    roots = [u for u, p in world.providers.items() if p["parent"] is None]
    if rng.random() < 0.5:
        params.append(("resources", _resources(rng, rng.randint(1, 2))))
    if rng.random() < 0.4:
        params.append(("required", _trait_filter(rng)))
    if rng.random() < 0.3:
        params.append(("member_of", _member_of(rng, world.aggregates)))
    if rng.random() < 0.2:
        params.append(("in_tree", rng.choice(roots)))
    if rng.random() < 0.1:
        params.append(("name", world.providers[rng.choice(roots)]["name"]))
    if rng.random() < 0.1:
        params.append(("uuid", rng.choice(list(world.providers))))
    return params
