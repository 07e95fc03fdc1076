"""The text layer: `TextLlm` over an `Llm`.

Request, tokenizer, lowering, choices, detokenizer, stops, logprobs, fan-out.
"""

from vllm_llm.text._llm import (
    FinishReasonName,
    LogprobCandidate,
    TextChoice,
    TextDelta,
    TextLlm,
    TextRequest,
    TextResult,
    TextSamplingParams,
    TextStream,
    TextTokenizer,
    TextUsage,
    TokenizerSource,
    TokenLogprobs,
    TokenStep,
)

__all__ = [
    "FinishReasonName",
    "LogprobCandidate",
    "TextChoice",
    "TextDelta",
    "TextLlm",
    "TextRequest",
    "TextResult",
    "TextSamplingParams",
    "TextStream",
    "TextTokenizer",
    "TextUsage",
    "TokenLogprobs",
    "TokenStep",
    "TokenizerSource",
]
