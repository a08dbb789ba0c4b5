from __future__ import annotations

import contextlib
import json
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from scheduler_project import outbound_http as http
from scheduler_project.outbound_http import OutboundBlocked, OutboundFailed, send, validate_url

ALLOW_LOCAL = ["127.0.0.1"]


class _Handler(BaseHTTPRequestHandler):
    seen: list[dict[str, Any]]

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def _handle(self) -> None:
        parts = urlsplit(self.path)
        query = {key: values[0] for key, values in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        self.seen.append(
            {
                "method": self.command,
                "path": parts.path,
                "body": body,
                "host": self.headers.get("Host"),
            }
        )
        if parts.path == "/redirect":
            self.send_response(int(query.get("status", "302")))
            self.send_header("Location", query.get("to", "/redirect"))
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if parts.path == "/slow":
            time.sleep(2)
        payload = b"x" * 50_000 if parts.path == "/big" else json.dumps(self.seen[-1]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server:
    def __init__(self) -> None:
        handler = type("Handler", (_Handler,), {"seen": []})
        self.seen: list[dict[str, Any]] = handler.seen
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"


@pytest.fixture
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/",
        "http://127.1/",
        "http://0x7f000001/",
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://127.0.0.2:8080/x",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://localhost/",
        "http://LocalHost/",
        "https://localhost:8443/hook",
        "http://[2002:7f00:1::]/",
    ],
)
def test_every_loopback_spelling_is_refused(url: str) -> None:
    with pytest.raises(OutboundBlocked, match="loopback"):
        validate_url(url, allow=[])


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://10.1.2.3/", "private"),
        ("http://172.16.0.1/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://[fc00::1]/", "private"),
        ("http://169.254.1.1/", "link-local"),
        ("http://[fe80::1]/", "link-local"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://[fd00:ec2::254]/", "metadata"),
        ("http://[::ffff:169.254.169.254]/", "metadata"),
        ("http://[::ffff:10.0.0.1]/", "IPv4-mapped IPv6 wrapping 10.0.0.1"),
        ("http://[64:ff9b::a00:1]/", "NAT64"),
        ("http://100.64.0.1/", "carrier-grade NAT"),
        ("http://224.0.0.1/", "multicast"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://0/", "unspecified"),
        ("http://240.0.0.1/", "reserved"),
    ],
)
def test_internal_addresses_are_refused(url: str, reason: str) -> None:
    with pytest.raises(OutboundBlocked, match=reason):
        validate_url(url, allow=[])


@pytest.mark.parametrize(
    "url", ["ftp://example.com/", "file:///etc/passwd", "gopher://127.0.0.1/", "javascript:x"]
)
def test_non_http_schemes_are_refused(url: str) -> None:
    with pytest.raises(OutboundBlocked, match="URL must be http or https"):
        validate_url(url, allow=["127.0.0.1"])


@pytest.mark.parametrize(
    "url",
    ["http://user:pw@127.0.0.1/", "http://example.com@127.0.0.1/", "http://a\\@127.0.0.1/"],
)
def test_userinfo_tricks_are_refused(url: str) -> None:
    with pytest.raises(OutboundBlocked):
        validate_url(url, allow=[])


def test_url_without_host_is_refused() -> None:
    with pytest.raises(OutboundBlocked, match="no host"):
        validate_url("http:///path", allow=[])


def test_unresolvable_host_is_refused_permanently() -> None:
    with pytest.raises(OutboundBlocked, match="cannot resolve") as info:
        validate_url("http://does-not-exist.invalid/", allow=[])
    assert info.value.transient is False


def test_allow_list_permits_addresses_ranges_and_names() -> None:
    validate_url("http://127.0.0.1:9/", allow=["127.0.0.1"])
    validate_url("http://127.0.0.2/", allow=["127.0.0.0/8"])
    validate_url("http://localhost/", allow=["localhost"])
    validate_url("http://[::ffff:127.0.0.1]/", allow=["127.0.0.1"])
    with pytest.raises(OutboundBlocked):
        validate_url("http://127.0.0.1/", allow=["10.0.0.0/8"])


def test_any_blocked_address_among_several_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    real = socket.getaddrinfo

    def fake(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "mixed.test":
            return real("93.184.216.34", *args, **kwargs) + real("10.0.0.7", *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(http.socket, "getaddrinfo", fake)
    with pytest.raises(OutboundBlocked, match=r"mixed\.test resolves to 10\.0\.0\.7"):
        validate_url("https://mixed.test/", allow=[])


def test_send_reaches_an_allowed_server(server: _Server) -> None:
    response = send(
        "POST",
        server.url + "/echo",
        headers={"X-A": "1"},
        body=b"hello",
        timeout=5,
        allow=ALLOW_LOCAL,
    )
    assert response.status_code == 200
    assert response.json()["body"] == "hello"


def test_send_refuses_loopback_without_allow(server: _Server) -> None:
    with pytest.raises(OutboundBlocked, match="loopback"):
        send("GET", server.url + "/echo", headers={}, body=None, timeout=5, allow=[])
    assert server.seen == []


def test_send_connects_to_the_validated_address_only(
    server: _Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.getaddrinfo
    lookups: list[str] = []

    def rebinding(host: str, *args: Any, **kwargs: Any) -> Any:
        # First answer is allowed; a second lookup would get the metadata address.
        if host == "rebind.test":
            lookups.append(host)
            target = "127.0.0.1" if len(lookups) == 1 else "169.254.169.254"
            return real(target, *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(http.socket, "getaddrinfo", rebinding)
    url = f"http://rebind.test:{server.port}/echo"
    response = send("GET", url, headers={}, body=None, timeout=5, allow=ALLOW_LOCAL)
    assert response.status_code == 200
    assert lookups == ["rebind.test"]
    assert server.seen[0]["host"] == f"rebind.test:{server.port}"
    assert response.url == url


def test_redirect_to_same_host_is_followed(server: _Server) -> None:
    url = f"{server.url}/redirect?to=/echo"
    response = send("GET", url, headers={}, body=None, timeout=5, allow=ALLOW_LOCAL)
    assert response.status_code == 200
    assert [r["path"] for r in server.seen] == ["/redirect", "/echo"]


@pytest.mark.parametrize(
    "location",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://localhost:{port}/echo",  # another host name, even if it is the same machine
        "ftp://127.0.0.1/",
    ],
)
def test_redirect_to_another_host_is_returned_not_followed(server: _Server, location: str) -> None:
    url = f"{server.url}/redirect?to={location.format(port=server.port)}"
    response = send("GET", url, headers={}, body=None, timeout=5, allow=["127.0.0.1", "localhost"])
    assert response.status_code == 302
    assert [r["path"] for r in server.seen] == ["/redirect"]


def test_post_follows_307_with_body_but_not_302(server: _Server) -> None:
    kwargs: dict[str, Any] = {"headers": {}, "body": b"payload", "timeout": 5, "allow": ALLOW_LOCAL}
    response = send("POST", f"{server.url}/redirect?to=/echo&status=307", **kwargs)
    assert response.json() == {**server.seen[-1], "method": "POST", "body": "payload"}
    response = send("POST", f"{server.url}/redirect?to=/echo&status=302", **kwargs)
    assert response.status_code == 302


def test_redirect_loop_stops_after_max_redirects(server: _Server) -> None:
    url = f"{server.url}/redirect"
    response = send(
        "GET", url, headers={}, body=None, timeout=5, allow=ALLOW_LOCAL, max_redirects=2
    )
    assert response.status_code == 302
    assert len(server.seen) == 3


def test_response_body_is_capped(server: _Server) -> None:
    response = send(
        "GET",
        server.url + "/big",
        headers={},
        body=None,
        timeout=5,
        allow=ALLOW_LOCAL,
        max_response_bytes=1000,
    )
    assert len(response.content) == 1000


def test_read_timeout_is_outbound_failed(server: _Server) -> None:
    with pytest.raises(OutboundFailed, match="timed out") as info:
        send("GET", server.url + "/slow", headers={}, body=None, timeout=0.3, allow=ALLOW_LOCAL)
    assert info.value.transient and info.value.timeout


def test_connection_refused_does_not_leak_the_path() -> None:
    url = f"http://127.0.0.1:{_free_port()}/hooks/secret-token?key=hunter2"
    with pytest.raises(OutboundFailed) as info:
        send("GET", url, headers={}, body=None, timeout=2, allow=ALLOW_LOCAL)
    assert "refused" in str(info.value).lower()
    assert "secret-token" not in str(info.value) and "hunter2" not in str(info.value)


def test_allowing_an_ipv4_address_does_not_allow_6to4_wrapping_it() -> None:
    with pytest.raises(OutboundBlocked, match="6to4"):
        validate_url("http://[2002:7f00:1::]/", allow=["127.0.0.1"])


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_keeps_the_host_name_for_sni_and_verifies_the_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=tls.test",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server_names: list[str | None] = []
    context.sni_callback = lambda _sock, name, _ctx: server_names.append(name)
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept_one() -> None:
        conn, _ = listener.accept()
        with contextlib.suppress(OSError), context.wrap_socket(conn, server_side=True):
            pass

    thread = threading.Thread(target=accept_one, daemon=True)
    thread.start()
    real = socket.getaddrinfo
    monkeypatch.setattr(
        http.socket,
        "getaddrinfo",
        lambda host, *a, **k: real("127.0.0.1" if host == "tls.test" else host, *a, **k),
    )
    with pytest.raises(OutboundFailed, match="CERTIFICATE_VERIFY_FAILED"):
        send(
            "GET", f"https://tls.test:{port}/", headers={}, body=None, timeout=5, allow=ALLOW_LOCAL
        )
    thread.join(5)
    listener.close()
    assert server_names == ["tls.test"]
