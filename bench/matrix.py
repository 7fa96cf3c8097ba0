"""`python -m bench matrix`: every workload of issue 13 on one backend,
as a table; with `--compare REF` the same workloads against a second
commit (a git worktree) or server, alternately in one run, with ratios.

Each side gets its own fresh database (SQLite file, MariaDB or PostgreSQL
database), migrated and loaded by its own code (bench/worlds.py run with
that side's tree on PYTHONPATH), and its own server
(`placement-lite serve --workers W --threads T`) started with
PLACEMENT_LITE_COUNT_STATEMENTS=1, so every response says how many SQL
statements it cost (a side without the header shows "-").
"""
from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid as uuidlib
from concurrent.futures import ProcessPoolExecutor
from urllib.parse import urlencode

from bench import complete, grow, runner, serving
from bench.client import Client
from bench.serving import ServerProcess

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
STATEMENTS = "x-placement-lite-statements"
# The backends a benchmark side can run on (SERVERS' keys and SQLite).
BACKENDS = ("sqlite", "mysql", "mysqldb", "postgresql")
SERVERS = {"mysql": "mysql+pymysql://root@127.0.0.1:3306/",
           "mysqldb": "mysql+mysqldb://root@127.0.0.1:3306/",
           "postgresql": "postgresql://root@127.0.0.1:5432/"}

FLAT_Q = {"resources": "VCPU:1,DISK_GB:10,MEMORY_MB:256",
          "member_of": "b0a5e1a8-1d1c-4c55-9f5a-0c1d0e7e0a01",
          "required": "HW_CPU_X86_AVX2"}
NESTED_Q = {"resources": "DISK_GB:10", "required": "COMPUTE_VOLUME_MULTI_ATTACH",
            "resources_COMPUTE": "VCPU:1,MEMORY_MB:256",
            "required_COMPUTE": "CUSTOM_FOO", "resources_FPGA": "FPGA:1",
            "group_policy": "none", "same_subtree": "_COMPUTE,_FPGA"}


def ac(query, limit=None):
    q = dict(query)
    if limit:
        q["limit"] = str(limit)
    return "/allocation_candidates?" + urlencode(q)


# ---------------------------------------------------------------- sides
def _fresh_db(db: str, workdir: str, tag: str) -> str:
    if db == "sqlite":
        name = f"{tag}_{uuidlib.uuid4().hex[:8]}.sqlite"
        return f"sqlite:///{os.path.join(workdir, name)}"
    from sqlalchemy import create_engine, text
    base = SERVERS[db]
    safe = re.sub(r"\W", "_", tag)  # a database name: letters, digits, _
    name = f"plbench_{safe}_{uuidlib.uuid4().hex[:8]}"
    admin = base + ("postgres" if db == "postgresql" else "")
    eng = create_engine(admin, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    eng.dispose()
    return base + name


def _drop_db(url: str) -> None:
    if url.startswith("sqlite"):
        return
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url
    parsed = make_url(url)
    admin = parsed.set(database="postgres" if parsed.get_backend_name() ==
                       "postgresql" else "")
    eng = create_engine(admin, isolation_level="AUTOCOMMIT")
    with eng.connect() as conn:
        if parsed.get_backend_name() == "postgresql":
            conn.execute(text(f"DROP DATABASE IF EXISTS {parsed.database} WITH (FORCE)"))
        else:
            conn.execute(text(f"DROP DATABASE IF EXISTS {parsed.database}"))
    eng.dispose()


class Side(ServerProcess):
    """One tree of code, its database and its server, and beside it a
    reference server over the same database that reads every fact from
    it (bench/complete.py): what each timed answer is checked against.
    `sizes` are bulk-loaded before the server starts (none: it starts on
    an empty database); `extra_env` adds to the server's environment;
    `scripts`, more loaders run after the worlds the same way, each as
    `python SCRIPT URL ARGS...` (bench/reservation_world.py), what each
    prints kept in `printed` by the script's name."""

    def __init__(self, label, tree, db, workdir, port, workers, threads, sizes,
                 extra_env=None, scripts=()):
        self.label, self.tree = label, tree
        self.env = dict(os.environ, PYTHONPATH=tree,
                        PLACEMENT_LITE_COUNT_STATEMENTS="1", **(extra_env or {}))
        self.reference = None
        self.url = _fresh_db(db, workdir, label)
        self.load_seconds, self.printed = {}, {}
        self.race_rounds = 0
        try:
            for shape, count in sizes:
                began = time.monotonic()
                subprocess.run([sys.executable, os.path.join(HERE, "worlds.py"),
                                self.url, shape, str(count)], env=self.env,
                               check=True, cwd=tree)
                self.load_seconds[f"{shape}_{count}"] = round(
                    time.monotonic() - began, 1)
            for script, *script_args in scripts:
                began = time.monotonic()
                name = os.path.basename(script)
                self.printed[name] = subprocess.run(
                    [sys.executable, script, self.url, *map(str, script_args)],
                    env=self.env, check=True, cwd=tree, stdout=subprocess.PIPE,
                    text=True).stdout
                self.load_seconds[name] = round(time.monotonic() - began, 1)
            super().__init__(self.url, port, workers, ("--threads", str(threads)),
                             env=self.env, cwd=tree, name=f"{label}: the server")
            try:
                self.reference = serving.Reference(
                    self.url, self.env, tree, name=f"{label}: the reference server")
            except BaseException:
                super().stop()
                raise
        except BaseException:
            _drop_db(self.url)  # a failed load or start leaves no database behind
            raise
        time.sleep(1.0)  # let every worker come up

    def rss_mb(self):
        """Resident memory of each worker process (the supervisor apart
        when there are workers)."""
        pids = self.pids()
        pids = pids[1:] or pids
        out = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/status") as fh:
                    for line in fh:
                        if line.startswith("VmRSS:"):
                            out.append(round(int(line.split()[1]) / 1024, 1))
            except OSError:
                pass
        return max(out) if out else None

    def stop(self):
        if self.reference is not None:
            self.reference.stop()
        super().stop()
        _drop_db(self.url)


# ------------------------------------------------------------ workloads
def _get(client, path, expect=None):
    """(seconds, statements) of one GET; a candidates answer is then
    checked against `expect` (complete.Expected), outside the time."""
    began = time.perf_counter()
    status, raw, headers = _raw(client, "GET", path)
    elapsed = time.perf_counter() - began
    if status != 200:
        raise RuntimeError(f"GET {path} answered {status}: {raw[:300]!r}")
    if expect is not None:
        expect.check(raw)
    return elapsed, headers.get(STATEMENTS)


def _raw(client, method, path, body=None):
    return client.exchange(method, path, body)


def latency(side, path, runs, expect=None):
    """Median wall ms, server CPU ms per request, statements per request.
    Every answer, the untimed first one too, is checked against `expect`."""
    client = Client(side.http)
    _get(client, path, expect)
    times, stmts = [], []
    cpu0 = side.cpu()
    for _ in range(runs):
        elapsed, n = _get(client, path, expect)
        times.append(elapsed)
        if n is not None:
            stmts.append(int(n))
    cpu = side.cpu() - cpu0
    return {"ms": times, "cpu_ms": 1000 * cpu / runs,
            "stmts": statistics.median(stmts) if stmts else None}


def after_write(side, path, runs, write=None, expect=None):
    """Latency of a candidates request made right after a write changing
    one provider's facts (its traits, alternately with and without
    STORAGE_DISK_SSD): each request finds its worker's copy behind the
    facts log, so this is what a refresh costs the request that makes it.
    `write(client, i)`: another write to make before each request.
    Server CPU counts the candidates requests alone."""
    from bench.worlds import uid
    client = Client(side.http)
    traits = f"/resource_providers/{uid('cn-1')}/traits"

    def facts_write(client, i):
        status, raw, _headers = _raw(client, "GET", traits)
        generation = json.loads(raw)["resource_provider_generation"]
        status, raw, _headers = _raw(client, "PUT", traits, {
            "resource_provider_generation": generation,
            "traits": ["HW_CPU_X86_AVX2"] + (["STORAGE_DISK_SSD"] if i % 2 == 0 else [])})
        if status != 200:
            raise RuntimeError(f"PUT {traits} answered {status}: {raw[:300]!r}")

    write = write or facts_write
    _get(client, path, expect)
    times, stmts, cpu = [], [], 0.0
    for i in range(runs):
        write(client, i)
        cpu0 = side.cpu()
        elapsed, n = _get(client, path, expect)
        cpu += side.cpu() - cpu0
        times.append(elapsed)
        if n is not None:
            stmts.append(int(n))
    return {"ms": times, "cpu_ms": 1000 * cpu / runs,
            "stmts": statistics.median(stmts) if stmts else None}


def claim_write(client, i):
    """A new instance's claim (VCPU 1) on one flat provider, each time
    another: it changes that provider's usage, and no fact."""
    from bench.worlds import uid
    status, raw, _headers = _raw(client, "PUT", f"/allocations/{uuidlib.uuid4()}", {
        "allocations": {uid(f"cn-{i % 1000}"): {"resources": {"VCPU": 1}}},
        "project_id": uid("bench-claims"), "user_id": uid("bench-user"),
        "consumer_generation": None, "consumer_type": "INSTANCE"})
    if status != 204:
        raise RuntimeError(f"claim answered {status}: {raw[:300]!r}")


def _tput_client(url, path, stop_at, expected):
    """(answers, answers whose count is not `expected` (None: not
    counted), one such count)."""
    client = Client(url)
    done, wrong, example = 0, 0, None
    while time.time() < stop_at:
        status, raw = client.raw("GET", path)
        if status == 200:
            done += 1
            if expected is not None:
                got = complete.candidates_in(raw)
                if got != expected:
                    wrong, example = wrong + 1, got
    return done, wrong, example


def throughput(side, path, clients, seconds, expect=None):
    cpu0 = side.cpu()
    began = time.time()
    expected = expect.count if expect is not None else None
    with ProcessPoolExecutor(max_workers=clients) as pool:
        results = list(pool.map(_tput_client, [side.http] * clients, [path] * clients,
                                [began + seconds] * clients, [expected] * clients))
    wall = time.time() - began
    cpu = side.cpu() - cpu0
    done = sum(r[0] for r in results)
    if expect is not None:
        expect.tally(done, sum(r[1] for r in results),
                     next((r[2] for r in results if r[1]), None))
    return {"rps": done / wall, "cpu_ms": 1000 * cpu / max(done, 1)}


def _in_threads(side, work, count):
    """work(0) ... work(count - 1) in threads at once: (wall seconds, the
    server's CPU seconds meanwhile)."""
    cpu0 = side.cpu()
    began = time.monotonic()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(count)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return time.monotonic() - began, side.cpu() - cpu0


def _claim_body(rp, project, user, amount=1):
    return {"allocations": {rp: {"resources": {"VCPU": amount}}},
            "project_id": project, "user_id": user,
            "consumer_generation": None, "consumer_type": "INSTANCE"}


def claims(side, rps, clients, attempts, amount, racing):
    """PUT /allocations of new consumers, `clients` threads. Racing: all
    of them on the same providers until capacity runs out, then the
    granted units must equal capacity exactly. Uncontended: each client
    on a provider of its own."""
    project, user = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    granted, refused, errors, stmts = [0], [0], [0], []
    lock = threading.Lock()

    def work(i):
        client = Client(side.http)
        for k in range(attempts):
            # Racing: every client walks all providers, so each is asked
            # more than it holds and must end exactly full.
            rp = rps[(i + k) % len(rps)] if racing else rps[i % len(rps)]
            status, raw, headers = _raw(client, "PUT", f"/allocations/{uuidlib.uuid4()}",
                                        _claim_body(rp, project, user, amount))
            with lock:
                if status == 204:
                    granted[0] += 1
                elif status == 409:
                    refused[0] += 1
                else:
                    errors[0] += 1
                if headers.get(STATEMENTS) and status == 204:
                    stmts.append(int(headers[STATEMENTS]))
    wall, cpu = _in_threads(side, work, clients)
    decided = granted[0] + refused[0]
    out = {"per_s": decided / wall, "granted": granted[0], "refused": refused[0],
           "errors": errors[0], "cpu_ms": 1000 * cpu / max(decided, 1),
           "stmts": statistics.median(stmts) if stmts else None}
    if racing:
        # 50 VCPU per provider; every unit must be granted, none over.
        client = Client(side.http)
        used = 0
        for rp in rps:
            _, body = client.get(f"/resource_providers/{rp}/usages")
            used += body["usages"].get("VCPU", 0)
        out["exact"] = used == 50 * len(rps) and granted[0] * amount == used
    return out


def load_http(side, count, threads):
    """The perfload loader's writes: create, inventory, trait, aggregate
    per provider, `threads` loaders at once."""
    stmts = []
    lock = threading.Lock()
    agg = "b0a5e1a8-1d1c-4c55-9f5a-0c1d0e7e0a02"

    def work(i):
        client = Client(side.http)
        for k in range(i, count, threads):
            rp = str(uuidlib.uuid4())
            calls = [("POST", "/resource_providers", {"name": f"load-{rp}", "uuid": rp}),
                     ("PUT", f"/resource_providers/{rp}/inventories", {
                         "resource_provider_generation": 0, "inventories": {
                             "VCPU": {"total": 32}, "MEMORY_MB": {"total": 8192},
                             "DISK_GB": {"total": 8192}}}),
                     ("PUT", f"/resource_providers/{rp}/traits", {
                         "resource_provider_generation": 1,
                         "traits": ["HW_CPU_X86_AVX2", "STORAGE_DISK_SSD"]}),
                     ("PUT", f"/resource_providers/{rp}/aggregates", {
                         "resource_provider_generation": 2, "aggregates": [agg]})]
            total = 0
            for method, path, body in calls:
                status, raw, headers = _raw(client, method, path, body)
                if status >= 300:
                    raise RuntimeError(f"{method} {path}: {status} {raw[:200]!r}")
                total += int(headers.get(STATEMENTS) or 0)
            with lock:
                stmts.append(total)
    wall, cpu = _in_threads(side, work, threads)
    return {"per_s": count / wall, "cpu_ms": 1000 * cpu / count,
            "stmts": statistics.median(stmts) if stmts and any(stmts) else None}


# --------------------------------------------------------------- driver
def workloads(args):
    from bench.worlds import usage_project
    r, s = args.runs, args.seconds
    wl = [
        ("flat 1k, full", "lat", ac(FLAT_Q), r),
        ("flat 1k, limit=5", "lat", ac(FLAT_Q, 5), r),
        ("flat 1k, full, after a claim", "claim+lat", ac(FLAT_Q), r),
        ("flat 1k full, c=10", "tput", ac(FLAT_Q), s),
        ("flat 1k limit=10, c=10", "tput", ac(FLAT_Q, 10), s),
        ("nested 1k, full", "lat", ac(NESTED_Q), max(3, r // 2)),
        ("nested 1k full, c=10", "tput", ac(NESTED_Q), s),
        ("flat 10k, limit=1000", "lat", ac(FLAT_Q, 1000), r),
        ("flat 10k, limit=1000, after a facts write", "write+lat", ac(FLAT_Q, 1000), r),
    ]
    if args.big:
        wl += [(f"flat {args.big // 1000}k, limit=1000", "lat", ac(FLAT_Q, 1000), r),
               (f"flat {args.big // 1000}k, limit=1000, after a facts write", "write+lat",
                ac(FLAT_Q, 1000), r)]
    wl += [
        ("GET /usages, 1,000 consumers", "lat",
         "/usages?" + urlencode({"project_id": usage_project(1000)}), r * 2),
        (f"GET /usages, {args.usages // 1000}k consumers", "lat",
         "/usages?" + urlencode({"project_id": usage_project(args.usages)}), r),
        ("racing claims, 20 clients", "race", None, None),
        ("uncontended claims, 10 clients", "claims", None, None),
        ("load, providers/s", "load", None, None),
    ]
    if args.grow:
        wl.append(("grown through the API", "grow", None, None))
    if args.only:
        keep = [w.strip() for w in args.only.split(",")]
        wl = [w for w in wl if any(k in w[0] for k in keep)]
    return wl


def _cloud(args, label):
    """The cloud a side's worlds are loaded in: --base-cloud lets the
    compared side run the other one, so `--compare HEAD --base-cloud idle
    --cloud full` sets one tree's full clouds beside its idle ones."""
    return args.base_cloud if label == "base" and args.base_cloud else args.cloud


def _sizes(args, wl, cloud=None):
    """Worlds the chosen workloads need. The flat world's 1k providers are
    the first of the 10k, so `flat 1k` queries use a world of 1k in a
    database of its own... kept simple: flat 1k, nested 1k, then big flat
    worlds go to separate sides' databases only when asked."""
    names = " ".join(w[0] for w in wl)
    sizes = []
    full = "+full" if (cloud or args.cloud) == "full" else ""
    if "flat 1k" in names:
        sizes.append(("flat" + full, 1000))
    if "nested" in names:
        sizes.append(("nested" + full, 1000))
    if "usages" in names:
        sizes += [("usages", n) for n in sorted({1000, args.usages})]
    if "claims" in names:
        sizes.append(("race", 10 * args.rounds_writes))
        if ("usages", 1000) not in sizes:
            sizes.append(("usages", 1000))
    return sizes


def run_one(side, name, kind, path, n, args, define=None):
    """One round of workload `name` on `side`. A candidates workload's
    answers are each checked against the count the side's reference
    server gives (and `define`, the world's own count, where known) just
    before them, and again just after: result["checked"] answers."""
    if not (path or "").startswith("/allocation_candidates"):
        return _run_one(side, kind, path, n, args, None)
    expect = complete.Expected(f"{name} [{side.label} side]", side.reference,
                               path, define)
    result = _run_one(side, kind, path, n, args, expect)
    expect.settle()
    result["checked"] = expect.checked
    return result


def _run_one(side, kind, path, n, args, expect):
    if kind == "lat":
        return latency(side, path, n, expect)
    if kind == "write+lat":
        return after_write(side, path, n, expect=expect)
    if kind == "claim+lat":
        return after_write(side, path, n, claim_write, expect=expect)
    if kind == "tput":
        return throughput(side, path, args.clients, n, expect)
    from bench.worlds import uid
    if kind == "race":
        # 10 fresh providers x 50 units per round, claims of 5: 100 fit;
        # 20 clients x 8 attempts ask for 160.
        first = 10 * side.race_rounds
        side.race_rounds += 1
        return claims(side, [uid(f"race-{i}") for i in range(first, first + 10)],
                      20, 8, 5, racing=True)
    if kind == "claims":
        return claims(side, [uid(f"usage-1000-rp-{i}") for i in range(10)],
                      10, args.claims, 1, racing=False)
    if kind == "load":
        return load_http(side, args.load, args.threads)
    raise ValueError(kind)


def _merge(results):
    """Per-side rounds folded into one row of figures."""
    if "ms" in results[0]:
        ms = [x for r in results for x in r["ms"]]
        stmts = [r["stmts"] for r in results if r["stmts"] is not None]
        return {"median": 1000 * statistics.median(ms),
                "cpu_ms": statistics.median(r["cpu_ms"] for r in results),
                "stmts": stmts[0] if stmts else None, "unit": "ms"}
    key = "rps" if "rps" in results[0] else "per_s"
    out = {"median": statistics.median(r[key] for r in results),
           "cpu_ms": statistics.median(r["cpu_ms"] for r in results),
           "stmts": next((r.get("stmts") for r in results if r.get("stmts")), None),
           "unit": "/s"}
    if "exact" in results[0]:
        out["exact"] = all(r["exact"] for r in results)
        out["granted"] = [r["granted"] for r in results]
    return out


def _big_side(label, tree, args, workdir, port, count):
    return Side(label, tree, args.db, workdir, port, args.workers, args.threads,
                [("flat", count)])


def checkout(workdir, label, ref, worktrees):
    """A git worktree of `ref` under `workdir`, noted in `worktrees` for
    remove_worktrees."""
    path = os.path.join(workdir, label)
    subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", path, ref],
                   check=True, capture_output=True)
    worktrees.append(path)
    return path


def remove_worktrees(worktrees):
    for path in worktrees:
        subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", path],
                       capture_output=True)


def matrix(args):
    workdir = tempfile.mkdtemp(prefix="pl-matrix-", dir=args.workdir)
    trees = [("new", REPO)]
    worktrees = []
    if args.new:
        trees = [("new", checkout(workdir, "new", args.new, worktrees))]
    if args.compare:
        trees.insert(0, ("base", checkout(workdir, "base", args.compare, worktrees)))
    wl = workloads(args)
    grown = [w for w in wl if w[1] == "grow"]
    wl = [w for w in wl if w[1] != "grow"]
    rows = {}
    checked = [0]
    started = time.time()
    machine = [runner.machine_ms()]
    port = args.port
    try:
        groups = [(None, [w for w in wl if not w[0].startswith("flat 10")
                          and not w[0].startswith(f"flat {args.big // 1000}k")])]
        if any(w[0].startswith("flat 10k") for w in wl):
            groups.append((10000, [w for w in wl if w[0].startswith("flat 10k")]))
        if args.big and any(w[0].startswith(f"flat {args.big // 1000}k") for w in wl):
            groups.append((args.big, [w for w in wl
                                      if w[0].startswith(f"flat {args.big // 1000}k")]))
        for big, items in groups:
            if not items:
                continue
            sides = []
            try:
                for label, tree in trees:
                    port += 1
                    cloud = _cloud(args, label)
                    full = "+full" if cloud == "full" else ""
                    sizes = ([("flat" + full, big)] if big
                             else _sizes(args, items, cloud))
                    db = args.base_db if label == "base" and args.base_db else args.db
                    sides.append(Side(label, tree, db, workdir, port,
                                      args.workers, args.threads, sizes))
                    print(f"# {label}: loaded {sides[-1].load_seconds}", file=sys.stderr)
                for name, kind, path, n in items:
                    _rounds(sides, rows, checked, name, kind, path, n, args)
                world = f"flat {big // 1000}k" if big else "1k worlds"
                for side in sides:
                    rows.setdefault(f"RSS per worker process ({world})", {})[side.label] = {
                        "median": side.rss_mb(), "unit": "MiB", "cpu_ms": None,
                        "stmts": None}
            finally:
                for side in sides:
                    side.stop()
        if grown:
            _grown(trees, args, workdir, port, rows, checked)
    finally:
        remove_worktrees(worktrees)
    machine.append(runner.machine_ms())
    return {"machine_ms": machine, "db": args.db, "cloud": args.cloud,
            "base_cloud": args.base_cloud, "workers": args.workers, "threads": args.threads,
            "compare": args.compare, "new": args.new or "working tree", "minutes": round((time.time() - started) / 60, 1),
            "load_average": [round(x, 2) for x in os.getloadavg()], "rows": rows,
            "answers_checked": checked[0]}


def _rounds(sides, rows, checked, name, kind, path, n, args, define=None):
    """Workload `name` in alternating rounds over `sides`, its row in
    `rows`; the answers checked complete are added to checked[0]."""
    per = {s.label: [] for s in sides}
    rounds = (args.rounds if kind in ("lat", "tput", "write+lat", "claim+lat")
              else args.rounds_writes)
    for rnd in range(rounds):
        order = sides if rnd % 2 == 0 else sides[::-1]
        for side in order:
            per[side.label].append(run_one(
                side, name, kind, path,
                (n / rounds if kind == "tput" else max(2, n // rounds))
                if n else None, args, define))
    checked[0] += sum(r.get("checked", 0) for res in per.values() for r in res)
    rows[name] = {label: _merge(res) for label, res in per.items()}
    print(f"# {name}: " + json.dumps(rows[name]), file=sys.stderr)


def _grown(trees, args, workdir, port, rows, checked):
    """Worlds grown through the API into running servers (bench/grow.py).

    Each side's server starts on an empty database (with /metrics, to
    reach every worker) and every worker answers a candidates request, so
    each holds its copy of the facts. Then, step by step, a batch of
    providers is written through the API from --threads clients, with no
    read in between, and each worker's first read after it (which brings
    its copy up to date with the whole batch) is timed; every worker
    answers every query of the world once, each answer checked, before
    the timed queries run in alternating rounds as elsewhere. Counts are
    checked against the reference server and the world's definition."""
    plan = grow.parse_plan(args.grow)
    sides = []
    try:
        for label, tree in trees:
            port += 1
            db = args.base_db if label == "base" and args.base_db else args.db
            sides.append(Side(label, tree, db, workdir, port, args.workers,
                              args.threads, [],
                              extra_env={"PLACEMENT_LITE_METRICS": "true"}))
        worlds = {side.label: grow.GrownWorld() for side in sides}
        warm = grow.path(grow.FLAT_QUERY)
        for side in sides:
            for w, client in sorted(grow.pin_workers(side.http, args.workers).items()):
                _get(client, warm, complete.Expected(
                    f"grown: warm-up read [{side.label} side, worker {w}]",
                    side.reference, warm, 0))
                checked[0] += 1
        for k, step in enumerate(plan):
            order = sides if k % 2 == 0 else sides[::-1]
            total = worlds[sides[0].label].providers + step.providers
            title = f"grown {step.label} (to {total})"
            for side in order:
                world = worlds[side.label]
                cpu0 = side.cpu()
                grow.FULL = _cloud(args, side.label) == "full"
                done = grow.grow(side.http, world, step, args.threads)
                rows.setdefault(f"{title}: load, providers/s", {})[side.label] = {
                    "median": step.providers / done["seconds"],
                    "cpu_ms": 1000 * (side.cpu() - cpu0) / step.providers,
                    "stmts": (statistics.median(done["stmts"])
                              if any(done["stmts"]) else None), "unit": "/s"}
            for side in order:
                queries = worlds[side.label].queries(first=step)
                first, cpu, stmts = [], 0.0, []
                for w, client in sorted(grow.pin_workers(side.http, args.workers).items()):
                    for j, (label, path, define) in enumerate(queries):
                        expect = complete.Expected(
                            f"{title}: {label}, first read after the batch "
                            f"[{side.label} side, worker {w}]", side.reference, path, define)
                        cpu0 = side.cpu()
                        elapsed, n = _get(client, path, expect)
                        checked[0] += 1
                        if j == 0:
                            first.append(elapsed)
                            cpu += side.cpu() - cpu0
                            stmts += [int(n)] if n is not None else []
                rows.setdefault(f"{title}: first read of each worker, {queries[0][0]}",
                                {})[side.label] = {
                    "median": 1000 * statistics.median(first),
                    "cpu_ms": 1000 * cpu / len(first),
                    "stmts": statistics.median(stmts) if stmts else None, "unit": "ms"}
            print(f"# {title}: " + json.dumps({
                name: row for name, row in rows.items() if name.startswith(title)}),
                file=sys.stderr)
            for label, path, define in queries:
                _rounds(sides, rows, checked, f"{title}: {label}", "lat", path,
                        args.runs, args, define)
        for side in sides:
            rows.setdefault("RSS per worker process (grown worlds)", {})[side.label] = {
                "median": side.rss_mb(), "unit": "MiB", "cpu_ms": None, "stmts": None}
    finally:
        for side in sides:
            side.stop()


def _fmt(v, unit=""):
    if v is None:
        return "-"
    if isinstance(v, float):
        v = f"{v:.1f}" if v >= 10 or unit == "/s" else f"{v:.2f}"
    return f"{v}{(' ' + unit) if unit else ''}"


def table(result) -> str:
    rows = result["rows"]
    labels = sorted({lab for r in rows.values() for lab in r},
                    key=lambda x: x != "base")
    head = ["figure"]
    for lab in labels:
        head += [f"{lab}", f"{lab} CPU/req", f"{lab} stmts/req"]
    if len(labels) == 2:
        head.append("ratio")
    lines = [f"{result['db']}, {result['workers']} workers x {result['threads']} "
             f"threads, load average {result['load_average']}"
             + (", reference work {} -> {} ms of CPU (bench/runner.py, "
                "machine_ms)".format(*result["machine_ms"])
                if result.get("machine_ms") else "")
             + (f"; {result['answers_checked']} timed candidates answers, each "
                "as many as the database holds (bench/complete.py)"
                if result.get("answers_checked") else ""),
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, per in rows.items():
        cells = [name]
        for lab in labels:
            fig = per.get(lab, {})
            extra = " exact" if fig.get("exact") else (
                " NOT EXACT" if fig.get("exact") is False else "")
            cells += [_fmt(fig.get("median"), fig.get("unit", "")) + extra,
                      _fmt(fig.get("cpu_ms"), "ms"), _fmt(fig.get("stmts"))]
        if len(labels) == 2:
            a, b = (per.get(lab, {}).get("median") for lab in labels)
            if a and b:
                better = a / b if per[labels[0]]["unit"] in ("ms", "MiB") else b / a
                cells.append(f"{better:.2f}x")
            else:
                cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def add_parser(sub):
    p = sub.add_parser("matrix", help="issue 13's workloads on one backend, "
                       "optionally against another commit, alternately")
    p.add_argument("--db", choices=BACKENDS,
                   default="sqlite")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--compare", help="a commit to run alternately against this tree")
    p.add_argument("--new", help="a commit to run instead of the working tree")
    p.add_argument("--base-db", choices=BACKENDS,
                   help="the compared side's backend, if not --db (e.g. PyMySQL "
                   "against mysqlclient: --db mysqldb --base-db mysql)")
    p.add_argument("--runs", type=int, default=20, help="requests per latency figure")
    p.add_argument("--seconds", type=float, default=6, help="per throughput figure")
    p.add_argument("--rounds", type=int, default=2,
                   help="alternating rounds per read figure")
    p.add_argument("--rounds-writes", type=int, default=2)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--claims", type=int, default=30, help="uncontended claims per client")
    p.add_argument("--load", type=int, default=200, help="providers loaded over HTTP")
    p.add_argument("--usages", type=int, default=100000)
    p.add_argument("--big", type=int, default=0, help="also flat BIG (e.g. 100000)")
    p.add_argument("--grow", default=grow.DEFAULT_PLAN,
                   help="worlds grown through the API into running servers, one "
                   "batch of writes per step: N flat providers or RxC (R roots "
                   "of C children); '' for none (default %(default)s)")
    p.add_argument("--only", help="comma-separated name fragments of workloads")
    p.add_argument("--cloud", choices=("idle", "full"), default="idle",
                   help="full: the flat and nested worlds with every provider "
                   "30-90%% used, by three consumers each (bench/worlds.py fill)")
    p.add_argument("--base-cloud", choices=("idle", "full"),
                   help="the compared side's cloud, if not --cloud: with "
                   "--compare HEAD, one tree idle beside full, alternately")
    p.add_argument("--port", type=int, default=18900)
    p.add_argument("--workdir", default=None)
    p.add_argument("--json", action="store_true", help="print JSON, not the table")
    return p
