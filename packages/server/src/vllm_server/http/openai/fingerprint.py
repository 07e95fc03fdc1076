"""The `system_fingerprint` of chat and completion responses, as vLLM's `--fingerprint-mode` makes it.

`full` (vLLM's default): `vllm-<version>[-tpN][-ppN][-dpN][-ep]-<hash8>`, the parallelism only where it is
more than one engine's; `hash`: `vllm-<version>-<hash8>`; `custom`: `--fingerprint-value`; `none`: null.
The version, the config hash and the parallelism are the engine's (`LlmInfo`): a router stamps what its
worker's vLLM would. With no vLLM behind the Llm (the mock) there is nothing to fingerprint: null.
"""

from __future__ import annotations

from vllm_llm.wire import LlmInfo

__all__ = ["system_fingerprint"]


def system_fingerprint(info: LlmInfo, mode: str, custom_value: str | None) -> str | None:
    """The fingerprint of the engine `info` describes, in `mode` (vLLM's build_system_fingerprint)."""
    if mode == "none":
        return None
    if mode == "custom":
        return custom_value
    if info.vllm_version is None:
        return None
    hash8 = info.config_hash[:8] if info.config_hash else "nohash"
    parts = [f"vllm-{info.vllm_version}"]
    if mode == "full":
        if info.tensor_parallel_size > 1:
            parts.append(f"tp{info.tensor_parallel_size}")
        if info.pipeline_parallel_size > 1:
            parts.append(f"pp{info.pipeline_parallel_size}")
        if info.data_parallel_size > 1:
            parts.append(f"dp{info.data_parallel_size}")
        if info.enable_expert_parallel:
            parts.append("ep")
    parts.append(hash8)
    return "-".join(parts)
