"""`placement-lite serve --workers N` as an operator runs it."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest

from tests.backends import backend_id, backend_urls, fresh_url
from tests.servers import children, command, ready, serve, start, stop, wait_until


@pytest.fixture
def sqlite_url(tmp_path):
    return f"sqlite:///{tmp_path / 'service.sqlite'}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_workers_share_one_socket_and_are_replaced(sqlite_url):
    with serve(sqlite_url, "--workers", "2") as srv:
        pids = wait_until(lambda: (lambda c: c if len(c) == 2 else None)(
            children(srv.proc.pid)))
        assert "2 workers" in srv.output and "database: sqlite:///" in srv.output
        for _ in range(10):
            status, _h, body = srv.request("GET", "/healthcheck", token=None)
            assert status == 200 and body["status"] == "ok"

        os.kill(pids[0], signal.SIGKILL)
        replaced = wait_until(lambda: (lambda c: c if len(c) == 2 and pids[0] not in c
                                       else None)(children(srv.proc.pid)))
        assert pids[1] in replaced
        srv.wait_for_line(r"worker \d \(pid %d\) exited with signal 9" % pids[0])
        for _ in range(10):
            assert srv.request("GET", "/", token=None)[0] == 200

        os.kill(srv.proc.pid, signal.SIGTERM)
        assert srv.proc.wait(timeout=20) == 0
        assert not [p for p in replaced if _alive(p)]
        assert "Traceback" not in srv.output


def test_workers_stop_when_the_supervisor_is_killed(sqlite_url):
    with serve(sqlite_url, "--workers", "2") as srv:
        pids = wait_until(lambda: (lambda c: c if len(c) == 2 else None)(
            children(srv.proc.pid)))
        os.kill(srv.proc.pid, signal.SIGKILL)
        srv.proc.wait(timeout=10)
        wait_until(lambda: not [p for p in pids if _alive(p) and not _zombie(p)],
                   timeout=15)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_stops_cleanly(sqlite_url, workers):
    with serve(sqlite_url, "--workers", workers) as srv:
        assert srv.request("GET", "/healthcheck", token=None)[0] == 200
        # A terminal's Ctrl-C signals the whole foreground process group.
        os.killpg(srv.proc.pid, signal.SIGINT)
        assert srv.proc.wait(timeout=20) == 0
        assert "Traceback" not in srv.output
        assert "KeyboardInterrupt" not in srv.output


def test_environment_configures_serve(sqlite_url):
    env = {"PLACEMENT_LITE_WORKERS": "2", "PLACEMENT_LITE_THREADS": "3",
           "PLACEMENT_LITE_METRICS": "true"}
    with serve(sqlite_url, env=env) as srv:
        assert "2 workers, 3 threads each" in srv.output
        assert srv.request("GET", "/metrics", token=None)[0] == 200


def _slow_app_program(serve: str) -> str:
    """A child program: a WSGI app `slow` that sleeps for the seconds its
    path names, on a socket `sock` of a free port it prints; `serve` (code
    using both) runs it until it is told to stop, then "drained" is printed."""
    return textwrap.dedent("""
        import sys, time
        from placement_lite.config import Settings
        from placement_lite.server import Supervisor, open_socket, run_worker

        def slow(environ, start_response):
            time.sleep(float(environ["PATH_INFO"].strip("/") or 0))
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"finished"]

        sock = open_socket("127.0.0.1", 0)
        print("listening on http://127.0.0.1:%d/" % sock.getsockname()[1], flush=True)
    """) + textwrap.dedent(serve) + 'print("drained", flush=True)\n'


_SLOW_WORKER = _slow_app_program("""
    run_worker(Settings(db="sqlite://", shutdown_timeout=10), sock, app=slow)
""")
_SLOW_SUPERVISED = _slow_app_program("""
    settings = Settings(db="sqlite:///unused", workers=2, shutdown_timeout=10)
    Supervisor(settings, sock,
               target=lambda s, k, i: run_worker(s, k, app=slow)).run()
""")


@contextlib.contextmanager
def _running(program: str):
    """(the child process, its port) of a slow-app program, killed at the
    end if it has not exited by then."""
    proc = subprocess.Popen([sys.executable, "-c", program],
                            stdout=subprocess.PIPE, text=True)
    try:
        yield proc, int(proc.stdout.readline().split(":")[-1].strip("/\n"))
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def _slow_call(url: str, timeout: float):
    """GET `url` in a thread of its own, started: (the thread, a dict that
    receives the answer's body as "body")."""
    result: dict = {}

    def call():
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            result["body"] = resp.read()
    caller = threading.Thread(target=call)
    caller.start()
    return caller, result


@pytest.mark.parametrize("script", [_SLOW_WORKER, _SLOW_SUPERVISED],
                         ids=["one-process", "workers"])
def test_draining_refuses_new_connections_at_once(script):
    """After SIGTERM, while a slow request finishes, a new caller is
    refused immediately rather than left hanging."""
    with _running(script) as (proc, port):
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(base), timeout=30)
        caller, result = _slow_call(base + "/5", timeout=20)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)

        def refused():
            # A connection left hanging times out here (not refused).
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            except ConnectionRefusedError:
                return True
            except OSError:
                return False
            return False
        wait_until(refused, timeout=2)
        assert caller.is_alive(), "the slow request should still be in flight"
        caller.join(timeout=15)
        assert result.get("body") == b"finished"
        assert proc.wait(timeout=15) == 0


def _answers(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/0", timeout=2) as resp:
            return resp.read() == b"finished"
    except OSError:
        return False


def test_sigterm_lets_requests_in_flight_finish():
    with _running(_SLOW_WORKER) as (proc, port):
        base = f"http://127.0.0.1:{port}"
        idle = urllib.request.urlopen(base + "/0", timeout=5)  # a kept-alive client
        assert idle.read() == b"finished"
        caller, result = _slow_call(base + "/1.5", timeout=10)
        time.sleep(0.5)
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        caller.join(timeout=10)
        assert result.get("body") == b"finished"
        assert proc.wait(timeout=10) == 0
        # It waited for the slow request, not for the idle connection.
        assert time.monotonic() - started < 5
        assert proc.stdout.read().strip() == "drained"
        with pytest.raises(OSError):
            urllib.request.urlopen(base + "/0", timeout=2)


@pytest.mark.parametrize("backend", backend_urls(), ids=backend_id)
def test_two_services_starting_at_once_share_one_schema_upgrade(backend):
    """Two `serve` started together on an empty database both come up."""
    with fresh_url(backend) as url:
        both = [start(url), start(url)]
        try:
            for srv in both:
                ready(srv)
                status, _h, body = srv.request("GET", "/healthcheck", token=None)
                assert (status, body["status"]) == (200, "ok"), srv.output
        finally:
            for srv in both:
                stop(srv)
        out = subprocess.run(command("db", "version", "--db", url),
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0
        current, head = out.stdout.split(" (head ")
        assert current.strip() == head.strip(" )\n")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _first_request(port: int, timeout: float = 60.0) -> bytes:
    """GET / sent as soon as the port takes connections: it waits in the
    listen backlog while the process builds its app, and is accepted the
    moment waitress starts (the start-up a health probe meets)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port), timeout=timeout)
            break
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.002)
    with conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHost: placement\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize("workers", ["1", "2"])
def test_the_first_request_after_start_is_not_a_queue(sqlite_url, workers):
    """waitress warns when a request waits for a thread; a single request
    at start, with every thread free, does not wait."""
    port = _free_port()
    srv = start(sqlite_url, "--workers", workers, "--port", str(port))
    try:
        answer = _first_request(port)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        rid = re.search(rb"x-openstack-request-id: (req-[0-9a-f-]+)", answer, re.I)
        srv.wait_for_line(rid.group(1).decode())
        assert "Task queue depth" not in srv.output, srv.output
        assert "WARNING" not in srv.output, srv.output
    finally:
        stop(srv)


def test_json_logs_one_object_per_request(sqlite_url):
    import json

    with serve(sqlite_url, "--log-format", "json", "--workers", "2") as srv:
        status, headers, _body = srv.request("GET", "/resource_providers",
                                             version="1.14")
        assert status == 200
        rid = headers["x-openstack-request-id"]
        line = srv.wait_for_line(rid)
        record = json.loads(line)
        assert (record["method"], record["path"], record["status"],
                record["microversion"], record["request_id"]) == (
            "GET", "/resource_providers", 200, "1.14", rid)
        assert record["ms"] >= 0 and record["level"] == "INFO"
    # Everything but the start-up banner is JSON.
    for line in srv.lines[1:]:
        if line.strip():
            json.loads(line)



_CRASHING_WORKER = textwrap.dedent("""
    import logging, os, sys
    from placement_lite.config import Settings
    from placement_lite.server import Supervisor, open_socket

    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(message)s")
    sock = open_socket("127.0.0.1", 0)
    print("ready", flush=True)
    Supervisor(Settings(db="sqlite://", workers=1), sock,
               target=lambda settings, sock, index: os._exit(3)).run()
    print("stopped", flush=True)
""")


def test_a_crash_looping_worker_is_restarted_with_back_off():
    proc = subprocess.Popen([sys.executable, "-c", _CRASHING_WORKER],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(2.0)
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=20)[0]
        assert proc.returncode == 0
        starts = out.count("worker 0 started")
        # Without back-off this would be hundreds; with it, a handful.
        assert 2 <= starts <= 10, out
        assert "exited with status 3" in out and out.rstrip().endswith("stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_several_workers_refuse_an_in_memory_database():
    out = subprocess.run(command("serve", "--db", "sqlite://", "--workers", "2",
                                 "--port", "0"),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "in-memory" in out.stderr


def test_one_worker_serves_an_in_memory_database():
    """`--db sqlite://` is a throwaway database, as SQLite's own in-memory
    URL promises: each of a worker's threads must see the same one, and
    nothing is left behind once the server stops."""
    from tests import servers
    with servers.serve("sqlite://", "--workers", "1") as srv:
        rp = "5e3a7c1c-1111-4aaa-8bbb-000000000001"
        status, _, body = srv.request("POST", "/resource_providers",
                                      {"name": "mem-1", "uuid": rp})
        assert status == 201, body
        for _ in range(20):
            status, _, body = srv.request("GET", f"/resource_providers/{rp}")
            assert status == 200, body
        where = srv.wait_for_line(r"in-memory")
        os.killpg(srv.proc.pid, signal.SIGTERM)
        srv.proc.wait(timeout=30)
    path = where.split("temporary file ", 1)[1].split()[0].rstrip(",;.")
    assert not os.path.exists(path), where
