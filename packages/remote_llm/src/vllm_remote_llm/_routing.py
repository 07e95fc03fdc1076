"""How a RemoteLlm's channel picks a worker: gRPC's own balancers, configured here.

- `round_robin` (the default): every address in turn.
- `prefix`: gRPC's `ring_hash` keyed by a request header (gRFC A76). `RemoteLlm` puts in that header a
  hash of the prompt's leading full blocks (block-aligned as the engine's prefix cache, `LlmInfo.block_size`
  tokens each, at most `prefix_blocks` of them), salted by the LoRA adapter and `cache_salt` (both change
  the engine's block hashes). Requests that share those blocks land on the same worker while it serves,
  so its prefix cache hits; a prompt shorter than one block carries no header and lands anywhere. What
  this gives up against a load-aware, cache-aware router (vllm-router's `cache_aware`, SGLang's): the
  ring knows neither the workers' load nor what they actually cache, so a hot prefix loads one worker
  while others idle, and a worker that joins or leaves moves 1/N of the prefixes (consistent hashing
  keeps the rest in place).

Either may sit under gRPC's `outlier_detection` (failure-percentage and success-rate ejection), beside
the client-side health checking of `vllm.internal.Llm`: a worker whose calls keep failing is ejected for
a while even when its health service still says SERVING. It is opt-in (`--outlier-detection`): gRPC's
ejection has no panic mode (Envoy routes to every host once too many are ejected), so a worker ejected
for the failures of a crash stays out for the whole ejection time after it restarted, even when it is the
only one left (tests/reliability/test_faults.py: a killed worker restarted, the other then killed).

grpcio 1.85 reads the request-hash header only with `GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY`
true in the process's environment when it parses a channel's ring_hash config; without it the header is
ignored and ring_hash, expecting a hash from xDS, picks no worker at all (a `--routing prefix` router
then waits forever for its first Info). `enable_request_hash_header` sets it, to true whatever it was,
before a prefix channel opens (`_channel.open_channel`), so a router needs nothing in its environment
(tests/router/test_prefix_router_process.py starts one without it).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

Routing = Literal["round_robin", "prefix"]

#: The header whose value ring_hash hashes to pick a worker.
PREFIX_HASH_HEADER = "x-vllm-prefix-hash"
_RING_HASH_ENV = "GRPC_EXPERIMENTAL_RING_HASH_SET_REQUEST_HASH_KEY"


@dataclass(frozen=True, kw_only=True)
class OutlierDetection:
    """gRPC's outlier_detection (gRFC A50): which workers to eject, and for how long (seconds)."""

    interval: float = 5.0
    base_ejection_time: float = 30.0
    max_ejection_time: float = 300.0
    max_ejection_percent: int = 50
    #: Eject a worker when at least this percentage of its calls in an interval failed ...
    failure_percentage_threshold: int = 50
    #: ... once it has had this many calls in the interval, among at least this many workers with as many.
    request_volume: int = 5
    minimum_hosts: int = 2

    def config(self) -> dict[str, Any]:
        """The `outlier_detection_experimental` settings, child policy aside."""
        return {
            "interval": f"{self.interval}s",
            "baseEjectionTime": f"{self.base_ejection_time}s",
            "maxEjectionTime": f"{self.max_ejection_time}s",
            "maxEjectionPercent": self.max_ejection_percent,
            "successRateEjection": {
                "stdevFactor": 1900,
                "enforcementPercentage": 100,
                "minimumHosts": self.minimum_hosts,
                "requestVolume": self.request_volume,
            },
            "failurePercentageEjection": {
                "threshold": self.failure_percentage_threshold,
                "enforcementPercentage": 100,
                "minimumHosts": self.minimum_hosts,
                "requestVolume": self.request_volume,
            },
        }


def load_balancing_config(routing: Routing, outliers: OutlierDetection | None) -> list[dict[str, Any]]:
    """The service config's `loadBalancingConfig` for `routing`, under outlier detection when given."""
    if routing == "prefix":
        child: dict[str, Any] = {"ring_hash_experimental": {"requestHashHeader": PREFIX_HASH_HEADER}}
    elif routing == "round_robin":
        child = {"round_robin": {}}
    else:
        raise ValueError(f"unknown routing {routing!r} (round_robin, prefix)")
    if outliers is None:
        return [child]
    return [{"outlier_detection_experimental": {**outliers.config(), "childPolicy": [child]}}]


def enable_request_hash_header() -> None:
    """Let gRPC's ring_hash read the request-hash header (before a prefix channel opens)."""
    os.environ[_RING_HASH_ENV] = "true"  # "false" would leave prefix routing picking no worker


def prefix_hash(
    prompt: Sequence[int], *, block_size: int, max_blocks: int, salt: Sequence[str | None] = ()
) -> str | None:
    """The hash of the prompt's leading full blocks (at most `max_blocks`); None without a full block."""
    blocks = min(max_blocks, len(prompt) // block_size)
    if blocks <= 0:
        return None
    h = hashlib.blake2b(digest_size=8)
    for part in salt:
        h.update(b"\x00" if part is None else b"\x01" + part.encode() + b"\x00")
    h.update(b"".join(t.to_bytes(4, "little", signed=True) for t in prompt[: blocks * block_size]))
    return h.hexdigest()
