"""`EngineCoreSettings`: what an engine core is built from (read by `EngineCoreLlm` and `_info`).

Two ways in. A program names the settings it cares about (`EngineCoreSettings(model=..., dtype=...)`)
and passes any other `AsyncEngineArgs` field in `engine_args`. A worker started from the command line
hands over every engine flag exactly as vLLM's own parser read it (`from_engine_args`): the fields this
package reads itself become the named settings, the rest travel in `engine_args` when they differ from
vLLM's defaults. Either way `engine_config()` builds vLLM's `VllmConfig` as vLLM's OpenAI server builds
it, so a flag means to a worker what it means to `vllm serve`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["EngineCoreSettings"]

#: Named settings that are `AsyncEngineArgs` fields of the same name and meaning.
_SAME_AS_VLLM = (
    "model",
    "tokenizer",
    "dtype",
    "max_model_len",
    "data_parallel_size",
    "seed",
    "enforce_eager",
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_prefix_caching",
    "enable_lora",
    "max_loras",
    "max_lora_rank",
    "enable_sleep_mode",
    "enable_prompt_embeds",
    "stream_interval",
)
#: `AsyncEngineArgs` fields the named settings stand for under another shape (see `from_engine_args`).
_RESHAPED = ("served_model_name", "disable_log_stats", "reasoning_parser")


@dataclass(frozen=True, kw_only=True)
class EngineCoreSettings:
    """What an engine core is built from: the settings this package reads, plus `engine_args`."""

    model: str
    tokenizer: str | None = None
    served_model_name: str | None = None
    dtype: str = "auto"
    max_model_len: int | None = None
    data_parallel_size: int = 1
    seed: int = 0
    #: No torch.compile / CUDA graphs. On by default here (tests and embedders start small engines
    #: often); a worker's `--enforce-eager` defaults to off, as vLLM's.
    enforce_eager: bool = True
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    enable_prefix_caching: bool | None = None
    enable_lora: bool = False
    max_loras: int = 1
    max_lora_rank: int = 16
    enable_sleep_mode: bool = False
    enable_prompt_embeds: bool = False
    #: The structured-output backend, unless `engine_args` carries a whole `structured_outputs_config`.
    structured_outputs_backend: str = "auto"
    #: Engine stats (scheduler stats for /metrics), on by default as in vLLM (`--disable-log-stats`).
    log_stats: bool = True
    randomize_request_ids: bool = True
    #: Send a request's outputs every this many new tokens (vLLM's `--stream-interval`); a request may
    #: ask for a larger interval (`SamplingParams.stream_interval`), never a smaller one.
    stream_interval: int = 1
    #: vLLM's `--reasoning-parser` for the engine: its reasoning config (thinking_token_budget) and the
    #: structured-output manager's start after reasoning. Parsing the output stays with the caller.
    reasoning_parser: str | None = None
    #: Further `vllm.engine.arg_utils.AsyncEngineArgs` fields, passed through (config objects or the
    #: dicts vLLM accepts for them); never one of the named settings above.
    engine_args: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        named = set(_SAME_AS_VLLM) | set(_RESHAPED)
        if clash := sorted(named & set(self.engine_args)):
            raise ValueError(f"engine_args repeats named settings: {', '.join(clash)} (set them by name)")

    @classmethod
    def from_engine_args(
        cls, engine_args: Mapping[str, Any], *, randomize_request_ids: bool = True
    ) -> EngineCoreSettings:
        """Settings that hand vLLM exactly `engine_args` (every `AsyncEngineArgs` field, as vLLM's
        parser read a worker's flags): `engine_config()` is then the config `vllm serve` builds."""
        from vllm.engine.arg_utils import AsyncEngineArgs

        defaults = _field_defaults(AsyncEngineArgs)
        names = engine_args.get("served_model_name")
        if isinstance(names, list | tuple):
            names = names[0] if names else None  # vLLM's engine takes the first (get_served_model_name)
        structured = engine_args.get("structured_outputs_config")
        backend = getattr(structured, "backend", None) or "auto"
        passed = set(_SAME_AS_VLLM) | set(_RESHAPED)
        rest = {
            name: value
            for name, value in engine_args.items()
            if name not in passed and (name not in defaults or not _equal(value, defaults[name]))
        }
        return cls(
            **{name: engine_args[name] for name in _SAME_AS_VLLM if name in engine_args},
            served_model_name=names or None,
            structured_outputs_backend=backend,
            log_stats=not engine_args.get("disable_log_stats", False),
            randomize_request_ids=randomize_request_ids,
            reasoning_parser=engine_args.get("reasoning_parser") or None,
            engine_args=rest,
        )

    def async_engine_args(self) -> Any:
        """vLLM's AsyncEngineArgs for these settings (a fresh copy: building a config mutates it)."""
        from vllm.config import StructuredOutputsConfig
        from vllm.engine.arg_utils import AsyncEngineArgs

        structured: Any = StructuredOutputsConfig  # its backend is a Literal; ours a checked-by-vLLM str

        kwargs: dict[str, Any] = {name: getattr(self, name) for name in _SAME_AS_VLLM}
        for name in ("max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching"):
            if kwargs[name] is None:
                del kwargs[name]  # vLLM picks them (by usage context and model)
        kwargs |= {
            "served_model_name": self.served_model_name,
            "reasoning_parser": self.reasoning_parser or "",
            "disable_log_stats": not self.log_stats,
        }
        extra = copy.deepcopy(dict(self.engine_args))
        extra.setdefault("structured_outputs_config", structured(backend=self.structured_outputs_backend))
        return AsyncEngineArgs(**(extra | kwargs))

    def engine_config(self) -> Any:
        """vLLM's `VllmConfig` for these settings, built as vLLM's OpenAI server builds it."""
        from vllm.usage.usage_lib import UsageContext

        # The usage context picks defaults (max_num_seqs, max_num_batched_tokens): a worker is a server.
        return self.async_engine_args().create_engine_config(UsageContext.OPENAI_API_SERVER)


def _field_defaults(cls: type) -> dict[str, Any]:
    """The default of each dataclass field of `cls` (a factory's product for default_factory)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _equal(a: Any, b: Any) -> bool:
    """Whether two engine-argument values are the same (config objects compare by their fields)."""
    try:
        return bool(a == b)
    except Exception:  # an object whose == raises: not known to be equal
        return False
