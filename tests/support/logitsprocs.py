"""A custom logits processor for `--logits-processors tests.support.logitsprocs:OnlyToken` (vLLM's
`LogitsProcessor` interface) whose `validate_params` refuses a request's `extra_args["only_token"]`
that is no non-negative int, as vLLM's custom processors check their arguments; it leaves the logits
as they are."""

from __future__ import annotations

from typing import Any

import torch
from vllm.v1.sample.logits_processor import BatchUpdate, LogitsProcessor


class OnlyToken(LogitsProcessor):
    """Checks `only_token`; changes nothing."""

    @classmethod
    def validate_params(cls, sampling_params: Any) -> None:
        token = (sampling_params.extra_args or {}).get("only_token")
        if token is not None and (not isinstance(token, int) or token < 0):
            raise ValueError(f"only_token must be a non-negative int, not {token!r}")

    def __init__(self, vllm_config: Any, device: torch.device, is_pin_memory: bool) -> None:
        pass

    def is_argmax_invariant(self) -> bool:
        return True

    def update_state(self, batch_update: BatchUpdate | None) -> None:
        pass

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        return logits
