"""Build a tiny random-weight Llama model with a locally trained tokenizer, cached on disk.

As a command, it builds one model (once) and prints its directory, so that a shell can take it whole:

    M=$(python -m vllm_frontend_testing.tiny_model)                # the tiny Llama
    LLAVA=$(python -m vllm_frontend_testing.tiny_model --llava)    # the tiny LLaVA, beside it
    SQL=$(python -m vllm_frontend_testing.tiny_model --lora)       # a tiny LoRA adapter of the tiny Llama
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pathlib
import random
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = [
    "CHAT_TEMPLATE",
    "DEFAULT_CACHE_DIR",
    "ENV_VAR",
    "FORMAT_TOKENS",
    "IMAGE_TOKEN",
    "LLAVA_CHAT_TEMPLATE",
    "SPECIAL_TOKENS",
    "build_tiny_llava",
    "build_tiny_lora",
    "build_tiny_model",
    "main",
]

#: Environment variable that overrides the default cache directory.
ENV_VAR = "VLLM_LLM_TINY_MODEL_DIR"
#: Default location of the built model directory.
DEFAULT_CACHE_DIR = "~/.cache/vllm-llm/tiny-llama-v2"
#: Special tokens, in id order (ids 0..7).
SPECIAL_TOKENS: tuple[str, ...] = (
    "<unk>",
    "<s>",
    "</s>",
    "<pad>",
    "<|eot|>",
    "<|user|>",
    "<|assistant|>",
    "<|system|>",
)
#: Tokens of the tool-call and reasoning formats the parsers read, added after the trained vocabulary
#: as single, non-special tokens (as real models add them: they stay in decoded text).
FORMAT_TOKENS: tuple[str, ...] = (
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_calls>",
    "</tool_calls>",
    "<|python_tag|>",
    "<|eom_id|>",
    "<|action_start|>",
    "<|action_end|>",
    "<|plugin|>",
    "[TOOL_CALLS]",
    "[ARGS]",
    "[CALL_ID]",
    "[THINK]",
    "[/THINK]",
    "<\uff5ctool\u2581calls\u2581begin\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>",
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<\uff5ctool\u2581call\u2581end\uff5c>",
    "<\uff5ctool\u2581sep\uff5c>",
    "<|tool_calls_section_begin|>",
    "<|tool_calls_section_end|>",
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "<|observation|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|tool_call|>",
    "<minimax:tool_call>",
    "</minimax:tool_call>",
)

_MARKER = ".complete"
_BUILD_VERSION = "tiny-llama-v2"
_VOCAB_TARGET = 1280
_MAX_POSITIONS = 512
_SEED = 0
_INIT_RANGE = 0.5

#: Jinja chat template: system/user/assistant messages, tools and a generation prompt.
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% if tools %}"
    "<|system|>\nYou can call these tools:\n"
    "{% for tool in tools %}"
    "{% set fn = tool.function if tool.function is defined else tool %}"
    "\n- {{ fn.name }}: {{ fn | tojson }}"
    "{% endfor %}"
    "<|eot|>\n"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'system' %}<|system|>\n"
    "{% elif message.role == 'user' %}<|user|>\n"
    "{% elif message.role == 'assistant' %}<|assistant|>\n"
    "{% else %}<|{{ message.role }}|>\n"
    "{% endif %}"
    "{% if message.content is string %}{{ message.content }}"
    "{% elif message.content is not none %}"
    "{% for part in message.content %}"
    "{% if part.type == 'text' %}{{ part.text }}{% endif %}"
    "{% endfor %}"
    "{% endif %}"
    "{% if message.tool_calls is defined and message.tool_calls %}"
    "{% for call in message.tool_calls %}"
    "{% set fn = call.function if call.function is defined else call %}"
    '\n<tool_call>{"name": "{{ fn.name }}", "arguments": {{ fn.arguments | tojson }}}</tool_call>'
    "{% endfor %}"
    "{% endif %}"
    "<|eot|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

_SUBJECTS = (
    "the cat",
    "a dog",
    "my friend",
    "the teacher",
    "our team",
    "the old man",
    "a young girl",
    "the computer",
    "this model",
    "the server",
    "every student",
    "the river",
    "a small bird",
    "the engineer",
    "your neighbor",
    "the city",
    "a farmer",
    "the doctor",
    "the robot",
    "my sister",
)
_VERBS = (
    "sees",
    "likes",
    "builds",
    "writes",
    "reads",
    "finds",
    "carries",
    "opens",
    "paints",
    "follows",
    "answers",
    "remembers",
    "explains",
    "measures",
    "visits",
    "sends",
    "watches",
    "cleans",
    "fixes",
    "describes",
)
_OBJECTS = (
    "a red apple",
    "the long letter",
    "some fresh bread",
    "a quiet garden",
    "the blue door",
    "an interesting book",
    "the morning news",
    "a strange noise",
    "the big window",
    "a simple question",
    "the heavy box",
    "a warm coat",
    "the green field",
    "a bright lamp",
    "the final answer",
    "a broken chair",
    "the tall tree",
    "a happy song",
    "the empty room",
    "a careful plan",
)
_ADVERBIALS = (
    "every morning",
    "after lunch",
    "in the park",
    "near the station",
    "before the storm",
    "with great care",
    "at night",
    "on Monday",
    "during the summer",
    "without a word",
    "for the first time",
    "once again",
    "in the kitchen",
    "by the sea",
    "quite slowly",
    "very quickly",
)
_QUESTIONS = (
    "What is the weather like today?",
    "How many apples are on the table?",
    "Where did you put the keys?",
    "Why is the sky blue?",
    "Can you tell me a short story?",
    "Who wrote this letter?",
    "When does the train leave?",
    "Which road goes to the village?",
    "Is it going to rain tomorrow?",
    "Could you help me with my homework?",
)
_ANSWERS = (
    "Sure, I can help with that.",
    "The answer is forty two.",
    "I do not know, but I will find out.",
    "It is sunny and warm.",
    "Yes, of course!",
    "No, thank you.",
    "Here is a short list: one, two, three.",
    "Let me think about it for a moment.",
)
_FUNCS = ("get_weather", "search", "add_numbers", "send_email", "lookup_user")


def _corpus() -> list[str]:
    """Return a deterministic English training corpus."""
    rng = random.Random(1234)
    lines: list[str] = []
    for i in range(600):
        subject = rng.choice(_SUBJECTS)
        sentence = f"{subject} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
        if i % 2 == 0:
            sentence += f" {rng.choice(_ADVERBIALS)}"
        sentence = sentence[0].upper() + sentence[1:]
        end = "." if i % 5 else "!"
        if i % 7 == 0:
            sentence += f", and then {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} it"
        lines.append(sentence + end)
    for i in range(200):
        lines.append(f"{rng.choice(_QUESTIONS)} {rng.choice(_ANSWERS)}")
        a, b = rng.randrange(100), rng.randrange(1000)
        lines.append(f"In {1900 + i}, there were {a} people and {b} houses; {a + b} in total.")
    for i in range(100):
        fn = _FUNCS[i % len(_FUNCS)]
        args = json.dumps({"city": rng.choice(("Paris", "Tokyo", "Lima")), "n": i})
        lines.append(f'{{"name": "{fn}", "arguments": {args}}}')
        lines.append(f"def {fn}(x, y):\n    return x + y  # {i}")
    return lines


def _train_tokenizer() -> Any:
    """Train a deterministic byte-level BPE tokenizer on the built-in corpus."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=_VOCAB_TARGET,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(), trainer=trainer)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in FORMAT_TOKENS])
    bos_id = tokenizer.token_to_id("<s>")
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A",
        pair="<s> $A <s> $B",
        special_tokens=[("<s>", bos_id)],
    )
    return tokenizer


def _write_json(path: pathlib.Path, data: dict[str, Any]) -> None:
    """Write a JSON file deterministically."""
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _build(out: pathlib.Path) -> None:
    """Write tokenizer, config, weights and generation config into ``out``."""
    tokenizer = _train_tokenizer()
    tokenizer.save(str(out / "tokenizer.json"), pretty=True)
    ids = {tok: tokenizer.token_to_id(tok) for tok in SPECIAL_TOKENS}
    vocab_size = int(tokenizer.get_vocab_size(with_added_tokens=True))

    _write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "additional_special_tokens": list(SPECIAL_TOKENS[4:]),
            "add_bos_token": True,
            "add_eos_token": False,
            "clean_up_tokenization_spaces": False,
            "model_max_length": _MAX_POSITIONS,
            "padding_side": "left",
            "chat_template": CHAT_TEMPLATE,
        },
    )
    _write_json(
        out / "special_tokens_map.json",
        {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "additional_special_tokens": list(SPECIAL_TOKENS[4:]),
        },
    )

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=_MAX_POSITIONS,
        initializer_range=_INIT_RANGE,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=ids["<s>"],
        eos_token_id=ids["</s>"],
        pad_token_id=ids["<pad>"],
        dtype="float32",
    )
    torch.manual_seed(_SEED)
    model = LlamaForCausalLM(config)  # type: ignore[no-untyped-call]
    for param in model.parameters():
        if param.dtype != torch.float32:
            raise RuntimeError(f"unexpected parameter dtype {param.dtype}")
    model.save_pretrained(str(out), safe_serialization=True)
    # Older readers look for ``torch_dtype``; keep ``dtype`` for newer ones.
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    cfg["torch_dtype"] = "float32"
    _write_json(out / "config.json", cfg)

    _write_json(
        out / "generation_config.json",
        {
            "bos_token_id": ids["<s>"],
            "eos_token_id": [ids["</s>"], ids["<|eot|>"]],
            "pad_token_id": ids["<pad>"],
            "do_sample": True,
            "temperature": 0.8,
            "top_p": 0.95,
            "top_k": 50,
            "repetition_penalty": 1.0,
        },
    )
    (out / _MARKER).write_text(_BUILD_VERSION + "\n", encoding="utf-8")


def _resolve(cache_dir: str | os.PathLike[str] | None) -> pathlib.Path:
    """Resolve the target model directory."""
    if cache_dir is None:
        cache_dir = os.environ.get(ENV_VAR) or DEFAULT_CACHE_DIR
    return pathlib.Path(cache_dir).expanduser().absolute()


def _is_complete(path: pathlib.Path, version: str = _BUILD_VERSION) -> bool:
    """Whether ``path`` holds a finished build of ``version``."""
    marker = path / _MARKER
    try:
        return marker.read_text(encoding="utf-8").strip() == version
    except OSError:
        return False


@contextlib.contextmanager
def _locked(lock_path: pathlib.Path) -> Iterator[None]:
    """Hold an exclusive fcntl lock on ``lock_path``."""
    with open(lock_path, "a+b") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _build_once(
    target: pathlib.Path, build: Callable[[pathlib.Path], None], version: str = _BUILD_VERSION
) -> pathlib.Path:
    """Run `build` into a temp dir beside `target` and rename it there, once, under a file lock."""
    if _is_complete(target, version):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{target.name}.lock"):
        if _is_complete(target, version):
            return target
        if target.exists():
            shutil.rmtree(target)
        tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            build(tmp)
            tmp.chmod(0o755)
            for child in tmp.iterdir():
                child.chmod(0o644)
            os.rename(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return target


def build_tiny_model(cache_dir: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """Build (once) and return the directory of the tiny Llama model."""
    return _build_once(_resolve(cache_dir), _build)


def build_tiny_lora(model_dir: str | os.PathLike[str], *, seed: int = 1, rank: int = 8) -> pathlib.Path:
    """Build (once) a PEFT LoRA adapter for the tiny model, beside it; returns its directory."""
    model = pathlib.Path(model_dir).expanduser().absolute()
    target = model.parent / f"{model.name}-lora-{seed}-r{rank}"

    def build(out: pathlib.Path) -> None:
        import torch
        from safetensors.torch import save_file

        config = json.loads((model / "config.json").read_text(encoding="utf-8"))
        hidden, inter = int(config["hidden_size"]), int(config["intermediate_size"])
        shapes = {
            "self_attn.q_proj": (hidden, hidden),
            "self_attn.v_proj": (hidden, hidden),
            "self_attn.o_proj": (hidden, hidden),
            "mlp.down_proj": (inter, hidden),
        }
        generator = torch.Generator().manual_seed(seed)
        tensors: dict[str, Any] = {}
        for layer in range(int(config["num_hidden_layers"])):
            for module, (fan_in, fan_out) in shapes.items():
                prefix = f"base_model.model.model.layers.{layer}.{module}"
                tensors[f"{prefix}.lora_A.weight"] = torch.randn(rank, fan_in, generator=generator) * 0.5
                tensors[f"{prefix}.lora_B.weight"] = torch.randn(fan_out, rank, generator=generator) * 0.5
        save_file(tensors, str(out / "adapter_model.safetensors"))
        _write_json(
            out / "adapter_config.json",
            {
                "peft_type": "LORA",
                "r": rank,
                "lora_alpha": 2 * rank,
                "lora_dropout": 0.0,
                "target_modules": ["q_proj", "v_proj", "o_proj", "down_proj"],
                "bias": "none",
                "task_type": "CAUSAL_LM",
                "base_model_name_or_path": str(model),
                "fan_in_fan_out": False,
                "modules_to_save": None,
            },
        )
        (out / _MARKER).write_text(_BUILD_VERSION, encoding="utf-8")

    return _build_once(target, build)


#: The token whose logit is NaN at every step of the tiny NaN model (`build_tiny_nan_model`).
NAN_TOKEN_ID = 7


def build_tiny_nan_model(model_dir: str | os.PathLike[str]) -> pathlib.Path:
    """Build (once) a copy of the tiny model whose output row of `NAN_TOKEN_ID` is NaN, beside it: every
    step's logits hold exactly one NaN per request (what ``VLLM_COMPUTE_NANS_IN_LOGITS`` counts), and
    greedy decoding picks that token (argmax takes NaN as the largest). The rest is the tiny model's."""
    model = pathlib.Path(model_dir).expanduser().absolute()
    target = model.parent / f"{model.name}-nan-{NAN_TOKEN_ID}"

    def build(out: pathlib.Path) -> None:
        from safetensors.torch import load_file, save_file

        for item in model.iterdir():
            if item.name != _MARKER and item.is_file() and item.suffix != ".safetensors":
                shutil.copyfile(item, out / item.name)
        found = False
        for weights in model.glob("*.safetensors"):
            tensors = load_file(str(weights))
            head = tensors.get("lm_head.weight")
            if head is not None:
                head[NAN_TOKEN_ID] = float("nan")
                found = True
            save_file(tensors, str(out / weights.name), metadata={"format": "pt"})
        if not found:
            raise RuntimeError(f"{model}: no lm_head.weight to poison (tied embeddings?)")
        (out / _MARKER).write_text(_BUILD_VERSION, encoding="utf-8")

    return _build_once(target, build)


#: The image placeholder of the tiny LLaVA model (one added special token, after the tiny vocabulary).
IMAGE_TOKEN = "<image>"
_LLAVA_BUILD_VERSION = "tiny-llava-v1"
_LLAVA_IMAGE_SIZE = 32
_LLAVA_PATCH_SIZE = 16

#: The tiny model's template with one `<image>` per image part (vLLM hands image parts to the
#: template as ``{"type": "image"}``), so its content format is detected as "openai".
LLAVA_CHAT_TEMPLATE = CHAT_TEMPLATE.replace(
    "{% if part.type == 'text' %}{{ part.text }}{% endif %}",
    "{% if part.type == 'text' %}{{ part.text }}{% elif part.type == 'image' %}<image>{% endif %}",
)


def _build_llava(out: pathlib.Path, text_model: pathlib.Path) -> None:
    """A random-weight LLaVA over a copy of the tiny Llama's tokenizer and text config."""
    import torch
    from safetensors.torch import load_file, save_file
    from tokenizers import AddedToken, Tokenizer
    from transformers import (
        CLIPImageProcessor,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
    )
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    tokenizer = Tokenizer.from_file(str(text_model / "tokenizer.json"))
    tokenizer.add_special_tokens([AddedToken(IMAGE_TOKEN, special=True, normalized=False)])
    tokenizer.save(str(out / "tokenizer.json"), pretty=True)
    image_token_id = tokenizer.token_to_id(IMAGE_TOKEN)
    if image_token_id is None:
        raise RuntimeError(f"{IMAGE_TOKEN} was not added to the tokenizer")
    vocab_size = int(tokenizer.get_vocab_size(with_added_tokens=True))

    tok_config = json.loads((text_model / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok_config["chat_template"] = LLAVA_CHAT_TEMPLATE
    tok_config["additional_special_tokens"] = [*tok_config["additional_special_tokens"], IMAGE_TOKEN]
    tok_config["processor_class"] = "LlavaProcessor"
    _write_json(out / "tokenizer_config.json", tok_config)
    special = json.loads((text_model / "special_tokens_map.json").read_text(encoding="utf-8"))
    special["additional_special_tokens"] = [*special["additional_special_tokens"], IMAGE_TOKEN]
    _write_json(out / "special_tokens_map.json", special)
    shutil.copy(text_model / "generation_config.json", out / "generation_config.json")

    text_cfg = json.loads((text_model / "config.json").read_text(encoding="utf-8"))
    text_config = LlamaConfig(
        **{k: v for k, v in text_cfg.items() if k not in ("architectures", "transformers_version")}
    )
    text_config.vocab_size = vocab_size
    vision_config = CLIPVisionConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=_LLAVA_IMAGE_SIZE,
        patch_size=_LLAVA_PATCH_SIZE,
        projection_dim=64,
    )
    num_patches = (_LLAVA_IMAGE_SIZE // _LLAVA_PATCH_SIZE) ** 2
    config = LlavaConfig(
        vision_config=vision_config,
        text_config=text_config,
        image_token_index=image_token_id,
        image_seq_length=num_patches,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
        tie_word_embeddings=False,
    )
    torch.manual_seed(_SEED)
    model = LlavaForConditionalGeneration(config)
    with torch.no_grad():
        for param in model.parameters():
            param.normal_(0.0, 0.2)
    model.save_pretrained(str(out), safe_serialization=True)
    # transformers 5 writes the vision tower as `vision_tower.{embeddings,encoder,...}`; vLLM 0.32's
    # LLaVA loader reads the CLIP layout `vision_tower.vision_model.*`.
    for weights in out.glob("*.safetensors"):
        tensors = load_file(str(weights))
        renamed = {
            re.sub(r"(^|\.)vision_tower\.(?!vision_model\.)", r"\1vision_tower.vision_model.", k): v
            for k, v in tensors.items()
        }
        save_file(renamed, str(weights), metadata={"format": "pt"})
    cfg = json.loads((out / "config.json").read_text(encoding="utf-8"))
    cfg["torch_dtype"] = "float32"
    _write_json(out / "config.json", cfg)

    image_processor = CLIPImageProcessor(
        size={"shortest_edge": _LLAVA_IMAGE_SIZE},
        crop_size={"height": _LLAVA_IMAGE_SIZE, "width": _LLAVA_IMAGE_SIZE},
    )
    image_processor.save_pretrained(str(out))
    _write_json(
        out / "processor_config.json",
        {
            "processor_class": "LlavaProcessor",
            "image_token": IMAGE_TOKEN,
            "patch_size": _LLAVA_PATCH_SIZE,
            "num_additional_image_tokens": 1,
            "vision_feature_select_strategy": "default",
        },
    )
    (out / _MARKER).write_text(_LLAVA_BUILD_VERSION + "\n", encoding="utf-8")


def build_tiny_llava(cache_dir: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """Build (once) and return the directory of the tiny LLaVA model, beside the tiny Llama."""
    text_model = build_tiny_model(cache_dir)
    target = text_model.parent / f"{text_model.name}-llava"
    return _build_once(target, lambda out: _build_llava(out, text_model), _LLAVA_BUILD_VERSION)


def main(argv: Sequence[str] | None = None) -> None:
    """Build (once) the model the flags name and print its directory: one line, nothing else on stdout."""
    parser = argparse.ArgumentParser(
        prog="python -m vllm_frontend_testing.tiny_model",
        description="Build (once, cached on disk) a tiny random-weight model and print its directory. "
        "Without a flag: the tiny Llama with its own tokenizer.",
    )
    which = parser.add_mutually_exclusive_group()
    which.add_argument(
        "--llava", action="store_true", help="the tiny LLaVA (images and text), beside the Llama"
    )
    which.add_argument(
        "--lora", action="store_true", help="a tiny PEFT LoRA adapter of the tiny Llama, beside it"
    )
    parser.add_argument(
        "--cache-dir",
        help=f"the tiny Llama's directory (default: ${ENV_VAR}, else {DEFAULT_CACHE_DIR}); "
        "the others are built beside it",
    )
    args = parser.parse_args(argv)
    # Whatever a build prints goes to stderr: stdout carries the directory alone.
    with contextlib.redirect_stdout(sys.stderr):
        if args.llava:
            built = build_tiny_llava(args.cache_dir)
        elif args.lora:
            built = build_tiny_lora(build_tiny_model(args.cache_dir))
        else:
            built = build_tiny_model(args.cache_dir)
    print(built)


if __name__ == "__main__":
    main()
