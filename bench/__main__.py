"""python -m bench {load,query,throughput,claims,console,suite,matrix,instructions,
answer-memory,full,reservations} ..."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from bench import (answer_memory, complete, full, instructions, loader, matrix,
                   reservations, runner, serving, worlds)
from bench.client import Client
from bench.serving import ServerProcess


def _load(args):
    db = worlds.open_db(args.db)
    start = time.perf_counter()
    if args.shape == "flat":
        loader.load_flat(db, args.count)
    elif args.shape == "nested":
        loader.load_nested(db, args.count)
    else:
        loader.load_wide(db)
    return {"loaded": args.shape, "count": args.count,
            "seconds": round(time.perf_counter() - start, 2)}


def _load_http(args):
    start = time.perf_counter()
    loader.load_flat_http(Client(args.url), args.count)
    return {"loaded": "flat", "via": "http", "count": args.count,
            "seconds": round(time.perf_counter() - start, 2)}


def _console_scenario(workdir, port, count, runs):
    """The console's pages (serve --ui) over a flat world with projects,
    limits and allocations: median and p95 per page, server CPU per page."""
    from bench import console
    db_url = f"sqlite:///{os.path.join(workdir, f'console_{count}.sqlite')}"
    db = worlds.open_db(db_url)
    loader.load_flat(db, count)
    names = console.load_quota_and_usage(db)
    db.dispose()
    server = ServerProcess(db_url, port, 1, ("--ui",))
    try:
        results = {"providers": count, "runs": runs,
                   "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
                   "pages": console.time_pages(
                       server.http, names, runs,
                       cpu=lambda: server.cpu())}
        results["peak_rss_mb"] = runner.peak_rss_mb(server.pids())
    finally:
        server.stop()
    return results


def _suite(args):
    """Every scenario of bench/README.md, each on a fresh SQLite database
    and a fresh server."""
    out = {"load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    port = args.port
    workdir = tempfile.mkdtemp(prefix="pl-bench-", dir=args.workdir)

    def scenario(name, shape, count, queries, workers=1, tput=None, claim=None,
                 server_args=()):
        nonlocal port
        db_url = f"sqlite:///{os.path.join(workdir, name + '.sqlite')}"
        db = worlds.open_db(db_url)
        {"flat": loader.load_flat, "nested": loader.load_nested,
         "wide": lambda d, c: loader.load_wide(d)}[shape](db, count)
        db.dispose()
        port += 1
        server = ServerProcess(db_url, port, workers, server_args)
        reference = None
        try:
            # Answers every timed query once from the database alone, with
            # the same bound (bench/complete.py).
            reference = serving.Reference(db_url, extra=server_args,
                                           name=f"{name}: the reference server")

            def expect(label, limit):
                return complete.Expected(f"suite {name}: {label}", reference,
                                         runner.candidates_path(shape, limit))
            results = {"providers": count, "workers": workers}
            for label, limit in queries:
                check = expect(label, limit)
                before = server.cpu()
                results[label] = runner.time_query(server.http, shape, args.runs, limit,
                                                   check)
                results[label]["server_cpu_ms_per_query"] = round(
                    1000 * (server.cpu() - before)
                    / (args.runs + 1), 2)
                check.settle()
            for label, limit in tput or ():
                check = expect(label, limit)
                before = server.cpu()
                results[label] = runner.throughput(
                    server.http, shape, args.clients, args.seconds, limit, check)
                check.settle()
                used = server.cpu() - before
                # Server CPU per query: what the 2 cores could serve were the
                # load generator and everything else elsewhere.
                results[label]["server_cpu_ms_per_query"] = round(
                    1000 * used / max(results[label]["queries"], 1), 2)
            if claim:
                results["claims"] = runner.claims(server.http, claim, args.per_client)
            results["peak_rss_mb"] = runner.peak_rss_mb(server.pids())
        finally:
            if reference is not None:
                reference.stop()
            server.stop()
        out[name] = results
        print(json.dumps({name: results}), file=sys.stderr)

    scenario("flat_10k", "flat", 10000, [("full", None), ("limit_5", 5)])
    scenario("flat_10k_uncapped", "flat", 10000, [("full", None)],
             server_args=("--max-allocation-candidates", "-1"))
    scenario("flat_100k", "flat", args.big, [("limit_100", 100)])
    scenario("nested_1k", "nested", 1000, [("full", None), ("limit_5", 5)])
    scenario("nested_10k", "nested", 10000, [("limit_5", 5)])
    scenario("wide_tree", "wide", 1, [("limit_10", 10)])
    scenario("concurrent_1k", "flat", 1000, [("full", None), ("limit_10", 10)],
             workers=2, tput=[("throughput_full", None),
                              ("throughput_limit_10", 10)])
    scenario("claims_200", "flat", 200, [], workers=2, claim=args.clients)
    port += 1
    out["console_10k"] = _console_scenario(workdir, port, 10000, args.runs)
    print(json.dumps({"console_10k": out["console_10k"]}), file=sys.stderr)
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("load", help="bulk-load a world into a database")
    p.add_argument("--db", required=True)
    p.add_argument("--shape", choices=["flat", "nested", "wide"], default="flat")
    p.add_argument("--count", type=int, default=1000)
    p = sub.add_parser("load-http", help="load a flat world through the API")
    p.add_argument("--url", required=True)
    p.add_argument("--count", type=int, default=100)
    p = sub.add_parser("query", help="time the candidates query")
    p.add_argument("--url", required=True)
    p.add_argument("--shape", choices=list(runner.QUERIES), default="flat")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--limit", type=int)
    p = sub.add_parser("throughput", help="concurrent candidate queries")
    p.add_argument("--url", required=True)
    p.add_argument("--shape", choices=list(runner.QUERIES), default="flat")
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--limit", type=int)
    p = sub.add_parser("claims", help="concurrent candidates + PUT /allocations")
    p.add_argument("--url", required=True)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--per-client", type=int, default=20)
    p = sub.add_parser("console", help="time the console's pages (serve --ui) "
                       "over a fresh flat world with projects and allocations")
    p.add_argument("--count", type=int, default=10000)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--port", type=int, default=18790)
    p.add_argument("--workdir", default=None)
    p = sub.add_parser("suite", help="every scenario, with its own servers")
    p.add_argument("--workdir", default=None)
    p.add_argument("--port", type=int, default=18800)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--clients", type=int, default=10)
    p.add_argument("--per-client", type=int, default=20)
    p.add_argument("--big", type=int, default=100000)
    matrix.add_parser(sub)
    full.add_parser(sub)
    instructions.add_parser(sub)
    answer_memory.add_parser(sub)
    reservations.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except complete.Incomplete as exc:
        # A figure timed over a wrong answer is no figure: no table, no JSON.
        print(f"\n{exc}\nThe run stopped: a timed answer was not what the "
              "database holds.", file=sys.stderr)
        return 3


def _run(args):
    if args.command == "instructions":
        print(instructions.table(instructions.instructions(args)))
        return 0
    if args.command == "full":
        result = full.run(args)
        print(json.dumps(result, indent=2) if args.json else full.table(result))
        return
    if args.command == "reservations":
        result = reservations.run(args)
        print(json.dumps(result, indent=2) if args.json else reservations.table(result))
        return 0
    if args.command == "matrix":
        result = matrix.matrix(args)
        print(json.dumps(result, indent=2) if args.json else matrix.table(result))
        return 0
    if args.command == "load":
        result = _load(args)
    elif args.command == "load-http":
        result = _load_http(args)
    elif args.command == "query":
        result = runner.time_query(args.url, args.shape, args.runs, args.limit)
    elif args.command == "throughput":
        result = runner.throughput(args.url, args.shape, args.clients,
                                   args.seconds, args.limit)
    elif args.command == "console":
        result = _console_scenario(tempfile.mkdtemp(prefix="pl-bench-", dir=args.workdir),
                                   args.port, args.count, args.runs)
    elif args.command == "answer-memory":
        result = answer_memory.run(args)
    elif args.command == "claims":
        result = runner.claims(args.url, args.clients, args.per_client)
    else:
        result = _suite(args)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
