"""Run OpenStack Placement 16.0.0's published gabbi files over HTTP
against a live placement_lite, and judge the result.

    python -m tests.conformance.runner                  # every file, SQLite
    python -m tests.conformance.runner --file inventory.yaml -v
    python -m tests.conformance.runner --backend mysql+pymysql://root@127.0.0.1/
    python -m tests.conformance.runner --write-pending  # regenerate pending.txt

The release is fetched with `pip download` into a cache directory
(PLACEMENT_LITE_CONFORMANCE_CACHE, default under the system temp dir) and
only its `placement/tests/functional/gabbits/*.yaml` are unpacked; nothing
upstream is kept in this repository.

For each file: a fresh database on the chosen backend, an app built with
the settings the file's fixture asks for (tests/conformance/fixtures.py),
a waitress server on a free loopback port, the fixture building the
file's world through the API, then every test of the file over HTTP.

A failing test is tolerated only when it is listed: EXCLUSIONS (tests
that cannot pass over real HTTP whatever the server does, each with its
reason) or pending.txt (known differences not fixed yet). pending.txt is
a ratchet: a listed test that now passes is an error too, so the list
only shrinks. See docs/conformance.md.
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import traceback
import unittest
import zipfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import yaml
import waitress.server
from gabbi import handlers, suitemaker
from waitress import wasyncore

from placement_lite.app import create_app
from placement_lite.config import Settings
from tests.backends import backend_id, backend_urls, fresh_database
from tests.conformance import fixtures

RELEASE = "openstack-placement==16.0.0"
DIST_PREFIX = "openstack_placement-16.0.0"
GABBITS_IN_RELEASE = "placement/tests/functional/gabbits/"

ENABLE_ENV = "PLACEMENT_LITE_CONFORMANCE"
CACHE_ENV = "PLACEMENT_LITE_CONFORMANCE_CACHE"
REPORT_ENV = "PLACEMENT_LITE_CONFORMANCE_REPORT"
JOBS_ENV = "PLACEMENT_LITE_CONFORMANCE_JOBS"

PENDING_FILE = pathlib.Path(__file__).resolve().parent / "pending.txt"

# Tests that cannot pass over real HTTP against any server, because they
# depend on the in-process WSGI interception upstream runs them through.
# Keyed by test id; the value is the reason. Keep this short: anything a
# server can get right belongs in pending.txt until it is fixed.
EXCLUSIONS: dict[str, str] = {
    "basic-http.yaml::bad content length not int": (
        "sends `Content-Length: hi mom`; over a real connection the HTTP "
        "client (h11) refuses to put a non-integer length on the wire, so "
        "the request never reaches a server. Only an in-process WSGI call "
        "can hand the header to the app; our own in-process gabbits pin "
        "the app's answer."),
}


class DownloadError(Exception):
    """The release could not be fetched or unpacked."""


def default_cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get(CACHE_ENV) or
                        pathlib.Path(tempfile.gettempdir()) / "placement-lite-conformance")


def default_report_path(backend: str) -> pathlib.Path:
    if os.environ.get(REPORT_ENV):
        return pathlib.Path(os.environ[REPORT_ENV])
    return default_cache_dir() / f"report-{backend_id(backend)}.txt"


def _download(dist_dir: pathlib.Path) -> pathlib.Path:
    found = sorted(dist_dir.glob(DIST_PREFIX + "*")) if dist_dir.is_dir() else []
    if found:
        return found[0]
    dist_dir.mkdir(parents=True, exist_ok=True)
    # pip writes into a private directory and the archive is moved in
    # whole, so a run starting meanwhile never reads half a file.
    with tempfile.TemporaryDirectory(dir=dist_dir, prefix=".pip-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps",
               "--disable-pip-version-check", "--quiet", RELEASE, "-d", tmp]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DownloadError(f"pip download {RELEASE} failed: {exc}") from exc
        got = sorted(pathlib.Path(tmp).glob(DIST_PREFIX + "*"))
        if proc.returncode != 0 or not got:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise DownloadError(f"pip download {RELEASE} exited {proc.returncode}: "
                                + " | ".join(tail))
        os.replace(got[0], dist_dir / got[0].name)
        return dist_dir / got[0].name


def _gabbit_members(archive: pathlib.Path):
    """(file name, bytes) of every top-level gabbi YAML in the archive."""
    def wanted(name: str):
        # Wheels hold `placement/...`; sdists `openstack-placement-16.0.0/placement/...`.
        idx = name.find(GABBITS_IN_RELEASE)
        rest = name[idx + len(GABBITS_IN_RELEASE):] if idx >= 0 else ""
        return rest if rest.endswith(".yaml") and "/" not in rest else None

    if archive.suffix == ".whl" or archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                base = wanted(info.filename)
                if base:
                    yield base, zf.read(info)
    else:
        with tarfile.open(archive) as tf:
            for member in tf.getmembers():
                base = wanted(member.name)
                if base and member.isfile():
                    yield base, tf.extractfile(member).read()


def gabbits_dir(cache_dir: pathlib.Path | None = None) -> pathlib.Path:
    """The directory of the release's gabbi files, fetched and unpacked
    on first use and reused afterwards."""
    cache = pathlib.Path(cache_dir) if cache_dir else default_cache_dir()
    target = cache / "placement-16.0.0-gabbits"
    if (target / ".complete").exists():
        return target
    archive = _download(cache / "dist")
    try:
        members = list(_gabbit_members(archive))
    except (zipfile.BadZipFile, tarfile.TarError, OSError) as exc:
        # A damaged cached archive is dropped so the next run fetches it anew.
        archive.unlink(missing_ok=True)
        raise DownloadError(f"cannot read {archive.name}: {exc}") from exc
    if not members:
        raise DownloadError(f"{archive.name} holds no {GABBITS_IN_RELEASE}*.yaml")
    staging = pathlib.Path(tempfile.mkdtemp(dir=cache, prefix=".gabbits-"))
    for name, data in members:
        (staging / name).write_bytes(data)
    (staging / ".complete").write_text(f"{len(members)} files from {archive.name}\n")
    try:
        staging.rename(target)
    except OSError:
        # Another run unpacked the same files first.
        shutil.rmtree(staging, ignore_errors=True)
        if not (target / ".complete").exists():
            raise
    return target


# --- running ---------------------------------------------------------------

@contextmanager
def serving(app):
    """Serve `app` with waitress on a free loopback port; yield the port.

    The loop runs in short rounds in its own thread and, once told to
    stop, closes every channel itself: closing them from another thread
    through waitress's trigger races the trigger's own close (the loop can
    run the closing thunk before the waking byte is written).
    """
    srv = waitress.server.create_server(app, host="127.0.0.1", port=0, threads=4)
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            wasyncore.loop(timeout=0.05, map=srv._map, count=1)
        wasyncore.close_all(srv._map)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield srv.effective_port
    finally:
        stop.set()
        thread.join(timeout=10)
        srv.task_dispatcher.shutdown()


@dataclass
class Outcome:
    test_id: str
    status: str  # pass | fail | error | skip
    message: str = ""


@dataclass
class FileResult:
    name: str
    outcomes: list = field(default_factory=list)
    fixture_error: str = ""
    seconds: float = 0.0

    def failing(self):
        return [o for o in self.outcomes if o.status in ("fail", "error")]


def _describe(test) -> str:
    """What was sent and what came back, for a failure's message."""
    lines = []
    data = getattr(test, "test_data", {})
    url = getattr(test, "url", None) or data.get("url")
    lines.append(f"request: {data.get('method', '?')} {url}")
    response = getattr(test, "response", None)
    if response:
        status = response.get("status")
        headers = {k: v for k, v in response.items() if k != "status"}
        lines.append(f"response status: {status}")
        lines.append(f"response headers: {headers}")
    output = getattr(test, "output", None)
    if output is not None:
        text = output if isinstance(output, str) else repr(output)
        lines.append(f"response body: {text[:3000]}")
    return "\n".join(lines)


def _summary(err) -> str:
    """The exception and its causes, without the frames (gabbi's and
    httpx's stacks say nothing about the server)."""
    _type, value, _tb = err
    parts = []
    while value is not None:
        parts.append("".join(traceback.format_exception_only(type(value), value)).strip())
        value = value.__cause__ or value.__context__
    return "\ncaused by: ".join(parts)


class _Recorder(unittest.TestResult):
    """Keeps every test's outcome, successes included, in order."""

    def __init__(self, ids):
        super().__init__()
        self.ids = ids
        self.outcomes = []

    def _record(self, test, status, message=""):
        self.outcomes.append(Outcome(self.ids.get(id(test), test.id()),
                                         status, message))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._record(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._record(test, "fail", _summary(err) + "\n" + _describe(test))

    def addError(self, test, err):
        super().addError(test, err)
        self._record(test, "error", _summary(err) + "\n" + _describe(test))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._record(test, "skip", reason)


def case_ids(file_name: str, suite_dict: dict) -> list[str]:
    """`file.yaml::test name`, numbered from the second use of a name."""
    seen = collections.Counter()
    ids = []
    for test in suite_dict.get("tests", []):
        name = str(test.get("name"))
        seen[name] += 1
        ids.append(f"{file_name}::{name}" + (f" [{seen[name]}]" if seen[name] > 1 else ""))
    return ids


def file_settings(suite_dict: dict) -> dict:
    """The server settings the file's fixtures ask for."""
    settings: dict = {}
    for name in suite_dict.get("fixtures") or ["APIFixture"]:
        cls = getattr(fixtures, name, None)
        if cls is None:
            raise LookupError(f"no conformance fixture named {name}")
        settings.update(cls.settings)
    return settings


def run_file(path: pathlib.Path, backend: str = "sqlite") -> FileResult:
    started = time.monotonic()
    result = FileResult(path.name)
    with open(path, encoding="utf-8") as fh:
        suite_dict = yaml.safe_load(fh)
    ids = case_ids(path.name, suite_dict)
    # Plain HTTP: certificate checks do nothing but load the CA bundle
    # for every test's client (60 ms each, most of the run's time).
    suite_dict.setdefault("defaults", {}).setdefault("cert_validate", False)
    try:
        settings = file_settings(suite_dict)
    except LookupError as exc:
        result.fixture_error = str(exc)
        return result
    with ExitStack() as stack:
        # Fixtures export $ENVIRON values through the process environment;
        # put it back after each file so no file sees another's values
        # (which files ran before in a process varies with --jobs).
        saved_env = dict(os.environ)
        stack.callback(lambda: (os.environ.clear(), os.environ.update(saved_env)))
        try:
            db = stack.enter_context(fresh_database(backend))
            app = create_app(Settings(db=db.url, **settings), db)
            port = stack.enter_context(serving(app))
        except Exception:  # noqa: BLE001 - reported for the file, the run goes on
            result.fixture_error = ("the server could not be started for this file "
                                    f"(settings {settings}):\n{traceback.format_exc()}")
            return result
        fixtures.CURRENT["url"] = f"http://127.0.0.1:{port}"
        stack.callback(fixtures.CURRENT.update, url=None)
        suite = suitemaker.test_suite_from_dict(
            unittest.TestLoader(), path.stem.replace("-", "_").replace(".", "_"),
            suite_dict, str(path.parent), "127.0.0.1", port, fixtures, None,
            handlers=[h() for h in handlers.RESPONSE_HANDLERS],
            test_loader_name="conformance")
        tests = list(suite)
        recorder = _Recorder({id(t): i for t, i in zip(tests, ids)})
        suite.run(recorder)
    # Gabbi reports a fixture that raised as an error of the first test
    # and skips the rest: that is our fixture (or the API it used), not a
    # behaviour the file tests, so it is reported for the whole file.
    skipped = [o for o in recorder.outcomes if o.status == "skip"]
    if skipped and any(o.message == "fixture failure" for o in skipped):
        errors = [o for o in recorder.outcomes if o.status == "error"]
        result.fixture_error = errors[0].message if errors else "fixture failure"
        result.outcomes = []
    else:
        result.outcomes = recorder.outcomes
    result.seconds = time.monotonic() - started
    return result


def select_files(directory: pathlib.Path, names=None) -> list[pathlib.Path]:
    files = sorted(directory.glob("*.yaml"))
    if not names:
        return files
    wanted = {n if n.endswith(".yaml") else n + ".yaml" for n in names}
    chosen = [f for f in files if f.name in wanted]
    missing = wanted - {f.name for f in chosen}
    if missing:
        raise SystemExit(f"no such upstream file: {', '.join(sorted(missing))}")
    return chosen


def default_jobs(backend: str) -> int:
    """Files run in parallel worker processes on database servers, where
    most of a file's time is waiting for the server to create and migrate
    its fresh database; on SQLite one process is as fast."""
    if os.environ.get(JOBS_ENV):
        return max(1, int(os.environ[JOBS_ENV]))
    return 1 if backend == "sqlite" else 4


def run_files(files, backend: str = "sqlite", progress=None,
              jobs: int | None = None) -> list[FileResult]:
    """Run the files, in order or (jobs > 1) in separate processes, each
    file alone in its process at a time: fixtures export `$ENVIRON`
    values through the process environment."""
    files = list(files)
    jobs = default_jobs(backend) if jobs is None else jobs
    if jobs <= 1 or len(files) <= 1:
        results = []
        for path in files:
            results.append(run_file(path, backend))
            if progress:
                progress(results[-1])
        return results
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(min(jobs, len(files)),
                                                mp_context=ctx) as pool:
        futures = {pool.submit(run_file, path, backend): i
                   for i, path in enumerate(files)}
        results = [None] * len(files)
        for fut in concurrent.futures.as_completed(futures):
            results[futures[fut]] = fut.result()
            if progress:
                progress(results[futures[fut]])
    return results


# --- judging ---------------------------------------------------------------

def read_pending(path: pathlib.Path = PENDING_FILE) -> dict[str, set]:
    """test id -> the backends it is pending on (empty set: every backend).

    Lines are `file.yaml::test name`, optionally prefixed by `[backend] `
    when a difference shows on one backend only; `#` starts a comment.
    """
    pending: dict[str, set] = {}
    if not path.exists():
        return pending
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        backend = None
        if line.startswith("["):
            backend, _sep, line = line[1:].partition("] ")
        pending.setdefault(line, set())
        if backend:
            pending[line].add(backend)
    return pending


def pending_for(pending: dict[str, set], backend: str) -> set:
    bid = backend_id(backend)
    return {tid for tid, only in pending.items() if not only or bid in only}


@dataclass
class Verdict:
    new_failures: list
    fixed_pending: list
    stale_pending: list
    passing_exclusions: list
    fixture_errors: list

    @property
    def ok(self) -> bool:
        return not (self.new_failures or self.fixed_pending or self.stale_pending
                    or self.passing_exclusions or self.fixture_errors)

    def problems(self) -> list[str]:
        out = []
        out += [f"fixture or server setup failed for {name}:\n{msg}"
                for name, msg in self.fixture_errors]
        out += [f"new failure: {o.test_id}\n{o.message}" for o in self.new_failures]
        out += [f"now passes, remove from pending.txt: {tid}" for tid in self.fixed_pending]
        out += [f"pending.txt or EXCLUSIONS names a test that does not exist: {tid}"
                for tid in self.stale_pending]
        out += [f"excluded test passes, drop its exclusion: {tid}"
                for tid in self.passing_exclusions]
        return out


def judge(results, pending: set, exclusions=EXCLUSIONS) -> Verdict:
    """Compare a run with what is tolerated; only the files run count
    for the stale-entry check."""
    run_files_names = {r.name for r in results}
    seen, new, fixed, passing_excl = set(), [], [], []
    for res in results:
        for o in res.outcomes:
            seen.add(o.test_id)
            failing = o.status in ("fail", "error")
            if o.test_id in exclusions:
                if o.status == "pass":
                    passing_excl.append(o.test_id)
            elif failing and o.test_id not in pending:
                new.append(o)
            elif not failing and o.test_id in pending:
                # A pending test must fail; a skip counts as not failing.
                fixed.append(o.test_id)
    fixture_errors = [(r.name, r.fixture_error) for r in results if r.fixture_error]
    broken = {r.name for r in results if r.fixture_error}
    judged = run_files_names - broken
    stale = sorted(tid for tid in set(pending) | set(exclusions)
                   if tid.split("::", 1)[0] in judged and tid not in seen)
    return Verdict(new, sorted(fixed), stale, sorted(passing_excl), fixture_errors)


def counts(res: FileResult, exclusions=EXCLUSIONS):
    counted = [o for o in res.outcomes if o.test_id not in exclusions]
    passed = sum(1 for o in counted if o.status == "pass")
    return passed, len(counted)


def table(results, backend: str, exclusions=EXCLUSIONS) -> str:
    lines = [f"Placement 16.0.0 gabbits against placement_lite "
             f"(backend: {backend_id(backend)})",
             f"{'file':<48} {'passed/counted':>14} {'excluded':>8} {'secs':>6}"]
    tot_p = tot_c = tot_x = 0
    for res in results:
        if res.fixture_error:
            lines.append(f"{res.name:<48} {'FIXTURE ERROR':>14}")
            continue
        passed, counted = counts(res, exclusions)
        excluded = len(res.outcomes) - counted
        tot_p, tot_c, tot_x = tot_p + passed, tot_c + counted, tot_x + excluded
        lines.append(f"{res.name:<48} {f'{passed}/{counted}':>14} "
                     f"{excluded or '':>8} {res.seconds:>6.1f}")
    pct = f" ({100.0 * tot_p / tot_c:.1f}%)" if tot_c else ""
    lines.append(f"{'TOTAL':<48} {f'{tot_p}/{tot_c}':>14} {tot_x or '':>8}{pct}")
    return "\n".join(lines)


def full_report(results, backend: str, verdict: Verdict | None = None) -> str:
    parts = [table(results, backend)]
    fails = [(res.name, o) for res in results for o in res.failing()]
    errs = [(res.name, res.fixture_error) for res in results if res.fixture_error]
    if errs:
        parts.append("\n== Fixture errors ==")
        parts += [f"\n--- {name}\n{msg}" for name, msg in errs]
    if fails:
        parts.append(f"\n== Failing tests ({len(fails)}) ==")
        parts += [f"\n--- {o.test_id}" + (" [excluded]" if o.test_id in EXCLUSIONS else "")
                  + f"\n{o.message}" for _name, o in fails]
    ran = {o.test_id for res in results for o in res.outcomes}
    excluded = [(tid, why) for tid, why in EXCLUSIONS.items() if tid in ran]
    if excluded:
        parts.append("\n== Excluded (not counted) ==")
        parts += [f"{tid}: {why}" for tid, why in excluded]
    if verdict is not None:
        problems = verdict.problems()
        parts.append("\n== Ratchet ==\n" + ("OK" if not problems else
                     f"{len(problems)} problem(s):\n" +
                     "\n".join(p.splitlines()[0] for p in problems)))
    return "\n".join(parts) + "\n"


def write_pending(per_backend: dict[str, list], path: pathlib.Path = PENDING_FILE):
    """Write every failing (non-excluded) test, grouped by file; a test
    failing on some backends only carries their names."""
    failing: dict[str, set] = {}
    order: dict[str, tuple] = {}
    for backend, results in per_backend.items():
        for res in results:
            if res.fixture_error:
                raise SystemExit(f"{res.name}: fixture failed on "
                                 f"{backend_id(backend)}, fix it first:\n{res.fixture_error}")
            for idx, o in enumerate(res.outcomes):
                if o.status in ("fail", "error") and o.test_id not in EXCLUSIONS:
                    failing.setdefault(o.test_id, set()).add(backend_id(backend))
                    order.setdefault(o.test_id, (res.name, idx))
    all_backends = {backend_id(b) for b in per_backend}
    lines = [
        "# Placement 16.0.0 gabbi tests that fail against placement_lite today:",
        "# known differences still to fix. The conformance test fails when one",
        "# of these passes (remove it) or when a test not listed fails.",
        "# Regenerate: python -m tests.conformance.runner --write-pending",
        f"# (generated on: {', '.join(sorted(all_backends))})",
    ]
    current = None
    for tid in sorted(failing, key=lambda t: order[t]):
        fname = order[tid][0]
        if fname != current:
            lines += ["", f"# {fname}"]
            current = fname
        only = failing[tid]
        if only == all_backends:
            lines.append(tid)
        else:
            lines += [f"[{b}] {tid}" for b in sorted(only)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(failing)


# --- command line ----------------------------------------------------------

def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.conformance.runner",
        description="Run Placement 16.0.0's gabbi files against placement_lite over HTTP.")
    parser.add_argument("--file", action="append", default=[],
                        help="an upstream file name (e.g. inventory.yaml); repeatable")
    parser.add_argument("--backend", action="append", default=[],
                        help="sqlite (default) or a server URL as in "
                             "PLACEMENT_LITE_TEST_DB_URLS; repeatable")
    parser.add_argument("-j", "--jobs", type=int, default=None,
                        help=f"worker processes (default: ${JOBS_ENV}, else 1 "
                             "on sqlite and 4 on a database server)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print every failure's full message")
    parser.add_argument("--report", help=f"report file (default: ${REPORT_ENV} "
                        "or one per backend in the cache dir)")
    parser.add_argument("--write-pending", action="store_true",
                        help="run every file on sqlite and the backends in "
                             "PLACEMENT_LITE_TEST_DB_URLS (or --backend) and "
                             "rewrite tests/conformance/pending.txt")
    args = parser.parse_args(argv)

    try:
        directory = gabbits_dir()
    except DownloadError as exc:
        print(f"cannot fetch {RELEASE}: {exc}", file=sys.stderr)
        return 2
    backends = args.backend or (backend_urls() if args.write_pending else ["sqlite"])
    if args.write_pending and len(backends) == 1:
        print("note: writing pending.txt from one backend; set "
              "PLACEMENT_LITE_TEST_DB_URLS (as .ci/run does) so differences "
              "seen on one backend only are tagged with it", file=sys.stderr)
    if args.write_pending and args.file:
        parser.error("--write-pending runs every file; drop --file")
    files = select_files(directory, args.file)
    pending_all = read_pending()

    def progress(res):
        if res.fixture_error:
            print(f"  {res.name}: FIXTURE ERROR", file=sys.stderr)
        else:
            p, c = counts(res)
            print(f"  {res.name}: {p}/{c} ({res.seconds:.1f}s)", file=sys.stderr)

    per_backend = {}
    status = 0
    for backend in backends:
        print(f"running {len(files)} file(s) on {backend_id(backend)}...", file=sys.stderr)
        results = run_files(files, backend, progress=progress, jobs=args.jobs)
        per_backend[backend] = results
        verdict = judge(results, pending_for(pending_all, backend))
        text = full_report(results, backend, verdict)
        report = pathlib.Path(args.report) if args.report else default_report_path(backend)
        if len(backends) > 1 and args.report:
            report = report.with_name(f"{report.stem}-{backend_id(backend)}{report.suffix}")
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(text, encoding="utf-8")
        print(table(results, backend))
        for res in results:
            for o in res.failing():
                tag = ("excluded" if o.test_id in EXCLUSIONS else
                       "pending" if o.test_id in pending_for(pending_all, backend) else "NEW")
                if args.verbose:
                    print(f"\n--- FAIL [{tag}] {o.test_id}\n{o.message}")
                else:
                    print(f"FAIL [{tag}] {o.test_id}")
            if res.fixture_error:
                print(f"\n--- FIXTURE ERROR {res.name}\n{res.fixture_error}")
        if not args.write_pending:
            problems = verdict.problems()
            if problems:
                status = 1
                print(f"\nratchet: {len(problems)} problem(s):")
                for p in problems:
                    print("  " + p.splitlines()[0])
            else:
                print("\nratchet: OK")
        print(f"report written to {report}")
    if args.write_pending:
        n = write_pending(per_backend)
        print(f"wrote {n} pending test(s) to {PENDING_FILE}")
    return status


if __name__ == "__main__":
    sys.exit(main())
