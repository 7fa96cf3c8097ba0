"""`python -m bench instructions`: what one operation of each workload
costs in instructions, counted by valgrind's callgrind, in this tree and
(with --compare REF) in another commit.

Wall and CPU time move with the machine: on this 2-core machine the same
code took 1.6x the CPU time per request on one day as on another
(bench/README.md, fifth pass). Instructions do not. Each workload runs in
one process with the application built in it (bench/instr_child.py: no
HTTP server, no database server counted), once with N operations and once
with none; the difference over N is the figure. What it leaves out
(waitress, the database's own CPU, waits) the matrix measures.

Every side gets a fresh database loaded by its own code with the 1k flat
and nested worlds and 20 providers for claims.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile

from bench.instr_child import WORKLOADS
from bench.matrix import (
    BACKENDS, HERE, REPO, _drop_db, _fresh_db, checkout, remove_worktrees)

_COLLECTED = re.compile(r"Collected : (\d+)")


def _instructions(tree: str, url: str, workload: str, count: int) -> int:
    env = dict(os.environ, PYTHONPATH=tree, PYTHONHASHSEED="0")
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, os.path.join(HERE, "instr_child.py"), url, workload,
         str(count)],
        env=env, cwd=tree, capture_output=True, text=True)
    found = _COLLECTED.search(run.stderr)
    if run.returncode != 0 or not found:
        raise RuntimeError(f"{workload} x{count} under callgrind failed:\n"
                           + run.stderr[-3000:])
    return int(found.group(1))


def _side(label: str, tree: str, args, workdir: str) -> dict:
    url = _fresh_db(args.db, workdir, label)
    try:
        for shape, count in (("flat", 1000), ("nested", 1000), ("race", 20)):
            subprocess.run([sys.executable, os.path.join(HERE, "worlds.py"), url,
                            shape, str(count)], env=dict(os.environ, PYTHONPATH=tree),
                           cwd=tree, check=True)
        # Start-up and the warm-up every run does: what each figure is above.
        base = _instructions(tree, url, "load", 0)
        out = {}
        # The workloads that write last: loading adds providers, which a
        # later process's start-up read of the copy would count.
        for workload in WORKLOADS:
            if args.only and not any(f in workload for f in args.only.split(",")):
                continue
            total = _instructions(tree, url, workload, args.ops)
            out[workload] = (total - base) / args.ops
            print(f"# {label}: {workload}: {out[workload] / 1e6:.2f} M instructions "
                  "per operation", file=sys.stderr)
        return out
    finally:
        _drop_db(url)


def instructions(args) -> dict:
    workdir = tempfile.mkdtemp(prefix="pl-instr-", dir=args.workdir)
    worktrees: list = []
    try:
        sides = [("new", REPO)]
        if args.compare:
            sides.insert(0, ("base", checkout(workdir, "base", args.compare,
                                              worktrees)))
        return {"db": args.db, "compare": args.compare, "ops": args.ops,
                "sides": {label: _side(label, tree, args, workdir)
                          for label, tree in sides}}
    finally:
        remove_worktrees(worktrees)


def table(result: dict) -> str:
    sides = result["sides"]
    labels = list(sides)
    head = ["workload"] + [f"{label} (M instructions per op)" for label in labels]
    if len(labels) == 2:
        head.append("ratio")
    lines = [f"{result['db']}, in-process, {result['ops']} operations per figure",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for workload in sides[labels[-1]]:
        cells = [workload] + [f"{sides[label][workload] / 1e6:.2f}" for label in labels]
        if len(labels) == 2:
            cells.append(f"{sides[labels[0]][workload] / sides[labels[1]][workload]:.3f}x")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def add_parser(sub):
    p = sub.add_parser("instructions", help="instructions per operation, in "
                       "process under callgrind, optionally against another commit")
    p.add_argument("--db", choices=BACKENDS,
                   default="sqlite")
    p.add_argument("--compare", help="a commit to count beside this tree")
    p.add_argument("--ops", type=int, default=20, help="operations per figure")
    p.add_argument("--only", help="comma-separated name fragments of workloads")
    p.add_argument("--workdir", default=None)
    return p
