"""Outbound HTTP behind an SSRF guard; the only module that imports the HTTP client."""

from __future__ import annotations

import ipaddress
import logging
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
from requests.adapters import HTTPAdapter

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

MAX_RESPONSE_BYTES = 1024 * 1024
_SCHEMES = ("http", "https")
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack instance metadata
        "fd00:ec2::254",  # AWS IMDS over IPv6
        "168.63.129.16",  # Azure WireServer: public-looking, reachable only from inside Azure
    )
)
_CGNAT = ipaddress.IPv4Network("100.64.0.0/10")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# Checked in this order so 127.0.0.1 reads "loopback" rather than "private".
_PROPERTY_CHECKS = (
    ("is_unspecified", "unspecified"),
    ("is_loopback", "loopback"),
    ("is_link_local", "link-local"),
    ("is_multicast", "multicast"),
    ("is_reserved", "reserved"),
    ("is_private", "private"),
)


class OutboundError(Exception):
    """The request was refused or did not complete; `transient` says whether to retry."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.message = message
        self.transient = transient


class OutboundBlocked(OutboundError):
    """The URL or an address it resolves to may not be reached (the SSRF guard said no)."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message, transient=transient)


class OutboundFailed(OutboundError):
    """Network error or timeout while talking to an allowed host; always transient."""

    def __init__(self, message: str, *, timeout: bool = False) -> None:
        super().__init__(message, transient=True)
        self.timeout = timeout


@dataclass(frozen=True)
class _Target:
    host: str
    netloc: str
    address: str


def validate_url(url: str, *, allow: Sequence[str]) -> None:
    """Raise OutboundBlocked unless `url` is http(s) and every address it resolves to is public
    or allowed by `allow` (hostnames, IP addresses or CIDR ranges)."""
    _check_url(url, allow)


def blocked_reason(address: IPAddress) -> str | None:
    """Why `address` must not be reached, or None when it is a public address."""
    if address in _METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            label, inner = embedded
            reason = blocked_reason(inner)
            if reason is not None:
                return f"{label} wrapping {inner} ({reason})"
    if address in _CGNAT:
        return "carrier-grade NAT (100.64.0.0/10)"
    for attribute, label in _PROPERTY_CHECKS:
        if getattr(address, attribute):
            return label
    if not address.is_global:
        return "not globally routable"
    return None


def send(
    method: str,
    url: str,
    *,
    headers: dict[str, str],
    body: bytes | str | None,
    json: object = None,
    timeout: float,
    allow: Sequence[str],
    max_redirects: int = 5,
    max_response_bytes: int = MAX_RESPONSE_BYTES,
) -> requests.Response:
    """Send one request through the guard and return the final response, whatever its status.

    Each hop is validated, then connected to the very address that was validated (no second
    DNS lookup, so DNS rebinding cannot swap it). Redirects are followed only to the same host
    over http/https, never from https down to http, and for methods other than GET/HEAD only on
    307/308 (which keep the body); any other redirect is returned as is. `timeout` bounds the
    connect, each read, and the whole body download; the body is truncated at
    `max_response_bytes`. Raises OutboundBlocked or OutboundFailed.
    """
    method = method.upper()
    response = _send_once(method, url, headers, body, json, timeout, allow, max_response_bytes)
    for _ in range(max_redirects):
        next_url = _redirect_target(response, method, url)
        if next_url is None:
            break
        logger.debug("following redirect %s on %s", response.status_code, urlsplit(url).hostname)
        url = next_url
        response = _send_once(method, url, headers, body, json, timeout, allow, max_response_bytes)
    return response


class _PinnedAdapter(HTTPAdapter):
    """Opens connections to the validated address while the URL, the Host header, TLS SNI and
    the certificate check keep using the host name."""

    def __init__(self, target: _Target) -> None:
        super().__init__(max_retries=0)
        self._target = target

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert
        )
        if host_params["host"] != self._target.host:
            raise OutboundBlocked(f"refusing to connect to unvalidated host {host_params['host']}")
        host_params["host"] = self._target.address
        if host_params["scheme"] == "https":
            pool_kwargs["server_hostname"] = self._target.host
            pool_kwargs["assert_hostname"] = self._target.host
        return host_params, pool_kwargs


def _send_once(
    method: str,
    url: str,
    headers: dict[str, str],
    body: bytes | str | None,
    json: Any,
    timeout: float,
    allow: Sequence[str],
    max_response_bytes: int,
) -> requests.Response:
    _check_syntax(url)  # clear messages before requests' own parser gets a say
    with requests.Session() as session:
        # Environment proxies would bypass the pinned address and .netrc would add credentials.
        session.trust_env = False
        try:
            prepared = session.prepare_request(
                requests.Request(method, url, headers=headers, data=body, json=json)
            )
        except (requests.RequestException, ValueError) as exc:
            raise OutboundBlocked(f"invalid URL: {type(exc).__name__}") from None
        # Validate the URL exactly as requests will use it, so no parser differential remains.
        target = _check_url(prepared.url or "", allow)
        prepared.headers["Host"] = target.netloc
        adapter = _PinnedAdapter(target)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        try:
            response = session.send(
                prepared, timeout=(timeout, timeout), allow_redirects=False, stream=True
            )
            _read_body(response, time.monotonic() + timeout, max_response_bytes, target.netloc)
        except requests.Timeout:
            raise OutboundFailed(
                f"{target.netloc} timed out after {timeout:g}s", timeout=True
            ) from None
        except requests.RequestException as exc:
            raise OutboundFailed(f"{target.netloc}: {_root_cause(exc)}") from None
    return response


def _read_body(response: requests.Response, deadline: float, limit: int, netloc: str) -> None:
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_content(64 * 1024):
            chunks.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
            if time.monotonic() > deadline:
                raise OutboundFailed(f"{netloc} was too slow sending its response", timeout=True)
    finally:
        response.close()
    # Buffered here so the size cap and deadline apply; callers then use .content/.text as usual.
    response._content = b"".join(chunks)[:limit]


def _redirect_target(response: requests.Response, method: str, url: str) -> str | None:
    location = response.headers.get("Location")
    if response.status_code not in _REDIRECT_STATUSES or not location:
        return None
    if method not in ("GET", "HEAD") and response.status_code not in (307, 308):
        return None  # 301/302/303 would turn a POST into a bodiless GET
    try:
        target = urljoin(url, location)
        source, destination = urlsplit(url), urlsplit(target)
    except ValueError:
        return None
    downgrade = source.scheme == "https" and destination.scheme == "http"
    if destination.scheme not in _SCHEMES or downgrade:
        return None
    if not destination.hostname or destination.hostname != source.hostname:
        logger.info("redirect from %s to another host not followed", source.hostname)
        return None
    return target


def _check_syntax(url: str) -> tuple[str, str, int]:
    if not url.isprintable() or any(ch in url for ch in " \\"):
        raise OutboundBlocked("URL contains whitespace, control characters or a backslash")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise OutboundBlocked(f"invalid URL: {exc}") from None
    if parts.scheme.lower() not in _SCHEMES:
        raise OutboundBlocked("URL must be http or https")
    if "@" in parts.netloc:
        raise OutboundBlocked("URL must not contain credentials (user@host)")
    if not parts.hostname:
        raise OutboundBlocked("URL has no host")
    default_port = 443 if parts.scheme.lower() == "https" else 80
    return parts.hostname, parts.netloc, port or default_port


def _check_url(url: str, allow: Sequence[str]) -> _Target:
    host, netloc, port = _check_syntax(url)
    addresses = _resolve(host, port)
    allowed_hosts, allowed_networks = _parse_allow(allow)
    if host.rstrip(".") not in allowed_hosts:
        for address in addresses:
            if _in_networks(address, allowed_networks):
                continue
            reason = blocked_reason(address)
            if reason is not None:
                via = "" if _is_literal(host, address) else f"{host} resolves to "
                raise OutboundBlocked(
                    f"{via}{address}, which is {reason}; "
                    "add it to SCHEDULER_OUTBOUND_ALLOW to permit it"
                )
    return _Target(host=host, netloc=netloc, address=str(addresses[0]))


def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        # EAI_AGAIN is a DNS outage rather than a name that does not exist.
        transient = exc.errno == socket.EAI_AGAIN
        raise OutboundBlocked(
            f"cannot resolve {host}: {exc.strerror}", transient=transient
        ) from None
    except (UnicodeError, ValueError):
        raise OutboundBlocked(f"cannot resolve {host}: invalid host name") from None
    addresses: list[IPAddress] = []
    for family, _, _, _, sockaddr in infos:
        if family in (socket.AF_INET, socket.AF_INET6):
            address = ipaddress.ip_address(sockaddr[0])
            if address not in addresses:
                addresses.append(address)
    if not addresses:
        raise OutboundBlocked(f"cannot resolve {host}: no IP address")
    return addresses


def _parse_allow(allow: Sequence[str]) -> tuple[set[str], list[IPNetwork]]:
    hosts: set[str] = set()
    networks: list[IPNetwork] = []
    for raw in allow:
        entry = raw.strip().strip("[]")
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            hosts.add(entry.lower().rstrip("."))
    return hosts, networks


def _in_networks(address: IPAddress, networks: list[IPNetwork]) -> bool:
    candidates: list[IPAddress] = [address]
    # ::ffff:a.b.c.d reaches a.b.c.d itself on a dual-stack socket; 6to4/NAT64 go elsewhere.
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        candidates.append(address.ipv4_mapped)
    return any(
        candidate.version == network.version and candidate in network
        for candidate in candidates
        for network in networks
    )


def _embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[str, ipaddress.IPv4Address] | None:
    if address.ipv4_mapped is not None:
        return "IPv4-mapped IPv6", address.ipv4_mapped
    if address.sixtofour is not None:
        return "6to4", address.sixtofour
    if address.teredo is not None:
        return "Teredo", address.teredo[1]
    if address in _NAT64:
        return "NAT64", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address in _IPV4_COMPATIBLE and int(address) > 1:
        return "IPv4-compatible IPv6", ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _is_literal(host: str, address: IPAddress) -> bool:
    try:
        return ipaddress.ip_address(host) == address
    except ValueError:
        return False


def _root_cause(exc: BaseException) -> str:
    # requests' own messages repeat the full URL, whose path or query may hold a secret.
    cause: BaseException = exc
    for _ in range(8):
        following = getattr(cause, "reason", None)
        if not isinstance(following, BaseException):
            following = cause.__cause__ or cause.__context__
        if following is None:
            break
        cause = following
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror
    return type(cause).__name__
