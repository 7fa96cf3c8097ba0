"""One process of `python -m bench instructions`, run under callgrind:
`PYTHONPATH=TREE python bench/instr_child.py URL WORKLOAD N`.

It builds the application in this process (the `placement_lite` on
PYTHONPATH: each compared tree's own), warms every workload up the same
way whatever WORKLOAD is, then runs WORKLOAD N times. The parent runs it
with N = 0 too; the difference in instructions, over N, is what one
operation costs the application, the driver and the framework (not the
database server, not HTTP): a figure that does not move with how busy
or how fast the machine is.
"""
from __future__ import annotations

import gc
import io
import itertools
import json
import logging
import sys
import uuid as uuidlib
from urllib.parse import urlencode

# Imported from PYTHONPATH (the measured tree), not from beside this file.
from bench.worlds import AGGREGATE, uid

FLAT = {"resources": "VCPU:1,DISK_GB:10,MEMORY_MB:256", "member_of": AGGREGATE,
        "required": "HW_CPU_X86_AVX2"}
NESTED = {"resources": "DISK_GB:10", "required": "COMPUTE_VOLUME_MULTI_ATTACH",
          "resources_COMPUTE": "VCPU:1,MEMORY_MB:256",
          "required_COMPUTE": "CUSTOM_FOO", "resources_FPGA": "FPGA:1",
          "group_policy": "none", "same_subtree": "_COMPUTE,_FPGA"}
# Loaded providers join an aggregate of their own, so the flat query's
# answer stays the same however many were loaded before.
LOAD_AGGREGATE = "b0a5e1a8-1d1c-4c55-9f5a-0c1d0e7e0a02"
RACE = 20
HEADERS = {"HTTP_X_AUTH_TOKEN": "admin", "HTTP_ACCEPT": "application/json",
           "CONTENT_TYPE": "application/json",
           "HTTP_OPENSTACK_API_VERSION": "placement latest"}


class Driver:
    def __init__(self, url: str):
        from placement_lite.app import create_app
        from placement_lite.config import Settings
        from placement_lite.db.engine import Database
        self.app = create_app(Settings(db=url, log_level="WARNING"), Database(url))
        logging.getLogger().setLevel(logging.WARNING)
        self.project, self.user = str(uuidlib.uuid4()), str(uuidlib.uuid4())
        self.race = itertools.cycle([uid(f"race-{i}") for i in range(RACE)])

    def call(self, method: str, path: str, body=None) -> bytes:
        path, _, query = path.partition("?")
        data = json.dumps(body).encode() if body is not None else b""
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query,
                   "SERVER_NAME": "bench", "SERVER_PORT": "80",
                   "SERVER_PROTOCOL": "HTTP/1.1", "wsgi.url_scheme": "http",
                   "wsgi.input": io.BytesIO(data), "CONTENT_LENGTH": str(len(data)),
                   "wsgi.errors": sys.stderr, **HEADERS}
        status = []
        out = b"".join(self.app(environ, lambda s, _h, _e=None: status.append(s)))
        if not status[0].startswith("2"):
            raise RuntimeError(f"{method} {path}: {status[0]} {out[:300]!r}")
        return out

    def candidates(self, query: dict, limit=None):
        q = dict(query, **({"limit": str(limit)} if limit else {}))
        self.call("GET", "/allocation_candidates?" + urlencode(q))

    def claim(self):
        self.call("PUT", f"/allocations/{uuidlib.uuid4()}", {
            "allocations": {next(self.race): {"resources": {"VCPU": 1}}},
            "project_id": self.project, "user_id": self.user,
            "consumer_generation": None, "consumer_type": "INSTANCE"})

    def load(self):
        """The perfload loader's four writes for one new provider."""
        rp = str(uuidlib.uuid4())
        self.call("POST", "/resource_providers", {"name": f"load-{rp}", "uuid": rp})
        self.call("PUT", f"/resource_providers/{rp}/inventories", {
            "resource_provider_generation": 0, "inventories": {
                "VCPU": {"total": 32}, "MEMORY_MB": {"total": 8192},
                "DISK_GB": {"total": 8192}}})
        self.call("PUT", f"/resource_providers/{rp}/traits", {
            "resource_provider_generation": 1,
            "traits": ["HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"]})
        self.call("PUT", f"/resource_providers/{rp}/aggregates", {
            "resource_provider_generation": 2, "aggregates": [LOAD_AGGREGATE]})


WORKLOADS = {
    "flat 1k, full": lambda d: d.candidates(FLAT),
    "flat 1k, limit=10": lambda d: d.candidates(FLAT, 10),
    "nested 1k, full": lambda d: d.candidates(NESTED),
    "claim": Driver.claim,
    # One operation is one provider: four writes.
    "load": Driver.load,
}
WARM_UP = 3
WARM_UP_ORDER = ("load", "claim", "flat 1k, full", "flat 1k, limit=10",
                 "nested 1k, full")


def main(url: str, workload: str, count: int) -> None:
    driver = Driver(url)
    # Every workload, in the same order, whatever is measured: the N = 0
    # run is then the same process up to the measured part. The writes
    # first, so the reads leave the copy of the facts current and the
    # first measured read does not pay a refresh.
    for name in WARM_UP_ORDER:
        for _ in range(WARM_UP):
            WORKLOADS[name](driver)
    # As a serving worker does once it has read its copy of the facts
    # (app._read_facts): out of the cycle collector's walks, which would
    # otherwise add a share per operation that grows with N.
    gc.freeze()
    fn = WORKLOADS[workload]
    for _ in range(count):
        fn(driver)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
