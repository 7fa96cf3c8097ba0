"""Hostile requests for every documented operation, and what must hold
after each (used by tests/test_fuzz.py).

A request is drawn from the OpenAPI document the server publishes: an
operation, path parameters (known ids in any spelling, or junk), a query
string and a body shaped by the operation's own schema, with some leaves
swapped for hostile values: NaN and the infinities, integers far past 64
bits and negative ones, lone surrogates, NUL, long strings, deep nesting,
10,000-item arrays, thousands of repeated parameters, mixed-case and
dash-less uuids. Plausible values come from a small world created
through the API first, so requests get past "not found" into the code
that writes.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import shlex
import urllib.error
import urllib.parse
import urllib.request
import uuid as uuidlib
from dataclasses import dataclass, field

from hypothesis import strategies as st
from sqlalchemy import create_engine, func, select

from placement_lite.db import tables as t

UUID_PATTERN = "[0-9a-fA-F]{8}"
NAN, INF = float("nan"), float("inf")
# Weighted by repetition towards what has broken servers before: NaN and
# the infinities, integers past 64 bits, lone surrogates, NUL, long text.
HOSTILE_NUMBERS = [NAN, NAN, INF, -INF, 2 ** 63, -(2 ** 63) - 1, 10 ** 30,
                   -(10 ** 30), 2 ** 31, -1, -2 ** 31, 0, 10 ** 400]
HOSTILE_STRINGS = ["\ud800", "a\udfffb", "\udbff\udfff\ud800", "\udc00", "bad\ud800x",
                   "a\x00b", "\x00", "x" * 5000, "x" * 256, "", " ", "é漢字🙂",
                   "../../etc", "%00", "' OR 1=1 --", "CUSTOM_" + "A" * 300, "in:",
                   "!", "in:,", "VCPU:-1", "VCPU:99999999999999999999", "VCPU:1,VCPU:2"]
VERSIONS = ["latest"] * 30 + ["1.0", "1.10", "1.14", "1.26", "1.28", "1.33", "1.38",
                              "1.39", "1.40", "2.0", "latest latest"]
TOKEN_HEADERS = {"X-Auth-Token": "admin"}


def spell(value: str, how: int) -> str:
    """A uuid as callers spell it: canonical, upper, dash-less, both."""
    return [value, value.upper(), value.replace("-", ""),
            value.replace("-", "").upper(), "{%s}" % value][how % 5]


@dataclass
class World:
    providers: list = field(default_factory=list)
    consumers: list = field(default_factory=list)
    aggregates: list = field(default_factory=list)
    classes: list = field(default_factory=lambda: [
        "VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_FUZZ"])
    traits: list = field(default_factory=lambda: [
        "HW_CPU_X86_AVX2", "CUSTOM_FUZZ_TRAIT", "STORAGE_DISK_SSD"])
    projects: list = field(default_factory=lambda: ["proj-a", "proj-b"])
    users: list = field(default_factory=lambda: ["user-a"])
    ids: dict = field(default_factory=dict)   # path parameter name -> known ids


# -- HTTP ---------------------------------------------------------------------

@dataclass
class Sent:
    method: str
    path: str          # already encoded, with the query string
    body: bytes | None
    headers: dict

    def curl(self, base: str) -> str:
        """A shell command that sends this request again. A body with long
        runs (5000 x's, 10,000 items) is written by a python3 expression
        that repeats them, so the command stays short and exact."""
        parts = ["curl -si -X", self.method, shlex.quote(base + self.path)]
        for name, value in self.headers.items():
            parts += ["-H", shlex.quote(f"{name}: {value}")]
        if self.body is None:
            return " ".join(parts)
        if len(self.body) <= 2000:
            return " ".join(parts + ["--data-binary", shlex.quote(
                self.body.decode("utf-8", "backslashreplace"))])
        pieces = []
        for match in re.finditer(rb"(.{1,200}?)\1{20,}|.", self.body, re.S):
            unit = match.group(1)
            if unit is not None:
                pieces.append((unit, len(match.group(0)) // len(unit)))
                rest = match.group(0)[len(unit) * pieces[-1][1]:]
                if rest:
                    pieces.append((rest, 1))
            elif pieces and pieces[-1][1] == 1:
                pieces[-1] = (pieces[-1][0] + match.group(0), 1)
            else:
                pieces.append((match.group(0), 1))
        expr = "+".join(repr(b) if n == 1 else f"{b!r}*{n}" for b, n in pieces)
        return (f"python3 -c {shlex.quote(f'import sys; sys.stdout.buffer.write({expr})')}"
                f" | {' '.join(parts)} --data-binary @-")


# One request may not take longer than this, however hostile: a caller
# must not be able to make the server spend minutes on it.
SLOW_SECONDS = 10.0


def send(base: str, sent: Sent, timeout: float = 60.0):
    """(status, headers, raw bytes); status 0 when no answer came in time."""
    req = urllib.request.Request(base + sent.path, data=sent.body,
                                 method=sent.method, headers=sent.headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()
    except (TimeoutError, OSError) as exc:
        return 0, {}, repr(exc).encode()


def api(base: str, method: str, path: str, body=None, version="latest"):
    headers = {**TOKEN_HEADERS, "OpenStack-API-Version": f"placement {version}"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    status, _h, raw = send(base, Sent(method, path, data, headers))
    return status, (json.loads(raw) if raw else None)


def seed(base: str) -> World:
    """A small world through the API: a tree with inventories, traits and
    aggregates, a sharing provider, claims, and the /v3 records."""
    world = World()
    for name in ("CUSTOM_FUZZ",):
        api(base, "PUT", f"/resource_classes/{name}")
    api(base, "PUT", "/traits/CUSTOM_FUZZ_TRAIT")
    parent = None
    for n in range(4):
        rp = str(uuidlib.uuid4())
        body = {"name": f"fuzz-{n}", "uuid": rp}
        if n == 1:
            body["parent_provider_uuid"] = parent
        status, got = api(base, "POST", "/resource_providers", body)
        assert status == 200, got
        parent = parent or rp
        status, got = api(base, "PUT", f"/resource_providers/{rp}/inventories", {
            "resource_provider_generation": 0, "inventories": {
                "VCPU": {"total": 8 + n, "allocation_ratio": 2.0, "reserved": 1},
                "MEMORY_MB": {"total": 4096, "step_size": 64, "min_unit": 64},
                "DISK_GB": {"total": 100, "max_unit": 50},
                "CUSTOM_FUZZ": {"total": 3}}})
        assert status == 200, got
        world.providers.append(rp)
    agg = str(uuidlib.uuid4())
    world.aggregates.append(agg)
    for rp in world.providers[2:]:
        status, got = api(base, "GET", f"/resource_providers/{rp}")
        api(base, "PUT", f"/resource_providers/{rp}/aggregates",
            {"aggregates": [agg], "resource_provider_generation": got["generation"]})
        status, got = api(base, "GET", f"/resource_providers/{rp}")
        api(base, "PUT", f"/resource_providers/{rp}/traits",
            {"traits": ["MISC_SHARES_VIA_AGGREGATE", "CUSTOM_FUZZ_TRAIT"],
             "resource_provider_generation": got["generation"]})
    for n in range(3):
        consumer = str(uuidlib.uuid4())
        status, got = api(base, "PUT", f"/allocations/{consumer}", {
            "allocations": {world.providers[n]: {"resources": {"VCPU": 2,
                                                               "MEMORY_MB": 128}}},
            "project_id": world.projects[n % 2], "user_id": "user-a",
            "consumer_generation": None, "consumer_type": "INSTANCE"})
        assert status == 204, got
        world.consumers.append(consumer)
    ids = world.ids
    status, got = api(base, "POST", "/v3/services", {"service": {"type": "compute"}})
    ids["service_id"] = [got["service"]["id"]] if status == 201 else []
    status, got = api(base, "POST", "/v3/regions", {"region": {"id": "RegionOne"}})
    ids["region_id"] = ["RegionOne"]
    for project in world.projects:
        api(base, "POST", "/v3/projects", {"project": {"id": project, "name": project}})
    ids["project_id"] = list(world.projects)
    ids["registered_limit_id"], ids["limit_id"], ids["endpoint_id"] = [], [], []
    if ids["service_id"]:
        status, got = api(base, "POST", "/v3/registered_limits", {"registered_limits": [
            {"service_id": ids["service_id"][0], "resource_name": "class:VCPU",
             "default_limit": 20}]})
        if status == 201:
            ids["registered_limit_id"] = [r["id"] for r in got["registered_limits"]]
        status, got = api(base, "POST", "/v3/limits", {"limits": [
            {"service_id": ids["service_id"][0], "project_id": "proj-a",
             "resource_name": "class:VCPU", "resource_limit": 30}]})
        if status == 201:
            ids["limit_id"] = [r["id"] for r in got["limits"]]
        status, got = api(base, "POST", "/v3/endpoints", {"endpoint": {
            "service_id": ids["service_id"][0], "interface": "public",
            "url": "http://example.test/"}})
        if status == 201:
            ids["endpoint_id"] = [got["endpoint"]["id"]]
    return world


# -- drawing values -------------------------------------------------------------

class Drawer:
    """Draws JSON values for a schema, hostile at `hostility` of leaves."""

    def __init__(self, data, world: World, hostility: float):
        self.data = data
        self.world = world
        self.hostility = hostility

    def draw(self, strategy, label=None):
        return self.data.draw(strategy, label=label)

    def hostile(self) -> bool:
        return self.draw(st.integers(0, 999)) < self.hostility * 1000

    def hostile_value(self, depth=0):
        kind = self.draw(st.sampled_from(
            ["number", "number", "string", "string", "uuid", "nest", "bigarray",
             "bool", "null", "object"]))
        if kind == "number":
            return self.draw(st.sampled_from(HOSTILE_NUMBERS))
        if kind == "string":
            return self.draw(st.sampled_from(HOSTILE_STRINGS))
        if kind == "uuid":
            return spell(self.draw(st.sampled_from(
                self.world.providers + self.world.consumers)), self.draw(st.integers(0, 4)))
        if kind == "nest":
            value = self.draw(st.sampled_from([1, "x", NAN]))
            for _ in range(self.draw(st.sampled_from([31, 33, 60, 500]))):
                value = [value] if self.draw(st.booleans()) else {"a": value}
            return value
        if kind == "bigarray":
            if self.draw(st.booleans()):
                # Distinct items: what makes a pairwise uniqueness check slow.
                return [{"a": i} for i in range(10000)]
            return [self.draw(st.sampled_from(
                [1, "VCPU", self.world.providers[0], {"a": 1}]))] * 10000
        if kind == "bool":
            return self.draw(st.booleans())
        if kind == "object":
            return {self.draw(st.sampled_from(HOSTILE_STRINGS)): 1}
        return None

    def string(self, schema: dict, name: str = "") -> str:
        pattern = schema.get("pattern", "")
        if "enum" in schema:
            return self.draw(st.sampled_from(schema["enum"]))
        if UUID_PATTERN in pattern or schema.get("format") == "uuid" or "uuid" in name:
            pool = (self.world.aggregates if "aggregat" in name
                    else self.world.providers + self.world.consumers)
            pool = pool + [str(uuidlib.uuid4())]
            return spell(self.draw(st.sampled_from(pool)), self.draw(st.integers(0, 3)))
        if pattern.startswith("^[A-Z0-9_]") or name in ("resource_class", "consumer_type"):
            return self.draw(st.sampled_from(self.world.classes + ["INSTANCE",
                                                                   "MIGRATION"]))
        if "trait" in name:
            return self.draw(st.sampled_from(self.world.traits))
        if name in ("project_id", "user_id") or name.endswith("project_id"):
            return self.draw(st.sampled_from(self.world.projects + self.world.users))
        if name in self.world.ids and self.world.ids[name]:
            return self.draw(st.sampled_from(self.world.ids[name]))
        if name == "resource_name":
            return self.draw(st.sampled_from(["class:VCPU", "class:MEMORY_MB"]))
        low = schema.get("minLength", 0)
        high = min(schema.get("maxLength", 12), 12)
        text = self.draw(st.text(st.characters(codec="utf-8"), min_size=low,
                                 max_size=max(low, high)))
        if pattern and not re.search(pattern, text):
            text = self.draw(st.sampled_from(["fuzz", "FUZZ_1", "1", "a-b"]))
        return text

    def integer(self, schema: dict) -> int:
        low = schema.get("minimum", -5)
        high = schema.get("maximum", low + 64)
        return self.draw(st.one_of(st.integers(low, min(high, low + 64)),
                                   st.sampled_from([low, high])))

    def typed_hostile_value(self, schema: dict):
        """A hostile value of the type the schema expects, so the request
        passes the type check and reaches deeper code (as NaN in a
        "number" and a lone surrogate in a "string" both did)."""
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = kind[0]
        if kind in ("number", "integer"):
            return self.draw(st.sampled_from(HOSTILE_NUMBERS))
        if kind == "string" or "pattern" in schema:
            return self.draw(st.sampled_from(HOSTILE_STRINGS))
        return self.hostile_value()

    def value(self, schema: dict, name: str = "", depth: int = 0):
        if depth < 8 and self.hostile():
            if self.draw(st.integers(0, 9)) < 7:
                return self.typed_hostile_value(schema)
            return self.hostile_value()
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return self.value(self.draw(st.sampled_from(schema[key])), name, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = self.draw(st.sampled_from(kind))
        if kind is None:
            kind = ("object" if "properties" in schema or "patternProperties" in schema
                    else "string")
        if kind == "object":
            return self.object(schema, depth)
        if kind == "array":
            items = schema.get("items", {"type": "string"})
            size = self.draw(st.integers(schema.get("minItems", 0),
                                         min(schema.get("maxItems", 3), 3)))
            return [self.value(items, name, depth + 1) for _ in range(size)]
        if kind == "integer":
            return self.integer(schema)
        if kind == "number":
            return self.draw(st.sampled_from([0.0, 0.5, 1.0, 1.5, 16.0, 3.4e38]))
        if kind == "boolean":
            return self.draw(st.booleans())
        if kind == "null":
            return None
        return self.string(schema, name)

    def object(self, schema: dict, depth: int) -> dict:
        out = {}
        props = schema.get("properties", {})
        required = set(schema.get("required", ()))
        for key, sub in props.items():
            if key in required or self.draw(st.booleans()):
                out[key] = self.value(sub, key, depth + 1)
        for pattern, sub in schema.get("patternProperties", {}).items():
            for _ in range(self.draw(st.integers(
                    1 if schema.get("minProperties") and not out else 0, 2))):
                out[self.key_for(pattern)] = self.value(sub, pattern, depth + 1)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and self.draw(st.booleans()):
            out[self.draw(st.sampled_from(self.world.classes))] = self.value(
                extra, "", depth + 1)
        if self.draw(st.integers(0, 19)) == 0:
            out[self.draw(st.sampled_from(["bogus", "\ud800", "x" * 300]))] = 1
        return out

    def mutate(self, value):
        """`value` with exactly one leaf (or key) replaced by a hostile
        value of the same kind: the rest stays valid, so the request
        gets as far as that one field can take it."""
        spots = []
        stack = [((), value)]
        while stack:
            path, node = stack.pop()
            if isinstance(node, dict):
                for key, child in node.items():
                    spots.append((path, key, True))
                    stack.append((path + (key,), child))
            elif isinstance(node, list):
                for i, child in enumerate(node):
                    stack.append((path + (i,), child))
            elif path:
                spots.append((path[:-1], path[-1], False))
        if not spots:
            return self.hostile_value()
        parent_path, key, is_key = self.draw(st.sampled_from(spots))
        parent = value
        for step in parent_path:
            parent = parent[step]
        old = parent[key]
        if is_key:
            parent[self.draw(st.sampled_from(HOSTILE_STRINGS[:6]))] = parent.pop(key)
        elif isinstance(old, str):
            parent[key] = self.draw(st.sampled_from(HOSTILE_STRINGS))
        elif isinstance(old, (int, float)) and not isinstance(old, bool):
            parent[key] = self.draw(st.sampled_from(HOSTILE_NUMBERS))
        else:
            parent[key] = self.hostile_value()
        return value

    def key_for(self, pattern: str) -> str:
        if UUID_PATTERN in pattern:
            return spell(self.draw(st.sampled_from(
                self.world.providers + self.world.consumers + [str(uuidlib.uuid4())])),
                self.draw(st.integers(0, 3)))
        if pattern.startswith("^[A-Z0-9_]"):
            return self.draw(st.sampled_from(self.world.classes))
        return self.draw(st.sampled_from(["fuzz", "g1", "", "_", "1"]))


# -- a request ------------------------------------------------------------------

# Query parameters every candidate/provider query understands, beyond the
# ones the document lists (numbered groups are patternProperties there).
QUERY_VOCABULARY = ["resources", "resources1", "resources_A", "required",
                    "required1", "member_of", "member_of1", "in_tree", "in_tree1",
                    "limit", "group_policy", "root_required", "same_subtree",
                    "name", "uuid", "project_id", "user_id", "consumer_type"]


def _query_value(drawer: Drawer, name: str) -> str:
    world = drawer.world
    if drawer.hostile():
        value = drawer.hostile_value()
        return value if isinstance(value, str) else json.dumps(value)[:200]
    base = re.sub(r"[0-9_A-Z]+$", "", name)
    if base == "resources":
        parts = drawer.draw(st.lists(st.tuples(
            st.sampled_from(world.classes), st.integers(-1, 12)), min_size=1, max_size=3))
        return ",".join(f"{rc}:{n}" for rc, n in parts)
    if base in ("required", "root_required"):
        traits = drawer.draw(st.lists(st.sampled_from(world.traits), min_size=1,
                                      max_size=3))
        prefix = drawer.draw(st.sampled_from(["", "!", "in:"]))
        return prefix + ",".join(traits)
    if base == "member_of":
        prefix = drawer.draw(st.sampled_from(["", "!", "in:"]))
        return prefix + ",".join(spell(a, drawer.draw(st.integers(0, 4)))
                                 for a in world.aggregates + [str(uuidlib.uuid4())])
    if base in ("in_tree", "uuid"):
        return spell(drawer.draw(st.sampled_from(world.providers)),
                     drawer.draw(st.integers(0, 4)))
    if base == "limit":
        return str(drawer.draw(st.sampled_from([1, 2, 0, -1, 10 ** 30])))
    if base == "group_policy":
        return drawer.draw(st.sampled_from(["none", "isolate", "bogus"]))
    if base == "same_subtree":
        return ",".join(drawer.draw(st.lists(st.sampled_from(["", "1", "_A"]),
                                             min_size=1, max_size=3)))
    return drawer.string({}, name)


def _encode_query(pairs) -> str:
    out = []
    for name, value in pairs:
        # Lone surrogates go out as the bytes a careless client would send.
        out.append(urllib.parse.quote(name.encode("utf-8", "surrogatepass"), safe="")
                   + "=" + urllib.parse.quote(value.encode("utf-8", "surrogatepass"),
                                              safe=":,!"))
    return "&".join(out)


def _path_value(drawer: Drawer, name: str) -> str:
    world = drawer.world
    if drawer.hostile():
        value = drawer.draw(st.sampled_from(HOSTILE_STRINGS[:6] + ["x" * 3000, "..",
                                                                  "%2F", "a/b"]))
    elif name == "uuid":
        value = spell(drawer.draw(st.sampled_from(world.providers + [str(uuidlib.uuid4())])),
                      drawer.draw(st.integers(0, 4)))
    elif name == "consumer_uuid":
        value = spell(drawer.draw(st.sampled_from(world.consumers + [str(uuidlib.uuid4())])),
                      drawer.draw(st.integers(0, 4)))
    elif name in ("resource_class",):
        value = drawer.draw(st.sampled_from(world.classes + ["CUSTOM_NEW"]))
    elif name == "name":
        value = drawer.draw(st.sampled_from(world.classes + world.traits
                                            + ["CUSTOM_NEW", "CUSTOM_X_1"]))
    elif world.ids.get(name):
        value = drawer.draw(st.sampled_from(world.ids[name] + ["nope"]))
    else:
        value = drawer.string({}, name)
    return urllib.parse.quote(value.encode("utf-8", "surrogatepass"), safe="")


def draw_request(data, world: World, operations, hostility: float) -> Sent:
    """A request; `hostility` is the most hostile share of leaves drawn
    (each request draws its own, from clean to `hostility`)."""
    mode = data.draw(st.sampled_from(["clean", "one", "one", "one", "chaos"]))
    drawer = Drawer(data, world, hostility if mode == "chaos" else 0)
    path_template, method, op = drawer.draw(st.sampled_from(operations))
    if mode == "one" and method == "GET":
        drawer.hostility = 0.3
    path = re.sub(r"{([^}]+)}", lambda m: _path_value(drawer, m.group(1)), path_template)
    pairs = []
    params = [p for p in op.get("parameters", []) if p.get("in") == "query"]
    for param in params:
        if param.get("required") or drawer.draw(st.booleans()):
            pairs.append((param["name"], _query_value(drawer, param["name"])))
    if method == "GET" and drawer.draw(st.integers(0, 3)) == 0:
        for _ in range(drawer.draw(st.integers(1, 4))):
            name = drawer.draw(st.sampled_from(QUERY_VOCABULARY))
            pairs.append((name, _query_value(drawer, name)))
    flood = drawer.draw(st.integers(0, 29))
    if flood == 0:
        # Thousands of repeated parameters (past the limit, or just under).
        name, value = pairs[0] if pairs else ("resources", "VCPU:1")
        pairs += [(name, value)] * drawer.draw(st.sampled_from([998, 3000]))
    elif flood == 1:
        pairs += [(f"resources{i}", "VCPU:1") for i in range(
            drawer.draw(st.sampled_from([50, 300, 990])))]
    query = _encode_query(pairs)
    headers = dict(TOKEN_HEADERS)
    headers["OpenStack-API-Version"] = "placement " + drawer.draw(st.sampled_from(VERSIONS))
    body = None
    if method in ("PUT", "POST", "PATCH"):
        schema = (op.get("requestBody", {}).get("content", {})
                  .get("application/json", {}).get("schema"))
        shape = drawer.draw(st.integers(0, 19))
        if shape == 0:
            body = drawer.draw(st.sampled_from([
                b"", b"{", b'{"a": }', b"\xff\xfe", b"[]", b"null", b"1e999",
                b'{"a": NaN}', b"[" * 100000, b'"\\ud800"']))
        else:
            value = drawer.value(schema or {"type": "object"}, "", 0)
            if mode == "one":
                value = drawer.mutate(value)
            body = json.dumps(value, allow_nan=True).encode("ascii")
        headers["Content-Type"] = "application/json"
    return Sent(method, path + ("?" + query if query else ""), body, headers)


# -- every field of every route ---------------------------------------------------

# Infinity takes the parser's path NaN takes, and NUL the surrogate's
# check; the random campaign sends those too.
SWEEP_NUMBERS = [NAN, 2 ** 70]
SWEEP_STRINGS = ["bad\ud800x", "x" * 5000]
SWEEP_KEYS = ["\udc00"]


def leaf_spots(value, path=()):
    """(path, is_key, current value) for every leaf and key of `value`."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield path + (key,), True, key
            yield from leaf_spots(child, path + (key,))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from leaf_spots(child, path + (i,))
    elif path:
        yield path, False, value


def array_spots(value, path=()):
    """The path of every array in `value`."""
    if isinstance(value, list):
        yield path
        for i, child in enumerate(value):
            yield from array_spots(child, path + (i,))
    elif isinstance(value, dict):
        for key, child in value.items():
            yield from array_spots(child, path + (key,))


def replaced(value, path, new, is_key):
    """A deep copy of `value` with the leaf (or key) at `path` replaced."""
    value = json.loads(json.dumps(value))
    parent = value
    for step in path[:-1]:
        parent = parent[step]
    if is_key:
        parent[new] = parent.pop(path[-1])
    else:
        parent[path[-1]] = new
    return value


def _generation(base: str, rp: str) -> int:
    return api(base, "GET", f"/resource_providers/{rp}")[1]["generation"]


def valid_request(base: str, world: World, method: str, template: str, n: int):
    """(path, body) of a request that would succeed against the seeded
    world, for the operations that write; None for the others. Fresh
    names each call (`n`), current generations read first."""
    rp, rp2 = world.providers[3], world.providers[2]
    ids = world.ids
    service = (ids.get("service_id") or ["none"])[0]
    claim = {"resources": {"VCPU": 1, "MEMORY_MB": 64}}
    lease = {"context": {"project_id": "proj-a", "user_id": "user-a"},
             "lease": {"id": f"lease-{n}", "name": f"lease {n}",
                       "start_date": "2030-01-01 00:00", "end_date": "2030-01-02 00:00",
                       "reservations": [{"resource_type": "physical:host", "amount": 1,
                                         "min": 1, "max": 1}]}}
    table = {
        ("POST", "/resource_providers"): lambda: (
            template, {"name": f"sweep-{n}", "uuid": str(uuidlib.uuid4()),
                       "parent_provider_uuid": world.providers[0]}),
        ("PUT", "/resource_providers/{uuid}"): lambda: (
            f"/resource_providers/{rp}", {"name": f"renamed-{n}"}),
        ("PUT", "/resource_providers/{uuid}/inventories"): lambda: (
            f"/resource_providers/{rp}/inventories",
            {"resource_provider_generation": _generation(base, rp), "inventories": {
                "VCPU": {"total": 64, "reserved": 1, "allocation_ratio": 2.0,
                         "min_unit": 1, "max_unit": 64, "step_size": 1},
                "MEMORY_MB": {"total": 65536, "allocation_ratio": 1.0},
                "DISK_GB": {"total": 100}, "CUSTOM_FUZZ": {"total": 3}}}),
        ("POST", "/resource_providers/{uuid}/inventories"): lambda: (
            f"/resource_providers/{rp2}/inventories",
            {"resource_class": "CUSTOM_SWEEP", "total": 8, "reserved": 0,
             "allocation_ratio": 1.5, "resource_provider_generation":
                 _generation(base, rp2)}),
        ("PUT", "/resource_providers/{uuid}/inventories/{resource_class}"): lambda: (
            f"/resource_providers/{rp}/inventories/VCPU",
            {"resource_provider_generation": _generation(base, rp), "total": 64,
             "reserved": 2, "allocation_ratio": 4.0, "max_unit": 64}),
        ("PUT", "/resource_providers/{uuid}/aggregates"): lambda: (
            f"/resource_providers/{rp}/aggregates",
            {"aggregates": world.aggregates + [str(uuidlib.uuid4())],
             "resource_provider_generation": _generation(base, rp)}),
        ("PUT", "/resource_providers/{uuid}/traits"): lambda: (
            f"/resource_providers/{rp}/traits",
            {"traits": ["CUSTOM_FUZZ_TRAIT", "MISC_SHARES_VIA_AGGREGATE"],
             "resource_provider_generation": _generation(base, rp)}),
        ("PUT", "/allocations/{consumer_uuid}"): lambda: (
            f"/allocations/{uuidlib.uuid4()}",
            {"allocations": {rp: claim}, "project_id": "proj-a", "user_id": "user-a",
             "consumer_generation": None, "consumer_type": "INSTANCE"}),
        ("POST", "/allocations"): lambda: (
            template, {str(uuidlib.uuid4()): {
                "allocations": {rp: claim}, "project_id": "proj-b",
                "user_id": "user-a", "consumer_generation": None,
                "consumer_type": "MIGRATION"}}),
        ("POST", "/reshaper"): lambda: (
            template, {"inventories": {rp: {
                "resource_provider_generation": _generation(base, rp),
                "inventories": {"VCPU": {"total": 64, "allocation_ratio": 2.0},
                                "MEMORY_MB": {"total": 65536},
                                "DISK_GB": {"total": 100},
                                "CUSTOM_FUZZ": {"total": 3}}}},
                "allocations": {str(uuidlib.uuid4()): {
                    "allocations": {rp: claim}, "project_id": "proj-a",
                    "user_id": "user-a", "consumer_generation": None,
                    "consumer_type": "INSTANCE"}}}),
        ("POST", "/resource_classes"): lambda: (template, {"name": f"CUSTOM_SWEEP_{n}"}),
        ("POST", "/quota/check"): lambda: (
            template, {"project_id": "proj-a", "deltas": {"VCPU": 1, "MEMORY_MB": 64}}),
        ("POST", "/v3/services"): lambda: (
            template, {"service": {"type": f"sweep{n}", "name": f"sweep {n}",
                                   "description": "d", "enabled": True}}),
        ("POST", "/v3/regions"): lambda: (
            template, {"region": {"id": f"Region{n}", "description": "d",
                                  "parent_region_id": "RegionOne"}}),
        ("POST", "/v3/endpoints"): lambda: (
            template, {"endpoint": {"service_id": service, "interface": "internal",
                                    "url": f"http://sweep{n}.test/",
                                    "region_id": "RegionOne"}}),
        ("PATCH", "/v3/endpoints/{endpoint_id}"): lambda: (
            f"/v3/endpoints/{(ids.get('endpoint_id') or ['none'])[0]}",
            {"endpoint": {"url": f"http://patched{n}.test/"}}),
        ("POST", "/v3/registered_limits"): lambda: (
            template, {"registered_limits": [{
                "service_id": service, "resource_name": f"class:CUSTOM_R{n}",
                "default_limit": 5, "region_id": "RegionOne",
                "description": "d"}]}),
        ("PATCH", "/v3/registered_limits/{registered_limit_id}"): lambda: (
            f"/v3/registered_limits/{(ids.get('registered_limit_id') or ['none'])[0]}",
            {"registered_limit": {"default_limit": 25, "description": "d"}}),
        ("POST", "/v3/limits"): lambda: (
            template, {"limits": [{
                "service_id": service, "project_id": "proj-b",
                "resource_name": "class:VCPU", "resource_limit": 40 + n,
                "description": "d"}]}),
        ("PATCH", "/v3/limits/{limit_id}"): lambda: (
            f"/v3/limits/{(ids.get('limit_id') or ['none'])[0]}",
            {"limit": {"resource_limit": 35, "description": "d"}}),
        ("POST", "/v3/projects"): lambda: (
            template, {"project": {"id": f"proj-sweep-{n}", "name": f"sweep {n}",
                                   "parent_id": "proj-a", "description": "d",
                                   "enabled": True}}),
        ("PATCH", "/v3/projects/{project_id}"): lambda: (
            "/v3/projects/proj-b", {"project": {"name": f"b {n}", "enabled": True}}),
        ("POST", "/v1/check-create"): lambda: (template, lease),
        ("POST", "/v1/on-end"): lambda: (template, lease),
        ("POST", "/v1/check-update"): lambda: (
            template, {**lease, "current_lease": lease["lease"]}),
    }
    make = table.get((method, template))
    return make() if make else None


def sweep_requests(base: str, world: World, operations):
    """For every operation that writes: a body that would succeed, then
    that body with each field in turn made hostile (NaN, infinity, 2**70,
    a lone surrogate, NUL, 5000 characters, by the field's kind), so each
    hostile value reaches as far into the code as its field can."""
    headers = {**TOKEN_HEADERS, "OpenStack-API-Version": "placement latest",
               "Content-Type": "application/json"}
    n = 0
    for template, method, _op in operations:
        n += 1
        made = valid_request(base, world, method, template, n)
        if made is None:
            continue
        path, body = made
        for index, (_spot, is_key, current) in enumerate(leaf_spots(body)):
            if is_key:
                news = SWEEP_KEYS
            elif isinstance(current, (int, float)) and not isinstance(current, bool):
                news = SWEEP_NUMBERS
            elif isinstance(current, str):
                news = SWEEP_STRINGS
            else:
                news = [NAN, "\ud800"]
            for new in news:
                n += 1
                # Re-made each time: generations move, names must be new.
                path, body = valid_request(base, world, method, template, n)
                # The same field of the new body (its uuids and names differ).
                spot = list(leaf_spots(body))[index][0]
                hostile = replaced(body, spot, new, is_key)
                yield Sent(method, path, json.dumps(hostile, allow_nan=True).encode(
                    "ascii"), headers)
        for index in range(len(list(array_spots(body)))):
            n += 1
            path, body = valid_request(base, world, method, template, n)
            spot = list(array_spots(body))[index]
            # 10,000 distinct items: long, and slow to check pairwise.
            hostile = replaced(body, spot, [{"a": i} for i in range(10000)], False)
            yield Sent(method, path, json.dumps(hostile).encode("ascii"), headers)
        n += 1
        path, body = valid_request(base, world, method, template, n)
        yield Sent(method, path, json.dumps(body).encode("ascii"), headers)


# -- what must hold ---------------------------------------------------------------

def _reject_constant(text):
    raise ValueError(f"{text} is not JSON")


def strict_json(raw: bytes):
    return json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)


def check_response(sent: Sent, status: int, headers, raw: bytes) -> list[str]:
    """What is wrong with one answer, as messages (empty when nothing)."""
    problems = []
    if status == 0:
        return [f"no answer: {raw[:200]!r}"]
    if status >= 500:
        problems.append(f"{status}: {raw[:300]!r}")
        return problems
    ctype = headers.get("Content-Type", "") or ""
    if status == 431 and raw.rstrip().endswith(b"(generated by placement-lite)"):
        # A request line past waitress's header limit (256 kB) is refused by
        # the HTTP server before the app sees it, in its own plain text.
        return problems
    if raw and "json" in ctype:
        try:
            body = strict_json(raw)
        except ValueError as exc:
            return [f"{status} with a body that is not JSON ({exc}): {raw[:200]!r}"]
    else:
        body = None
    if status < 400:
        return problems
    path = sent.path.split("?")[0]
    if path.startswith("/v1/") and status == 403:
        return problems  # the lease policy answers in Blazar's own shape
    if body is None:
        return [f"{status} error without a JSON body: {ctype} {raw[:200]!r}"]
    if path.startswith("/v3") and isinstance(body, dict) and "error" in body:
        err = body["error"]
        if not (isinstance(err, dict) and err.get("code") == status
                and isinstance(err.get("message"), str) and err.get("title")):
            problems.append(f"{status} not in Keystone's error shape: {body}")
        return problems
    errors = body.get("errors") if isinstance(body, dict) else None
    if not (isinstance(errors, list) and len(errors) == 1):
        return [f"{status} not in the API-WG error format: {str(body)[:300]}"]
    err = errors[0]
    if not (err.get("status") == status and isinstance(err.get("title"), str)
            and isinstance(err.get("detail"), str)
            and err.get("request_id") == headers.get("x-openstack-request-id")):
        problems.append(f"{status} error fields wrong: {err}")
    if len(err.get("detail", "")) > 2500:
        problems.append(f"{status} error detail of {len(err['detail'])} characters")
    return problems


class Ledger:
    """Reads the server's database directly, for the invariants."""

    TABLES = [table for table in t.metadata.sorted_tables]

    def __init__(self, url: str):
        # One kept connection: a new one per check is slow on MariaDB.
        self.engine = create_engine(url, pool_size=1, max_overflow=0)

    def close(self):
        self.engine.dispose()

    def digest(self) -> str:
        """A hash of every row of every table: equal digests, equal ledgers."""
        sha = hashlib.sha256()
        with self.engine.connect() as conn:
            for table in self.TABLES:
                rows = sorted(repr(tuple(r)) for r in conn.execute(select(table)))
                sha.update(table.name.encode())
                for row in rows:
                    sha.update(row.encode("utf-8", "backslashreplace"))
        return sha.hexdigest()

    def usage_and_capacity(self) -> dict:
        """(provider id, class id) -> (used, capacity)."""
        inv, a = t.inventories, t.allocations
        with self.engine.connect() as conn:
            used = {(rp, rc): int(n) for rp, rc, n in conn.execute(
                select(a.c.resource_provider_id, a.c.resource_class_id,
                       func.sum(a.c.used))
                .group_by(a.c.resource_provider_id, a.c.resource_class_id))}
            caps = {}
            for row in conn.execute(select(inv)):
                ratio = row.allocation_ratio
                caps[(row.resource_provider_id, row.resource_class_id)] = (
                    (row.total - row.reserved) * ratio
                    if ratio is not None and math.isfinite(ratio) else -1)
        return {key: (used.get(key, 0), caps.get(key)) for key in set(used) | set(caps)}

    def structure_problems(self) -> list[str]:
        """Rows no complete write leaves behind."""
        problems = []
        rp, a, c, inv = t.resource_providers, t.allocations, t.consumers, t.inventories
        with self.engine.connect() as conn:
            ids = set(conn.scalars(select(rp.c.id)))
            for row in conn.execute(select(rp)):
                if row.root_provider_id not in ids:
                    problems.append(f"provider {row.uuid} has no root")
                if row.parent_provider_id is not None and row.parent_provider_id not in ids:
                    problems.append(f"provider {row.uuid} has a missing parent")
                if row.uuid != str(uuidlib.UUID(row.uuid)):
                    problems.append(f"provider uuid {row.uuid!r} is not canonical")
            consumers = set(conn.scalars(select(c.c.id)))
            holding = set(conn.scalars(select(a.c.consumer_id).distinct()))
            for row in conn.execute(select(a)):
                if row.used <= 0:
                    problems.append(f"allocation {row.id} of {row.used}")
                if row.consumer_id not in consumers or row.resource_provider_id not in ids:
                    problems.append(f"allocation {row.id} refers to a missing row")
                if (row.resource_provider_id, row.resource_class_id) not in {
                        (r.resource_provider_id, r.resource_class_id)
                        for r in conn.execute(select(inv).where(
                            inv.c.resource_provider_id == row.resource_provider_id))}:
                    problems.append(f"allocation {row.id} has no inventory")
            empty = consumers - holding
            if empty:
                problems.append(f"{len(empty)} consumers hold no allocations")
            for row in conn.execute(select(inv)):
                if row.allocation_ratio is None or not math.isfinite(row.allocation_ratio):
                    problems.append(f"inventory {row.id} ratio {row.allocation_ratio}")
        return problems


def capacity_problems(before: dict, after: dict) -> list[str]:
    """A write may leave a provider over capacity only where it did not
    raise the usage (inventory may shrink below usage; claims may not
    grow past capacity)."""
    problems = []
    for key, (used, cap) in after.items():
        if cap is None:
            if used:
                problems.append(f"{key}: {used} used without inventory")
            continue
        if used > cap and used > before.get(key, (0, None))[0]:
            problems.append(f"{key}: usage rose to {used}, capacity {cap}")
    return problems
