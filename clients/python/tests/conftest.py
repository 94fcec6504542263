"""Fixtures: a real leaseapi (built from this repository) on a Postgres
database made for the run, a real redis-server, and the check of every
answer the client read against the closed form of api/openapi.yaml.

Everything listens on 127.0.0.1 ports picked at start and lives in pytest's
temporary directory; every process is stopped when its fixture ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple, Type

import pytest

HERE = Path(__file__).resolve().parent
PACKAGE = HERE.parent
REPO = PACKAGE.parent.parent
sys.path.insert(0, str(PACKAGE))
sys.path.insert(0, str(HERE))

import leaseapi  # noqa: E402
from spec import Spec  # noqa: E402

# The harness of the Go tests (repo/repotest) looks for Postgres the same way.
LOCAL_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
LEASE_TOKEN = "py-lease-token-0123456789abcdef"
ADMIN_TOKEN = "py-admin-token-0123456789abcdef"
# Bounds every wait for a process to come up or go away.
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(what: str, ready: Callable[[], bool], timeout: float, interval: float = 0.05) -> None:
    """Polls ready() until it is true, for at most timeout seconds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f}s")
        time.sleep(interval)


class JSONHandler(BaseHTTPRequestHandler):
    """A request handler of a scripted server that answers JSON and logs
    nothing."""

    def answer(self, status: int, body: Any = None, headers: Optional[Mapping[str, str]] = None) -> None:
        payload = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json" if status < 400 else "application/problem+json")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def read_body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def http_server(handler: Type[BaseHTTPRequestHandler]) -> Iterator[ThreadingHTTPServer]:
    """The standard library's HTTP server with handler on a 127.0.0.1 port,
    serving on a thread until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


class Script:
    """The answers a scripted server gives, in order (status, body,
    headers), and the requests it received with the monotonic time each came
    at."""

    def __init__(self) -> None:
        self.answers: List[Tuple[int, Any, Dict[str, str]]] = []
        self.requests: List[Dict[str, Any]] = []


@pytest.fixture
def scripted() -> Iterator[Tuple[leaseapi.Client, Script]]:
    """A client of a server on a loopback port that gives the answers of
    its Script."""
    script = Script()

    class Handler(JSONHandler):
        def _serve(self) -> None:
            raw = self.read_body()
            script.requests.append({"method": self.command, "path": self.path, "body": json.loads(raw) if raw else None, "at": time.monotonic()})
            status, answer, headers = script.answers.pop(0)
            self.answer(status, answer, headers)

        do_GET = do_PUT = do_POST = do_DELETE = _serve  # noqa: N815 - the http.server names

    with http_server(Handler) as server:
        yield leaseapi.Client(f"http://127.0.0.1:{server.server_port}", retry_for=5), script


class Process:
    """A child process with its output in a log file; stop() ends it."""

    def __init__(self, name: str, args: List[str], log_dir: Path, env: Optional[Dict[str, str]] = None, cwd: Optional[Path] = None) -> None:
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 15.0) -> Optional[int]:
        """SIGTERM, SIGKILL after timeout; returns the exit status."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        os.killpg(self.proc.pid, 9)
        self.proc.wait()

    def tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()
        return f"--- {self.name} ---\n" + "\n".join(text[-lines:])


class Processes:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.list: List[Process] = []

    def start(self, name: str, args: List[str], **kwargs: Any) -> Process:
        p = Process(name, args, self.log_dir, **kwargs)
        self.list.append(p)
        return p

    def stop_all(self) -> None:
        for p in self.list:
            if p.alive():
                try:
                    os.killpg(p.pid, 9)
                except ProcessLookupError:
                    pass
            p.stop()

    def tails(self) -> str:
        return "\n".join(p.tail() for p in self.list)


@pytest.fixture(scope="session")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """leaseapi built from this repository (without -race: the client's
    tests are not the server's)."""
    out = tmp_path_factory.mktemp("bin") / "leaseapi"
    go = shutil.which("go")
    assert go, "go is not on PATH: the tests build leaseapi from this repository"
    subprocess.run([go, "build", "-o", str(out), "./cmd/leaseapi"], cwd=REPO, check=True)
    return out


def _psql(server: str, sql: str) -> None:
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", server, "-c", sql], check=True, capture_output=True, timeout=60)


@pytest.fixture(scope="session")
def database_url() -> Iterator[str]:
    """A fresh Postgres database for this run, dropped at the end."""
    server = os.environ.get("LEASEAPI_TEST_DATABASE_URL") or LOCAL_DATABASE_URL
    assert shutil.which("psql"), "psql is not on PATH: the tests create their database with it (Debian: postgresql-client)"
    name = f"leaseapi_py_{os.getpid()}"
    _psql(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    _psql(server, f"CREATE DATABASE {name}")
    parts = urllib.parse.urlsplit(server)
    try:
        yield urllib.parse.urlunsplit(parts._replace(path="/" + name))
    finally:
        _psql(server, f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class Server:
    def __init__(self, url: str, process: Process) -> None:
        self.url = url
        self.process = process


@pytest.fixture(scope="session")
def server(binary: Path, database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One leaseapi on 127.0.0.1 for the whole run, with a lease and an admin
    token, a 1 s minimum TTL and a missed-tick sweep every second (a
    missed tick, and the catch-up tick it owes, show within seconds),
    delivering webhooks to loopback."""
    port = free_port()
    env = dict(
        os.environ,
        LEASEAPI_ADDR=f"127.0.0.1:{port}",
        LEASEAPI_DATABASE_URL=database_url,
        LEASEAPI_LOG_LEVEL="warn",
        LEASEAPI_MIN_TTL="1s",
        LEASEAPI_MISSED_SWEEP="1s",
        LEASEAPI_REQUEST_TIMEOUT="2s",
        LEASEAPI_API_TOKENS=LEASE_TOKEN,
        LEASEAPI_ADMIN_TOKENS=ADMIN_TOKEN,
        # The webhook tests' receiver listens on loopback.
        LEASEAPI_WEBHOOK_ALLOW_PRIVATE="true",
    )
    process = Process("leaseapi", [str(binary)], tmp_path_factory.mktemp("leaseapi"), env=env)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert process.alive(), f"leaseapi exited before it was ready\n{process.tail()}"
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    try:
        wait_until("leaseapi ready", ready, START_TIMEOUT)
        yield Server(url, process)
    finally:
        status = process.stop()
        assert status == 0, f"leaseapi exited with {status} on SIGTERM\n{process.tail()}"


@pytest.fixture(scope="session")
def spec(tmp_path_factory: pytest.TempPathFactory) -> Spec:
    """The closed form of api/openapi.yaml, which the service's answers are
    checked against: the published spec leaves answers open to what later
    releases add, the closed form allows only what this release sends (every
    response object closed, every x-extensible-enum an enum). The Go tests
    derive it (api/internal/closedform); this runs their command."""
    out = tmp_path_factory.mktemp("spec") / "openapi.closed.yaml"
    go = shutil.which("go")
    assert go, "go is not on PATH: the tests derive the closed form of the spec with it"
    subprocess.run([go, "run", "./api/internal/closespec", "-o", str(out)], cwd=REPO, check=True)
    return Spec(out)


class Recorder:
    """Collects the exchanges of the clients of one test (in this process,
    and the JSON lines files of its child processes) and checks them against
    the spec when the test ends."""

    def __init__(self, spec: Spec, directory: Path) -> None:
        self.spec = spec
        self.directory = directory
        self.exchanges: List[Dict[str, Any]] = []

    def __call__(self, exchange: leaseapi.Exchange) -> None:
        self.exchanges.append(exchange_json(exchange))

    def file_for(self, name: str) -> Path:
        return self.directory / f"exchanges-{name}.jsonl"

    def all(self) -> List[Dict[str, Any]]:
        found = list(self.exchanges)
        for path in sorted(self.directory.glob("exchanges-*.jsonl")):
            with open(path) as f:
                # A line without its newline was cut by a SIGKILL.
                found.extend(json.loads(line) for line in f if line.endswith("\n"))
        return found


def exchange_json(exchange: leaseapi.Exchange) -> Dict[str, Any]:
    return {
        "method": exchange.method,
        "path": exchange.path,
        "requestBody": exchange.request_body,
        "status": exchange.status,
        "headers": exchange.headers,
        "body": exchange.body.decode("utf-8", "replace"),
    }


@pytest.fixture
def recorder(spec: Spec, tmp_path: Path) -> Iterator[Recorder]:
    rec = Recorder(spec, tmp_path)
    yield rec
    exchanges = rec.all()
    assert exchanges, "the test's clients recorded no exchange"
    problems = [p for e in exchanges for p in spec.check(e)]
    assert not problems, f"{len(problems)} of {len(exchanges)} exchanges break api/openapi.yaml:\n" + "\n".join(problems[:20])


@pytest.fixture
def client(server: Server, recorder: Recorder) -> leaseapi.Client:
    """A client with the lease role."""
    return leaseapi.Client(server.url, LEASE_TOKEN, retry_for=10, on_exchange=recorder)


@pytest.fixture
def admin(server: Server, recorder: Recorder) -> leaseapi.Client:
    """A client with the admin role."""
    return leaseapi.Client(server.url, ADMIN_TOKEN, retry_for=10, on_exchange=recorder)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


@pytest.fixture
def job_id(request: pytest.FixtureRequest) -> str:
    """A job id of this test's own."""
    return "py." + re.sub(r"[^A-Za-z0-9.:-]", "-", request.node.name)[:100]


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server on 127.0.0.1 in a temporary directory, nothing saved."""
    redis_server = shutil.which("redis-server")
    assert redis_server, "redis-server is not on PATH (make test installs it: scripts/ensure-packages.sh)"
    directory = tmp_path_factory.mktemp("redis")
    port = free_port()
    process = Process(
        "redis",
        [redis_server, "--bind", "127.0.0.1", "--port", str(port), "--dir", str(directory), "--save", "", "--appendonly", "no", "--protected-mode", "yes"],
        directory,
    )

    def ready() -> bool:
        assert process.alive(), f"redis-server exited\n{process.tail()}"
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    try:
        wait_until("redis-server ready", ready, START_TIMEOUT)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.stop()
