"""`TextTokenizer`: a Hugging Face tokenizer directory read with `tokenizers` alone (no transformers).

It reproduces what `transformers.AutoTokenizer` (v5, `TokenizersBackend`) does with the same files, as
far as vLLM's output processing and chat rendering depend on it: the special tokens of
tokenizer_config.json (added to the backend when missing), the bos/eos post-processor rebuilt when
`add_bos_token`/`add_eos_token` are given, `decode` with the clean-up rule, `convert_ids_list_to_tokens`
as vLLM's detokenizer_utils, and the chat template(s).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, processors

from vllm_llm._errors import InvalidRequest, Unsupported

__all__ = ["TextTokenizer"]

_NAMED_SPECIALS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
_REPLACEMENT_CHAR = "\N{REPLACEMENT CHARACTER}"


def _token_content(value: object) -> str | None:
    """The text of a special-token entry (a string or a serialized AddedToken)."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        content = value.get("content")
        return content if isinstance(content, str) else None
    return None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


class TextTokenizer:
    """A tokenizer with the special tokens, post-processor and chat templates of its config."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        config: Mapping[str, Any] | None = None,
        chat_template: str | Mapping[str, str] | None = None,
    ) -> None:
        self.backend = tokenizer
        config = dict(config or {})
        self._specials: dict[str, str] = {}
        for name in _NAMED_SPECIALS:
            content = _token_content(config.get(name))
            if content is not None:
                self._specials[name] = content
        extra = config.get("additional_special_tokens") or config.get("extra_special_tokens") or []
        self._extra_specials = [c for c in (_token_content(v) for v in extra) if c is not None]
        self._add_missing_specials()
        if "add_bos_token" in config or "add_eos_token" in config or tokenizer.post_processor is None:
            self._update_post_processor(bool(config.get("add_bos_token")), bool(config.get("add_eos_token")))
        self.clean_up_tokenization_spaces = bool(config.get("clean_up_tokenization_spaces", False)) and (
            type(tokenizer.model).__name__ != "BPE"
            or bool(config.get("clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output"))
        )
        if chat_template is None:
            chat_template = _templates_from_config(config.get("chat_template"))
        self.chat_template = chat_template
        self.added_tokens: dict[int, str] = {
            tid: tok.content for tid, tok in tokenizer.get_added_tokens_decoder().items()
        }
        self.all_special_ids: frozenset[int] = frozenset(
            tid for tid, tok in tokenizer.get_added_tokens_decoder().items() if tok.special
        )
        self.vocab_size: int = tokenizer.get_vocab_size(with_added_tokens=True)
        vocab = tokenizer.get_vocab(with_added_tokens=True)
        self.max_token_id: int = max(max(vocab.values(), default=0), tokenizer.get_vocab_size(False) - 1)
        self._space_marker = _leading_space_marker(tokenizer)

    # ---- loading -------------------------------------------------------------------------------------

    @classmethod
    def from_dir(cls, path: str | os.PathLike[str]) -> TextTokenizer:
        """Load tokenizer.json, tokenizer_config.json (+ special_tokens_map.json, chat_template.jinja)."""
        root = Path(path)
        file = root / "tokenizer.json"
        if not file.is_file():
            raise Unsupported(f"the tokenizer source {str(root)!r} is not a directory with a tokenizer.json")
        config = _read_json(root / "special_tokens_map.json")
        config.update(_read_json(root / "tokenizer_config.json"))
        template: str | Mapping[str, str] | None = None
        jinja = root / "chat_template.jinja"
        if jinja.is_file():
            template = jinja.read_text(encoding="utf-8")
        return cls(Tokenizer.from_file(str(file)), config=config, chat_template=template)

    @classmethod
    def load(cls, source: str | os.PathLike[str] | Tokenizer | TextTokenizer) -> TextTokenizer:
        """A tokenizer from a directory, a ready `tokenizers.Tokenizer`, or itself."""
        if isinstance(source, TextTokenizer):
            return source
        if isinstance(source, Tokenizer):
            return cls(source)
        return cls.from_dir(source)

    def _add_missing_specials(self) -> None:
        vocab = self.backend.get_vocab(with_added_tokens=True)
        missing = [c for c in (*self._specials.values(), *self._extra_specials) if c not in vocab]
        if missing:
            self.backend.add_special_tokens(
                [AddedToken(c, special=True, normalized=False) for c in dict.fromkeys(missing)]
            )

    def _update_post_processor(self, add_bos: bool, add_eos: bool) -> None:
        # transformers' TokenizersBackend.update_post_processor, verbatim in effect.
        bos, eos = self.bos_token, self.eos_token
        add_bos = add_bos and bos is not None
        add_eos = add_eos and eos is not None
        single = f"{(f'{bos}:0 ') if add_bos else ''}$A:0{(f' {eos}:0') if add_eos else ''}"
        pair = f"{single}{(f' {bos}:1') if add_bos else ''} $B:1{(f' {eos}:1') if add_eos else ''}"
        specials: list[tuple[str, int]] = []
        if add_bos and bos is not None and (bos_id := self.backend.token_to_id(bos)) is not None:
            specials.append((bos, bos_id))
        if add_eos and eos is not None and (eos_id := self.backend.token_to_id(eos)) is not None:
            specials.append((eos, eos_id))
        self.backend.post_processor = processors.TemplateProcessing(
            single=single, pair=pair, special_tokens=specials
        )

    # ---- special tokens ------------------------------------------------------------------------------

    @property
    def bos_token(self) -> str | None:
        """The bos token text."""
        return self._specials.get("bos_token")

    @property
    def eos_token(self) -> str | None:
        """The eos token text."""
        return self._specials.get("eos_token")

    @property
    def bos_token_id(self) -> int | None:
        """The bos token id."""
        return self.token_to_id(self.bos_token)

    @property
    def eos_token_id(self) -> int | None:
        """The eos token id."""
        return self.token_to_id(self.eos_token)

    @property
    def special_tokens_map(self) -> dict[str, str]:
        """The named special tokens (bos_token, eos_token, ...), as chat templates see them."""
        return dict(self._specials)

    def token_to_id(self, token: str | None) -> int | None:
        """The id of a token, or None."""
        if token is None:
            return None
        tid = self.backend.token_to_id(token)
        return None if tid is None else int(tid)

    # ---- encode / decode -----------------------------------------------------------------------------

    def encode(self, text: str, *, add_special_tokens: bool = True) -> list[int]:
        """Token ids of `text` (bos etc. by the post-processor when `add_special_tokens`)."""
        return list(self.backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, token_ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Text of `token_ids`, as transformers' `decode` (clean-up included when configured)."""
        text: str = self.backend.decode(list(token_ids), skip_special_tokens=skip_special_tokens)
        if self.clean_up_tokenization_spaces:
            text = _clean_up_tokenization(text)
        return text

    def convert_ids_to_tokens(self, token_ids: Iterable[int]) -> list[str]:
        """The raw vocabulary pieces of `token_ids` ("" for unknown ids)."""
        return [self.backend.id_to_token(t) or "" for t in token_ids]

    def decode_each(self, token_ids: Sequence[int]) -> list[str]:
        """Each id decoded on its own, as vLLM's `convert_ids_list_to_tokens` (logprob token strings)."""
        marker = self._space_marker
        if marker is None:
            return [self.decode([t]) or "" for t in token_ids]
        raws = self.convert_ids_to_tokens(token_ids)
        pairs = zip(token_ids, raws, strict=True)
        return [_restore_leading_spaces(raw, self.decode([t]) or "", marker) for t, raw in pairs]

    def ends_incomplete(self, text: str) -> bool:
        """Whether `text` ends with the replacement character of an unfinished UTF-8 sequence."""
        return text.endswith(_REPLACEMENT_CHAR)

    # ---- chat templates ------------------------------------------------------------------------------

    def get_chat_template(self, name: str | None = None, *, has_tools: bool = False) -> str:
        """The chat template to render with (by name, or tool_use/default among several), as transformers."""
        template = self.chat_template
        if template is None:
            raise InvalidRequest("the tokenizer has no chat template", param="chat_template")
        if isinstance(template, str):
            return template
        if name is not None and name in template:
            return template[name]
        if name is None and has_tools and "tool_use" in template:
            return template["tool_use"]
        if name is None and "default" in template:
            return template["default"]
        raise InvalidRequest(
            f"chat template {name!r} not found; the tokenizer has {sorted(template)}", param="chat_template"
        )


def _templates_from_config(value: object) -> str | Mapping[str, str] | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return {str(t["name"]): str(t["template"]) for t in value if isinstance(t, Mapping)}
    return None


def _leading_space_marker(tokenizer: Tokenizer) -> str | None:
    """The Metaspace replacement character, whose leading instance decode() strips (vLLM's rule)."""
    try:
        pre = json.loads(tokenizer.to_str()).get("pre_tokenizer") or {}
    except ValueError:
        return None
    if pre.get("type") == "Metaspace":
        return str(pre.get("replacement", "\u2581"))
    if pre.get("type") == "Sequence":
        for sub in pre.get("pretokenizers", []):
            if sub.get("type") == "Metaspace":
                return str(sub.get("replacement", "\u2581"))
    return None


def _restore_leading_spaces(raw_token: str, token_str: str, marker: str) -> str:
    num_markers = len(raw_token) - len(raw_token.lstrip(marker))
    if num_markers == 0:
        return token_str
    missing = num_markers - (len(token_str) - len(token_str.lstrip(" ")))
    return " " * missing + token_str if missing > 0 else token_str


def _clean_up_tokenization(text: str) -> str:
    return (
        text.replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
    )
