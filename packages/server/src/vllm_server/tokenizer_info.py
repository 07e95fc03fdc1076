"""`tokenizer_info`: the body of `GET /tokenizer_info` (vLLM's `--enable-tokenizer-info-endpoint`).

vLLM's `TokenizerInfo` reports its tokenizer object: the tokenizer's `init_kwargs` (tokenizer_config.json
as transformers loads it, with the keyword arguments vLLM loads it with), less the vocabulary file paths,
`AddedToken`s as their text, the class name of vLLM's wrapped tokenizer, and the server's
`--chat-template` when one is given. The text layer reads the same directory with `tokenizers` alone, so
the report loads it once more with transformers (a worker's environment has it), as vLLM's
`get_tokenizer` does.
"""

from __future__ import annotations

import os
from typing import Any

from vllm_llm import Unsupported

__all__ = ["tokenizer_info"]

#: The keyword arguments vLLM's `get_tokenizer` passes a generating model's HF tokenizer.
_VLLM_KWARGS = {"truncation_side": "left", "mistral_format": False}


def tokenizer_info(source: object, chat_template: str | None) -> dict[str, Any]:
    """The tokenizer information of the tokenizer directory `source`, as vLLM's `TokenizerInfo.to_dict`."""
    if not isinstance(source, (str, os.PathLike)) or not os.path.isdir(source):
        raise Unsupported("/tokenizer_info reports a tokenizer loaded from a directory; this server's is not")
    try:
        from transformers import AutoTokenizer, TokenizersBackend
    except ImportError as exc:
        raise Unsupported("/tokenizer_info needs transformers installed (a worker's environment)") from exc
    tokenizer = AutoTokenizer.from_pretrained(source, **_VLLM_KWARGS)
    config = dict(getattr(tokenizer, "init_kwargs", None) or {})
    config.pop("vocab_file", None)
    config.pop("merges_file", None)
    info: dict[str, Any] = _serializable(config)
    # vLLM's class: its cache's subclass (`Cached…`), within its renderer's thread pool for a
    # `tokenizers`-backed one (`TokenizerPool…`).
    name = f"Cached{type(tokenizer).__name__}"
    info["tokenizer_class"] = f"TokenizerPool{name}" if isinstance(tokenizer, TokenizersBackend) else name
    if chat_template:
        info["chat_template"] = chat_template
    return info


def _serializable(obj: Any) -> Any:
    """vLLM's `_make_json_serializable`: an object with `content` (an `AddedToken`) as it."""
    if hasattr(obj, "content"):
        return obj.content
    if isinstance(obj, dict):
        return {k: _serializable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_serializable(item) for item in obj]
    return obj
