"""The client channel of a RemoteLlm: credentials, options, and the service config that balances.

The service config asks gRPC itself to balance: `round_robin` (or prefix-keyed `ring_hash`, under
outlier detection: see `_routing`) over every address the target resolves to, client-side health
checking (gRFC A17) on `vllm.internal.Llm` so only serving workers are picked, and a retry of calls
that fail with UNAVAILABLE before any response (a draining or vanished worker), which gRPC sends to
the next worker. Reconnection attempts to a vanished worker back off to at most
`MAX_RECONNECT_BACKOFF_MS` (gRPC's default grows to 120 s), so a worker restarted after a long outage
is used again within seconds.

Keepalive detects a worker that stopped answering (dead host, partition, SIGSTOP) even while a stream
is open, because the channel also sets `grpc.http2.ping_timeout_ms` to the keepalive timeout. Without
it, keepalive alone did not fire: gRPC core's keepalive ping piggybacks on a ping already in flight
(the BDP ping that flow control sends while data streams in), and the ack watchdog on a ping is
`grpc.http2.ping_timeout_ms`, which defaults to 1 minute; `keepalive_timeout_ms` arms its own watchdog
only in a corner case. Against a SIGSTOPped worker with a stream open, keepalive alone never failed the
connection; with the ping timeout set it fails with UNAVAILABLE `Stream removed (ping timeout)` (the
timings are in docs/reliability.md). The bound is the keepalive timeout when a ping is in flight at the
stall (usual on a busy stream), at most keepalive time + timeout otherwise.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from vllm_llm.wire import SERVICE_NAME
from vllm_remote_llm._routing import (
    OutlierDetection,
    Routing,
    enable_request_hash_header,
    load_balancing_config,
)

_SERVICE_CONFIG: dict[str, Any] = {
    "healthCheckConfig": {"serviceName": SERVICE_NAME},
    "methodConfig": [
        {
            "name": [{"service": SERVICE_NAME}],
            "retryPolicy": {
                "maxAttempts": 3,
                "initialBackoff": "0.05s",
                "maxBackoff": "0.5s",
                "backoffMultiplier": 2,
                "retryableStatusCodes": ["UNAVAILABLE"],
            },
        }
    ],
}


def service_config(routing: Routing = "round_robin", outliers: OutlierDetection | None = None) -> str:
    """The channel's service config: the balancer (see `_routing`), health checking and retries."""
    return json.dumps({**_SERVICE_CONFIG, "loadBalancingConfig": load_balancing_config(routing, outliers)})


#: The longest wait between reconnection attempts to a worker that went away.
MAX_RECONNECT_BACKOFF_MS = 2_000


@dataclass(frozen=True, kw_only=True)
class RemoteTls:
    """TLS to the server: roots to trust (system roots when None), a client certificate for mTLS."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None
    private_key: bytes | None = None
    #: The name the server's certificate must carry, when it is not the target's host.
    server_name: str | None = None

    @classmethod
    def from_files(
        cls,
        *,
        ca_certs: Path | None = None,
        certfile: Path | None = None,
        keyfile: Path | None = None,
        server_name: str | None = None,
    ) -> RemoteTls:
        """Read the PEM files."""
        return cls(
            root_certificates=ca_certs.read_bytes() if ca_certs is not None else None,
            certificate_chain=certfile.read_bytes() if certfile is not None else None,
            private_key=keyfile.read_bytes() if keyfile is not None else None,
            server_name=server_name,
        )


@dataclass(frozen=True, kw_only=True)
class Keepalive:
    """Client keepalive pings, to notice a dead or stopped worker without waiting for TCP (seconds).

    A ping goes out after `time` s without one; every ping (keepalive or BDP) must be acknowledged
    within `timeout` s, else the connection and every call on it fail with UNAVAILABLE. The server
    must permit pings this often (`vllm_server.grpc.listener.MIN_CLIENT_PING_INTERVAL_MS`, 5 s).
    """

    time: float = 30.0
    timeout: float = 10.0


def open_channel(
    target: str,
    *,
    tls: RemoteTls | None,
    keepalive: Keepalive | None,
    max_message_bytes: int,
    routing: Routing = "round_robin",
    outliers: OutlierDetection | None = None,
) -> grpc.aio.Channel:
    """A channel to `target` (any gRPC target string) that balances over its addresses."""
    if routing == "prefix":
        enable_request_hash_header()
    options: list[tuple[str, Any]] = [
        ("grpc.service_config", service_config(routing, outliers)),
        # Ours, not one a DNS TXT record may carry.
        ("grpc.service_config_disable_resolution", 1),
        ("grpc.enable_retries", 1),
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        ("grpc.initial_reconnect_backoff_ms", min(1_000, MAX_RECONNECT_BACKOFF_MS)),
        ("grpc.max_reconnect_backoff_ms", MAX_RECONNECT_BACKOFF_MS),
    ]
    if keepalive is not None:
        options += [
            ("grpc.keepalive_time_ms", int(keepalive.time * 1000)),
            ("grpc.keepalive_timeout_ms", int(keepalive.timeout * 1000)),
            # The watchdog that actually fires on an open stream (see the module docstring).
            ("grpc.http2.ping_timeout_ms", int(keepalive.timeout * 1000)),
            ("grpc.keepalive_permit_without_calls", 1),
            ("grpc.http2.max_pings_without_data", 0),
        ]
    if tls is None:
        return grpc.aio.insecure_channel(target, options=options)
    if tls.server_name is not None:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls.root_certificates,
        private_key=tls.private_key,
        certificate_chain=tls.certificate_chain,
    )
    return grpc.aio.secure_channel(target, credentials, options=options)
