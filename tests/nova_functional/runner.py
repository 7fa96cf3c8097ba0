"""Run nova's own functional tests that exercise Placement, against
Placement and against placement_lite, and judge the result.

    python -m tests.nova_functional.runner                 # both, the default modules
    python -m tests.nova_functional.runner --against lite  # placement_lite only
    python -m tests.nova_functional.runner --module test_report_client -v

The tests come from the source release of the nova that is installed
(`pip download nova==<version> --no-binary :all:`, unpacked into a cache
directory, never kept here): the wheel ships nova/tests/functional but not
etc/nova/api-paste.ini, without which nova's API fixture cannot start, and
nova runs these tests from its source tree. They run as nova's tox
`functional` environment runs them: `stestr --test-path=./nova/tests/functional
run` in the tree, under eventlet, with the same environment variables.

Against Placement nothing is changed. Against placement_lite stestr's
workers start through tests/nova_functional/boot.py (stestr's `$PYTHON`),
which points Placement's test fixture at placement_lite (hook.py) and then
runs stestr's own worker module; no nova or Placement code changes.

The run fails on any test that passes against Placement and not against
placement_lite (unless in PENDING), on any test that fails against
Placement (unless in EXCLUSIONS, with the reason), and on a PENDING or
EXCLUSIONS entry that no longer fails. See docs/conformance.md.
"""
from __future__ import annotations

import argparse
import collections
import importlib.metadata
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field

ENABLE_ENV = "PLACEMENT_LITE_NOVA_FUNCTIONAL"
CACHE_ENV = "PLACEMENT_LITE_NOVA_CACHE"
JOBS_ENV = "PLACEMENT_LITE_NOVA_JOBS"

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]

# nova/tests/functional modules whose tests drive Placement: the report
# client, provider trees, aggregates (placement aggregates and the
# pre-filters that query them), the scheduler, and the regression tests
# of nova bugs whose code reads or checks Placement (usages, allocations
# after a delete, evacuation or a failed move; ironic nodes; unified
# limits counted from Placement). The larger modules (test_servers,
# test_servers_resource_request, test_nova_manage, test_unified_limits)
# take more than CI's time; run them with --module.
REGRESSIONS = tuple(f"regressions.test_bug_{n}" for n in (
    1671648, 1679750, 1702454, 1718512, 1719730, 1735407, 1741364, 1764556,
    1764883, 1825537, 1837955, 1839560, 1862633, 1886418, 1896463, 2025480,
    2098496, 2102038, 2111440, 2134375, 2140631))
MODULES = ("test_report_client", "test_servers_provider_tree",
           "test_aggregates", "test_scheduler") + REGRESSIONS

# Tests that fail against Placement itself in this environment, so say
# nothing about placement_lite: test id -> reason. Not counted; each must
# keep failing against Placement, or the run says to remove it.
EXCLUSIONS: dict[str, str] = {}

# Tests that pass against Placement and fail against placement_lite: known
# differences not fixed yet, test id -> reason. Only shrinks.
PENDING: dict[str, str] = {}

# What nova's tox.ini [testenv] and [testenv:functional] set (LC_ALL:
# C.UTF-8 where tox says en_US.utf-8, which a minimal machine may lack).
TOX_ENV = {
    "LANGUAGE": "en_US",
    "LC_ALL": "C.UTF-8",
    "OS_STDOUT_CAPTURE": "1",
    "OS_STDERR_CAPTURE": "1",
    "OS_TEST_TIMEOUT": "160",
    "PYTHONDONTWRITEBYTECODE": "1",
    "NOVA_RAISE_ON_GREENLET_LEAK": "True",
    "OS_NOVA_DISABLE_EVENTLET_PATCHING": "False",
}

PASSED = {"success"}
SKIPPED = {"skip"}


class DownloadError(Exception):
    """The nova source release could not be fetched or unpacked."""


class RunTimeout(Exception):
    """A stestr run went past its time and was ended."""


def nova_version() -> str:
    try:
        return importlib.metadata.version("nova")
    except importlib.metadata.PackageNotFoundError as exc:
        raise DownloadError("nova is not installed (pip install 'nova>=34')") from exc


def default_cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get(CACHE_ENV) or
                        pathlib.Path(tempfile.gettempdir()) / "placement-lite-nova")


def _download(version: str, dist_dir: pathlib.Path) -> pathlib.Path:
    prefix = f"nova-{version}"
    found = sorted(dist_dir.glob(prefix + ".tar.gz")) if dist_dir.is_dir() else []
    if found:
        return found[0]
    dist_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dist_dir, prefix=".pip-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--quiet", f"nova=={version}", "-d", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DownloadError(f"pip download nova=={version} failed: {exc}") from exc
        got = sorted(pathlib.Path(tmp).glob(prefix + ".tar.gz"))
        if proc.returncode != 0 or not got:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise DownloadError(f"pip download nova=={version} exited {proc.returncode}: "
                                + " | ".join(tail))
        os.replace(got[0], dist_dir / got[0].name)
        return dist_dir / got[0].name


def source_tree(cache: pathlib.Path | None = None, version: str | None = None) -> pathlib.Path:
    """The unpacked nova source release matching the installed nova."""
    version = version or nova_version()
    cache = cache or default_cache_dir()
    tree = cache / f"nova-{version}"
    if (tree / ".complete").exists():
        return tree
    archive = _download(version, cache / "dist")
    with tempfile.TemporaryDirectory(dir=cache, prefix=".unpack-") as tmp:
        try:
            with tarfile.open(archive) as tf:
                tf.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise DownloadError(f"cannot unpack {archive.name}: {exc}") from exc
        unpacked = pathlib.Path(tmp) / f"nova-{version}"
        if not (unpacked / "nova" / "tests" / "functional").is_dir():
            raise DownloadError(f"{archive.name} holds no nova/tests/functional")
        shutil.rmtree(tree, ignore_errors=True)
        os.replace(unpacked, tree)
    (tree / ".complete").write_text(version + "\n")
    return tree


REQUIREMENTS = REPO_ROOT / "tests" / "nova_functional" / "requirements.txt"


def environment_problems() -> list[str]:
    """What this interpreter lacks to run nova's tests as nova runs them."""
    import importlib.util

    problems = [f"{name} is not installed" for name in
                ("nova", "placement", "stestr", "ddt", "requests_mock", "osprofiler",
                 "wsgi_intercept", "oslotest")
                if importlib.util.find_spec(name) is None]
    import sqlalchemy
    if tuple(int(p) for p in sqlalchemy.__version__.split(".")[:2]) >= (2, 1):
        # nova's WarningsFixture makes SQLAlchemy deprecation warnings
        # raised from nova's own modules errors, and 2.1 deprecates the
        # noload() its instance queries use: most tests would fail against
        # Placement too, saying nothing about either server.
        problems.append(f"SQLAlchemy {sqlalchemy.__version__}: nova's tests need 2.0.x")
    if problems:
        problems.append(f"pip install -r {REQUIREMENTS.relative_to(REPO_ROOT)}")
    return problems


def selection_regex(modules) -> str:
    names = "|".join(sorted(m.replace(".", r"\.") for m in modules))
    return rf"^nova\.tests\.functional\.({names})\."


def environment(against: str, base: dict | None = None) -> dict:
    """The environment stestr runs in: nova's tox one; against
    placement_lite, also $PYTHON (the worker interpreter, booted through
    our hook) and this repository on the path."""
    env = dict(os.environ if base is None else base)
    env.update(TOX_ENV)
    env.pop("PYTHON", None)
    if against == "lite":
        env["PYTHON"] = f"{sys.executable} -m tests.nova_functional.boot"
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


@dataclass
class Run:
    against: str
    statuses: dict  # test id -> subunit status (success, fail, skip, ...)
    seconds: float
    log: pathlib.Path
    durations: dict = field(default_factory=dict)  # test id -> seconds


def run_stestr(tree: pathlib.Path, against: str, modules=MODULES, jobs: int | None = None,
               workdir: pathlib.Path | None = None, timeout: float = 1800) -> Run:
    workdir = workdir or tree.parent
    repo = workdir / f"stestr-{against}"
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)  # stestr makes only the .stestr inside it
    log = workdir / f"run-{against}.log"
    # Two workers per CPU: the tests spend most of their time waiting
    # (nova's helpers poll for a server's state), and on 2 CPUs 4 workers
    # finish the default modules in about two thirds of the time 2 take.
    jobs = jobs or int(os.environ.get(JOBS_ENV) or 0) or 2 * (os.cpu_count() or 1)
    base = [sys.executable, "-m", "stestr", "--test-path", "./nova/tests/functional",
            "--top-dir", "./", "--repo-url", str(repo)]
    env = environment(against)
    started = time.monotonic()
    with open(log, "wb") as out:
        # A session of its own, so a run past its time is ended with its
        # workers (stestr's children), not just stestr.
        proc = subprocess.Popen(
            base + ["run", "--concurrency", str(jobs), selection_regex(modules)],
            cwd=tree, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise RunTimeout(f"the run against {against} did not finish in {timeout:.0f} s "
                             f"(log: {log})") from None
    seconds = time.monotonic() - started
    stream = subprocess.run(base + ["last", "--subunit"], cwd=tree, env=env,
                            capture_output=True, timeout=300, check=False).stdout
    statuses, durations = parse_subunit(stream)
    return Run(against, statuses, seconds, log, durations)


def parse_subunit(stream: bytes) -> tuple[dict, dict]:
    """(test id -> final status, test id -> seconds) from a subunit v2 stream."""
    import io

    import subunit
    import testtools

    statuses: dict = {}
    durations: dict = {}

    def on_test(test):
        statuses[test["id"]] = test["status"]
        stamps = [t for t in test["timestamps"] if t is not None]
        if len(stamps) == 2:
            durations[test["id"]] = (stamps[1] - stamps[0]).total_seconds()

    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    subunit.ByteStreamToStreamResult(io.BytesIO(stream), non_subunit_name="stdout").run(result)
    result.stopTestRun()
    return statuses, durations


@dataclass
class Verdict:
    problems: list = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def judge(lite: dict, control: dict | None, exclusions=None, pending=None) -> Verdict:
    """`lite`, `control`: test id -> status against placement_lite and
    Placement (None: no control run, so exclusions are taken as given)."""
    exclusions = EXCLUSIONS if exclusions is None else exclusions
    pending = PENDING if pending is None else pending
    verdict = Verdict()
    if not lite:
        verdict.problems.append("no test ran against placement_lite")
    if control is not None and set(control) != set(lite):
        only = sorted(set(control) ^ set(lite))
        verdict.problems.append(f"the two runs ran different tests: {only[:5]}")
    for test_id in sorted(lite):
        ours, theirs = lite[test_id], (control or {}).get(test_id)
        if test_id in exclusions:
            if control is not None and theirs in PASSED:
                verdict.problems.append(f"excluded but passes against Placement, "
                                        f"remove from EXCLUSIONS: {test_id}")
            continue
        if control is not None and theirs not in PASSED | SKIPPED:
            verdict.problems.append(f"fails against Placement too ({theirs}): {test_id}; "
                                    "an environment problem, or list it in EXCLUSIONS "
                                    "with the reason")
            continue
        if test_id in pending:
            if ours in PASSED:
                verdict.problems.append(f"now passes, remove from PENDING: {test_id}")
            continue
        if control is not None and ours != theirs:
            verdict.problems.append(f"{theirs} against Placement, {ours} against "
                                    f"placement_lite: {test_id}")
        elif ours not in PASSED | SKIPPED:
            verdict.problems.append(f"{ours} against placement_lite: {test_id}")
    stale = sorted(t for t in set(exclusions) | set(pending) if t not in lite)
    verdict.problems += [f"listed but did not run: {t}" for t in stale]
    return verdict


def table(runs: list[Run], exclusions=None) -> str:
    """Per module: tests counted, and passed / seconds in each run."""
    exclusions = EXCLUSIONS if exclusions is None else exclusions
    modules = sorted({t.split(".")[3] for r in runs for t in r.statuses})
    head = f"{'module':32} {'tests':>5}" + "".join(
        f" {r.against + ' passed':>16} {'test s':>7}" for r in runs)
    lines = [head]
    for module in modules + ["total"]:
        def mine(run):
            return [t for t in run.statuses if t not in exclusions and
                    (module == "total" or t.split(".")[3] == module)]
        count = len(mine(runs[0]))
        cells = "".join(
            f" {sum(r.statuses[t] in PASSED for t in mine(r)):>16}"
            f" {sum(r.durations.get(t, 0) for t in mine(r)):>7.0f}" for r in runs)
        lines.append(f"{module:32} {count:>5}{cells}")
    lines.append("wall clock: " + ", ".join(f"{r.against} {r.seconds:.0f} s" for r in runs))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", choices=("both", "lite", "placement"), default="both")
    parser.add_argument("--module", action="append", help="nova/tests/functional module "
                        f"(repeatable; default: {', '.join(MODULES)})")
    parser.add_argument("--jobs", type=int, help="stestr workers (default: 2 per CPU)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each test")
    args = parser.parse_args(argv)
    problems = environment_problems()
    if problems:
        print("cannot run nova's tests here: " + "; ".join(problems))
        return 2
    modules = tuple(args.module or MODULES)
    order = {"both": ("placement", "lite"), "lite": ("lite",), "placement": ("placement",)}
    try:
        tree = source_tree()
        runs = [run_stestr(tree, against, modules, args.jobs) for against in order[args.against]]
    except (DownloadError, RunTimeout) as exc:
        print(exc)
        return 2
    if args.verbose:
        for run in runs:
            counts = collections.Counter(run.statuses.values())
            print(f"{run.against}: {dict(counts)}  log: {run.log}")
            for test_id, status in sorted(run.statuses.items()):
                print(f"  {status:8} {test_id}")
    print(table(runs))
    by = {r.against: r.statuses for r in runs}
    if "lite" not in by:
        return 0
    verdict = judge(by["lite"], by.get("placement"))
    for problem in verdict.problems:
        print(problem)
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
