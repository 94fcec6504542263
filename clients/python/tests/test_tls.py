"""https with a private CA: the client trusts the CA it is given (ca_file or
ssl_context) and refuses a server it cannot verify. leaseapi is reached
through a TLS-terminating relay on loopback, as it is deployed behind an
ingress or a mesh; the certificates are made for the test with openssl."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Iterator, Tuple
from urllib.parse import urlsplit

import pytest

import leaseapi
from conftest import LEASE_TOKEN, Recorder, Server


def make_certificates(directory: Path) -> Tuple[Path, Path, Path]:
    """A CA, and a certificate for 127.0.0.1 that it signed."""
    openssl = shutil.which("openssl")
    assert openssl, "openssl is not on PATH (make test installs it: scripts/ensure-packages.sh)"
    ca_key, ca_cert = directory / "ca.key", directory / "ca.pem"
    key, csr, cert, ext = directory / "server.key", directory / "server.csr", directory / "server.pem", directory / "san.ext"

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=leaseapi test CA", "-keyout", str(ca_key), "-out", str(ca_cert))
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(csr))
    ext.write_text("subjectAltName = IP:127.0.0.1\nbasicConstraints = CA:FALSE\n")
    run("x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-CAcreateserial", "-days", "1", "-extfile", str(ext), "-out", str(cert))
    return ca_cert, cert, key


def pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def tls_url(server: Server, tmp_path: Path) -> Iterator[Tuple[str, Path]]:
    """An https URL relayed to leaseapi, and the CA that signed its certificate."""
    ca_cert, cert, key = make_certificates(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    upstream = urlsplit(server.url)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    threads = []

    def serve() -> None:
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return  # closed: the test is over
            try:
                conn = context.wrap_socket(raw, server_side=True)
            except (ssl.SSLError, OSError):
                raw.close()  # a client that refused the certificate
                continue
            back = socket.create_connection((upstream.hostname, upstream.port))
            for a, b in ((conn, back), (back, conn)):
                t = threading.Thread(target=pipe, args=(a, b), daemon=True)
                t.start()
                threads.append(t)

    acceptor = threading.Thread(target=serve, daemon=True)
    acceptor.start()
    try:
        yield f"https://127.0.0.1:{port}", ca_cert
    finally:
        listener.shutdown(socket.SHUT_RDWR)  # wakes accept(); close alone does not
        listener.close()
        acceptor.join(10)
        assert not acceptor.is_alive()
        for t in threads:
            t.join(10)


def test_https_with_a_private_ca(tls_url: Tuple[str, Path], recorder: Recorder, job_id: str) -> None:
    url, ca_cert = tls_url
    client = leaseapi.Client(url, LEASE_TOKEN, ca_file=str(ca_cert), on_exchange=recorder)
    assert client.whoami().role == "lease"
    lease = client.acquire(job_id, "replica-a", ttl=5)
    assert client.release(job_id, "replica-a", lease.token).state == "released"

    context = ssl.create_default_context(cafile=str(ca_cert))
    assert leaseapi.Client(url, LEASE_TOKEN, ssl_context=context, on_exchange=recorder).get(job_id).token == lease.token

    untrusting = leaseapi.Client(url, LEASE_TOKEN, retry_for=0)
    with pytest.raises(leaseapi.ConnectionFailed) as refused:
        untrusting.whoami()
    assert "certificate" in str(refused.value).lower()
