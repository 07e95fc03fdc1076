"""`check_target`: is a string a gRPC target gRPC can resolve (its naming grammar), before connecting?

gRPC takes any string as a target and fails later: a target it cannot resolve leaves the channel in
TRANSIENT_FAILURE, and a caller waiting for a worker waits forever. A typo in `--remote` is a
configuration error, so it is told at start-up. The grammar is gRPC's (doc/naming.md):

    dns:[//authority/]host[:port]      ipv4:address[:port][,address[:port],...]
    unix:path | unix://absolute_path   ipv6:address[:port][,address[:port],...]  ([addr]:port with a port)
    unix-abstract:name                 vsock:cid:port
    host[:port]                        (no scheme, or one gRPC does not know: dns over the whole string)
"""

from __future__ import annotations

import ipaddress
import re

__all__ = ["InvalidTarget", "check_target"]

#: A DNS host name (RFC 1123 labels) or `localhost`.
_HOST = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*\.?$"
)


class InvalidTarget(ValueError):
    """A target string gRPC cannot resolve."""


def check_target(target: str) -> None:
    """Raise `InvalidTarget` (saying what is wrong) unless `target` follows gRPC's naming grammar."""
    if not target or target != target.strip():
        raise InvalidTarget("empty, or with spaces around it")
    scheme, sep, rest = target.partition(":")
    if sep and scheme in _SCHEMES:
        _SCHEMES[scheme](rest)
    elif sep and rest.startswith("//"):
        raise InvalidTarget(f"gRPC knows no scheme {scheme!r} (it knows {', '.join(_SCHEMES)})")
    else:
        _host_port(target, what="host:port")


def _dns(rest: str) -> None:
    if rest.startswith("//"):
        authority, slash, name = rest[2:].partition("/")
        if not slash:
            raise InvalidTarget("dns://AUTHORITY/HOST[:PORT] needs a '/' after the authority")
        if authority:
            _host_port(authority, what="the DNS server (authority)")
        rest = name
    _host_port(rest, what="dns: HOST[:PORT]")


def _ipv4(rest: str) -> None:
    for entry in _entries(rest):
        address, _, port = entry.partition(":")
        _address(address, ipaddress.IPv4Address, entry)
        if port:
            _port(port, entry)


def _ipv6(rest: str) -> None:
    for entry in _entries(rest):
        if entry.startswith("["):
            _bracketed(entry, what="[ADDRESS]:PORT")
        else:
            _address(entry, ipaddress.IPv6Address, entry)


def _unix(rest: str) -> None:
    path = rest[2:] if rest.startswith("//") else rest
    if not path or (rest.startswith("//") and not path.startswith("/")):
        raise InvalidTarget("unix:PATH or unix:///ABSOLUTE/PATH needs a path")


def _unix_abstract(rest: str) -> None:
    if not rest:
        raise InvalidTarget("unix-abstract:NAME needs a name")


def _vsock(rest: str) -> None:
    cid, sep, port = rest.partition(":")
    if not sep or not cid.isdigit():
        raise InvalidTarget("vsock:CID:PORT needs a numeric CID and a port")
    _port(port, rest)


_SCHEMES = {
    "dns": _dns,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "unix": _unix,
    "unix-abstract": _unix_abstract,
    "vsock": _vsock,
}


def _entries(rest: str) -> list[str]:
    entries = rest.split(",")
    if not all(entries):
        raise InvalidTarget("a list of addresses needs an address between every two commas")
    return entries


def _address(text: str, kind: type[ipaddress.IPv4Address | ipaddress.IPv6Address], entry: str) -> None:
    try:
        kind(text)
    except ValueError:
        raise InvalidTarget(f"{text!r} (in {entry!r}) is not an {kind.__name__[:4]} address") from None


def _bracketed(text: str, *, what: str) -> None:
    """`[IPV6]` or `[IPV6]:PORT`; `what` names the form in the error."""
    address, bracket, port = text[1:].partition("]")
    if not bracket or (port and not port.startswith(":")):
        raise InvalidTarget(f"{text!r} is not {what}")
    _address(address, ipaddress.IPv6Address, text)
    if port:
        _port(port[1:], text)


def _host_port(text: str, *, what: str) -> None:
    if text.startswith("["):  # [ipv6]:port
        _bracketed(text, what=what)
        return
    host, sep, port = text.rpartition(":") if ":" in text else (text, "", "")
    if not _HOST.match(host):
        raise InvalidTarget(f"{host!r} is not a host name or address (in {text!r}, read as {what})")
    if sep:
        _port(port, text)


def _port(text: str, entry: str) -> None:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise InvalidTarget(f"{text!r} (in {entry!r}) is not a port number")
