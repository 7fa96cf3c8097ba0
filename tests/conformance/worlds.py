"""What a gabbi fixture built, read back through the API, so the world our
fixture builds on placement_lite can be compared with the one Placement's
own fixture builds on Placement 16 (tests/test_conformance.py).

A world is: providers in listing order with their generation, parent,
root, inventories, traits (as a set: the listing order of traits is not
part of the world), aggregates, usages and allocations; every consumer
with its allocations, project, user, generation and type; the custom
resource classes and traits; and every `$ENVIRON` value the fixture
exported. Random uuids are replaced by what they name (a provider, an
aggregate in first-seen order, a consumer, an exported variable), so two
worlds built from different random values compare equal when they are
the same world.
"""
from __future__ import annotations

import io
import json
import os
import re
import urllib.error
import urllib.request

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
HEADERS = {"x-auth-token": "admin", "accept": "application/json"}


def wsgi_reader(app):
    """GET through a WSGI app in-process (for Placement's own app)."""
    def get(path, version="1.39"):
        path, _sep, query = path.partition("?")
        environ = {
            "REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": query,
            "SCRIPT_NAME": "", "SERVER_NAME": "placement.test", "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(b""), "wsgi.errors": io.StringIO(),
            "wsgi.version": (1, 0), "wsgi.multithread": False,
            "wsgi.multiprocess": False, "wsgi.run_once": False,
            "HTTP_OPENSTACK_API_VERSION": f"placement {version}",
        }
        for name, value in HEADERS.items():
            environ["HTTP_" + name.upper().replace("-", "_")] = value
        status = {}

        def start_response(line, headers, exc_info=None):
            status["code"] = int(line.split()[0])

        body = b"".join(app(environ, start_response))
        if status["code"] != 200:
            raise AssertionError(f"GET {path} answered {status['code']}: {body[:300]!r}")
        return json.loads(body)
    return get


def http_reader(base_url: str):
    """GET over HTTP (for the placement_lite server under test)."""
    def get(path, version="1.39"):
        req = urllib.request.Request(
            base_url + path, headers={**HEADERS, "openstack-api-version":
                                      f"placement {version}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.loads(resp.read())
    return get


def read_world(get, exported: dict) -> dict:
    """The world behind the API `get` reads, with `exported` the
    variables the fixture set (name -> value)."""
    by_value = {v: k for k, v in sorted(exported.items())}
    rps = get("/resource_providers")["resource_providers"]
    names = {rp["uuid"]: by_value.get(rp["name"], rp["name"]) for rp in rps}
    aggregates: dict[str, str] = {}
    consumers: list[str] = []
    providers = {}
    for rp in rps:
        uuid = rp["uuid"]
        aggs = get(f"/resource_providers/{uuid}/aggregates")["aggregates"]
        for agg in aggs:
            aggregates.setdefault(agg, f"aggregate {len(aggregates) + 1}")
        allocs = get(f"/resource_providers/{uuid}/allocations")["allocations"]
        consumers += [c for c in allocs if c not in consumers]
        providers[names[uuid]] = {
            "generation": rp["generation"],
            "parent": names.get(rp["parent_provider_uuid"]),
            "root": names.get(rp["root_provider_uuid"]),
            "inventories": get(f"/resource_providers/{uuid}/inventories")["inventories"],
            "traits": sorted(get(f"/resource_providers/{uuid}/traits")["traits"]),
            "aggregates": sorted(aggregates[a] for a in aggs),
            "usages": get(f"/resource_providers/{uuid}/usages")["usages"],
            "allocations": sorted(json.dumps(a["resources"], sort_keys=True)
                                  for a in allocs.values()),
        }
    consumer_rows = []
    for consumer in consumers:
        body = get(f"/allocations/{consumer}", "1.38")
        consumer_rows.append(json.dumps({
            "allocations": {names[rp]: a["resources"]
                            for rp, a in body["allocations"].items()},
            "project": by_value.get(body["project_id"], body["project_id"]),
            "user": by_value.get(body["user_id"], body["user_id"]),
            "generation": body["consumer_generation"],
            "type": body["consumer_type"],
        }, sort_keys=True))

    def named(value):
        if value in names:
            return f"provider {names[value]}"
        if value in aggregates:
            return aggregates[value]
        if value in consumers:
            return "a consumer"
        if isinstance(value, str) and UUID.match(value):
            return "a fresh uuid"
        return value

    return {
        "provider order": [names[rp["uuid"]] for rp in rps],
        "providers": providers,
        "consumers": sorted(consumer_rows),
        "custom classes": sorted(
            rc["name"] for rc in get("/resource_classes", "1.7")["resource_classes"]
            if rc["name"].startswith("CUSTOM_")),
        "custom traits": sorted(get("/traits?name=startswith:CUSTOM_", "1.6")["traits"]),
        "exported": {k: named(v) for k, v in sorted(exported.items())},
    }


def exported_since(before: dict) -> dict:
    """The environment variables set or changed since `before`."""
    return {k: v for k, v in os.environ.items() if before.get(k) != v}
