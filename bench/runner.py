"""Timings over HTTP: candidate queries, concurrent throughput, concurrent
claims with the capacity-invariant check afterwards."""
from __future__ import annotations

import json
import statistics
import threading
from concurrent.futures import ProcessPoolExecutor
import time
import uuid as uuidlib
from urllib.parse import urlencode

from bench import complete, loader
from bench.client import Client

FLAT_QUERY = {"resources": "VCPU:1,MEMORY_MB:256,DISK_GB:10",
              "member_of": loader.AGGREGATE, "required": loader.AVX2}
NESTED_QUERY = {"resources": "DISK_GB:10",
                "resources_COMPUTE": "VCPU:2,MEMORY_MB:1024",
                "required_COMPUTE": loader.NUMA,
                "resources_ACCEL": "FPGA:1",
                "same_subtree": "_COMPUTE,_ACCEL",
                "group_policy": "isolate"}
WIDE_QUERY = {**{f"resources{i}": "CUSTOM_WIDE:1" for i in range(1, 7)},
              "group_policy": "none"}
QUERIES = {"flat": FLAT_QUERY, "nested": NESTED_QUERY, "wide": WIDE_QUERY}


def candidates_path(shape: str, limit=None) -> str:
    params = dict(QUERIES[shape])
    if limit:
        params["limit"] = str(limit)
    return "/allocation_candidates?" + urlencode(params)


def _pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def time_query(url: str, shape: str, runs: int = 20, limit=None, expect=None) -> dict:
    """`expect` (bench/complete.py's Expected): every answer is checked
    to hold as many candidates as the database does."""
    client = Client(url)
    path = candidates_path(shape, limit)
    client.get(path)  # warm caches and the connection
    times = []
    count = summaries = None
    for _ in range(runs):
        began = time.perf_counter()
        status, raw = client.raw("GET", path)
        elapsed = time.perf_counter() - began
        if status != 200:
            raise RuntimeError(f"GET {path} answered {status}: {raw[:300]!r}")
        if expect is not None:
            expect.check(raw)
        body = json.loads(raw)
        times.append(elapsed)
        count = len(body["allocation_requests"])
        summaries = len(body["provider_summaries"])
    return {"shape": shape, "limit": limit, "runs": runs,
            "candidates": count, "summaries": summaries,
            "median_ms": round(1000 * statistics.median(times), 2),
            "p95_ms": round(1000 * _pct(times, 0.95), 2)}


def _client_loop(url: str, path: str, stop_at: float, expected=None):
    """One load-generating client (run in its own process, so clients do
    not share one interpreter lock with each other). Answers whose count
    of candidates is not `expected` are counted (one such count kept)."""
    client = Client(url)
    done, errors, latencies, wrong, example = 0, 0, [], 0, None
    while time.time() < stop_at:
        # Unparsed (counted in the bytes): the clients share the machine
        # with the server, and parsing every answer would take CPU from it.
        began = time.perf_counter()
        status, raw = client.raw("GET", path)
        elapsed = time.perf_counter() - began
        if status == 200:
            done += 1
            latencies.append(elapsed)
            if expected is not None and complete.candidates_in(raw) != expected:
                wrong, example = wrong + 1, complete.candidates_in(raw)
        else:
            errors += 1
    return done, errors, latencies, wrong, example


def throughput(url: str, shape: str, clients: int = 10, seconds: float = 10.0,
               limit=None, expect=None) -> dict:
    path = candidates_path(shape, limit)
    start = time.time()
    stop_at = start + seconds
    expected = expect.count if expect is not None else None
    with ProcessPoolExecutor(max_workers=clients) as pool:
        results = list(pool.map(_client_loop, [url] * clients, [path] * clients,
                                [stop_at] * clients, [expected] * clients))
    wall = time.time() - start
    done = sum(r[0] for r in results)
    if expect is not None:
        expect.tally(done, sum(r[3] for r in results),
                     next((r[4] for r in results if r[3]), None))
    latencies = [x for r in results for x in r[2]]
    return {"shape": shape, "limit": limit, "clients": clients,
            "seconds": round(wall, 2), "queries": done,
            "errors": sum(r[1] for r in results),
            "queries_per_s": round(done / seconds, 1),
            "median_ms": round(1000 * statistics.median(latencies), 2)
            if latencies else None}


def claims(url: str, clients: int = 10, per_client: int = 20,
           resources: str = "VCPU:8,MEMORY_MB:1024,DISK_GB:100") -> dict:
    """Each client asks for candidates then claims one with PUT
    /allocations/{consumer}; afterwards every provider's usage must be
    within its capacity."""
    project, user = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    path = "/allocation_candidates?" + urlencode(
        {"resources": resources, "limit": "10"})
    outcome = {"claimed": 0, "conflicts": 0, "no_candidates": 0, "errors": 0}
    lock = threading.Lock()
    status, _ = Client(url).put(f"/allocations/{uuidlib.uuid4()}", {
        "allocations": {}, "project_id": project, "user_id": user,
        "consumer_generation": None,
                    "consumer_type": "INSTANCE"})
    if status in (404, 405):
        return {"skipped": "the allocations API is not available"}

    def work(i):
        client = Client(url)
        import random
        for _ in range(per_client):
            status, body = client.get(path)
            if status != 200:
                key = "errors"
            elif not body["allocation_requests"]:
                key = "no_candidates"
            else:
                choice = random.choice(body["allocation_requests"])
                status, _ = client.put(f"/allocations/{uuidlib.uuid4()}", {
                    "allocations": choice["allocations"], "project_id": project,
                    "user_id": user, "consumer_generation": None,
                    "consumer_type": "INSTANCE"})
                key = ("claimed" if status == 204 else
                       "conflicts" if status == 409 else "errors")
            with lock:
                outcome[key] += 1

    start = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    outcome["seconds"] = round(time.monotonic() - start, 2)
    outcome["claims_per_s"] = round(outcome["claimed"] / outcome["seconds"], 1)
    outcome["invariant_violations"] = check_invariant(url)
    return outcome


def check_invariant(url: str) -> list:
    """Providers and classes whose usage exceeds
    (total - reserved) * allocation_ratio."""
    client = Client(url)
    status, body = client.get("/resource_providers")
    bad = []
    for rp in body["resource_providers"]:
        _, inv = client.get(f"/resource_providers/{rp['uuid']}/inventories")
        _, use = client.get(f"/resource_providers/{rp['uuid']}/usages")
        for rc, amount in use["usages"].items():
            spec = inv["inventories"].get(rc)
            cap = ((spec["total"] - spec["reserved"]) * spec["allocation_ratio"]
                   if spec else 0)
            if amount > cap:
                bad.append({"provider": rp["uuid"], "class": rc,
                            "used": amount, "capacity": cap})
    return bad


def peak_rss_mb(pids) -> float:
    """The largest peak resident set (VmHWM) among the given processes."""
    peak = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/status") as fh:
                for line in fh:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            continue
    return round(peak / 1024, 1)


def cpu_seconds(pids) -> float:
    """User + system CPU time used so far by the given processes."""
    import os
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / tick


# A fixed piece of pure-Python work: encoding and decoding a document
# shaped like a candidates answer, and sorting its keys.
_REFERENCE_DOC = {f"rp-{i:04d}": {"resources": {"VCPU": i % 32, "MEMORY_MB": 256 * i,
                                                 "DISK_GB": 10 + i % 7},
                                   "traits": ["HW_CPU_X86_AVX2", f"CUSTOM_{i % 13}"]}
                  for i in range(400)}


def machine_ms(tries: int = 7) -> float:
    """CPU milliseconds this process takes for the same fixed work, the
    median of `tries`: how fast one core of the machine is right now.

    Figures measured on different days are comparable only in proportion
    to it (this machine's speed has moved 2x between days); a run
    reports it at its start and its end, beside the load average.
    """
    import json
    times = []
    for _ in range(tries):
        began = time.process_time()
        for _ in range(20):
            doc = json.loads(json.dumps(_REFERENCE_DOC))
            sorted(doc, key=lambda k: doc[k]["resources"]["MEMORY_MB"])
        times.append(1000 * (time.process_time() - began))
    return round(statistics.median(times), 1)

