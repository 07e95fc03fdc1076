"""A worker's engine flags mean what they mean to vLLM: the engine config is vLLM's own, field by field.

For each argv, vLLM's `vllm serve` path builds its engine config (vLLM's parser, `make_arg_parser` →
`AsyncEngineArgs.from_cli_args` → `create_engine_config` in the OpenAI server's usage context), and
`vllm-frontend serve --model` builds the one its worker starts (`serve_config(argv).engine_settings()
.engine_config()`, what `Server` hands `EngineCoreLlm`). No engine starts. A flag our worker passed
differently (as `--reasoning-parser` was, a dict where vLLM has a config object) fails here.
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from vllm_server.cli import parse_serve_args, serve_config

#: One argv per line: flags across vLLM's config groups (model, cache, scheduler, parallel, LoRA,
#: structured outputs, observability, compilation, KV transfer and events, speculative decoding, ...),
#: in vLLM's spellings (dashes or underscores, dotted JSON keys, -O, human-readable ints).
ARGVS: list[list[str]] = [
    [],
    ["--dtype", "float32", "--max-model-len", "512", "--enforce-eager"],
    ["--reasoning-parser", "qwen3"],
    ["--reasoning-parser", "deepseek_r1", "--structured-outputs-config.backend", "xgrammar"],
    ["--structured-outputs-config", '{"backend": "guidance", "disable_any_whitespace": true}'],
    ["--served-model-name", "tiny", "alias", "--tokenizer", "{model}"],
    ["--max_model_len", "0.25k", "--max-num-seqs", "7", "--max-num-batched-tokens", "96"],
    ["--block-size", "32", "--enable-prefix-caching", "--prefix-caching-hash-algo", "sha256"],
    ["--no-enable-prefix-caching", "--no-enable-chunked-prefill", "--max-num-batched-tokens", "512"],
    ["--enable-lora", "--max-loras", "3", "--max-lora-rank", "32", "--max-cpu-loras", "4"],
    ["--seed", "7", "--generation-config", "vllm"],
    ["--override-generation-config", '{"temperature": 0.5, "top_k": 3}'],
    ["--hf-overrides", '{"max_position_embeddings": 256}', "--max-model-len", "256"],
    ["--kv-cache-dtype", "auto", "--kv-cache-memory-bytes", "1G"],
    ["--async-scheduling"],
    ["--scheduling-policy", "priority", "--stream-interval", "4"],
    ["-O0"],
    ["--compilation-config", '{"mode": 0}'],
    ["--compilation-config.cudagraph_mode", "NONE"],
    ["--kv-events-config", '{"enable_kv_cache_events": true, "publisher": "zmq", "topic": "kv"}'],
    ["--kv-transfer-config", '{"kv_connector": "ExampleConnector", "kv_role": "kv_both"}'],
    ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 3}'],
    ["--disable-log-stats", "--enable-log-requests"],
    ["--otlp-traces-endpoint", "grpc://127.0.0.1:4317", "--collect-detailed-traces", "all"],
    ["--log-level", "DEBUG"],
    ["--shutdown-timeout", "5", "--max-logprobs", "5", "--logprobs-mode", "processed_logprobs"],
    ["--enable-prompt-embeds", "--max-logprobs", "-1"],
    ["--limit-mm-per-prompt", '{"image": 0}', "--skip-mm-profiling"],
    ["--profiler-config", '{"profiler": "torch", "torch_profiler_dir": "/tmp/prof"}'],
    ["--trust-remote-code", "--revision", "main", "--load-format", "safetensors"],
    ["--tensor-parallel-size", "1", "--pipeline-parallel-size", "1", "--distributed-executor-backend", "mp"],
    ["--max-num-queued-reqs", "8", "--max-num-queued-tokens", "4096"],
    ["--cpu-offload-gb", "0", "--tokenizer-mode", "hf", "--data-parallel-size", "2"],
]

#: Fields (dotted paths) that differ between any two builds of one config, never because of a flag.
VOLATILE = {
    "instance_id",  # a random id per VllmConfig
    "kv_transfer_config.engine_id",  # a random id per KVTransferConfig unless given
    # with data parallel, free ports picked when the config is built
    "parallel_config.data_parallel_master_port",
    "parallel_config._data_parallel_master_port_list",
}


def _ids() -> list[str]:
    return [" ".join(argv)[:60] or "defaults" for argv in ARGVS]


@pytest.fixture(scope="module")
def model(tiny_model_dir: Path) -> str:
    return str(tiny_model_dir)


def _vllm_config(model: str, argv: list[str]) -> Any:
    """The engine config `vllm serve MODEL ARGV` builds (vllm/entrypoints/cli/serve.py, api_server)."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()  # type: ignore[no-untyped-call]
    args = make_arg_parser(parser).parse_args([model, *argv])
    args.model = args.model_tag
    return AsyncEngineArgs.from_cli_args(args).create_engine_config(UsageContext.OPENAI_API_SERVER)


def _our_config(model: str, argv: list[str]) -> Any:
    """The engine config `vllm-frontend serve --model MODEL ARGV` starts its engine with."""
    settings = serve_config(["--model", model, *argv]).engine_settings()
    assert settings is not None
    return settings.engine_config()


@pytest.mark.parametrize("argv", ARGVS, ids=_ids())
def test_the_engine_config_is_vllms(model: str, argv: list[str]) -> None:
    argv = [a.replace("{model}", model) for a in argv]
    theirs = _vllm_config(model, argv)
    ours = _our_config(model, argv)
    assert list(_differences(theirs, ours)) == []


def test_the_comparison_sees_a_flag_passed_differently(model: str) -> None:
    # The comparison itself: one flag's value changed on our side only is a difference it names.
    theirs = _vllm_config(model, ["--max-num-seqs", "7"])
    ours = _our_config(model, ["--max-num-seqs", "8"])
    assert [path for path, _, _ in _differences(theirs, ours)] == ["scheduler_config.max_num_seqs"]


def _differences(
    a: Any, b: Any, path: str = "", seen: set[int] | None = None
) -> Iterator[tuple[str, Any, Any]]:
    """Every leaf where `a` and `b` differ: (dotted path, a's value, b's value)."""
    seen = set() if seen is None else seen
    if id(a) in seen:
        return
    if type(a) is not type(b):
        yield path, a, b
        return
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        seen.add(id(a))
        for f in dataclasses.fields(a):
            where = f"{path}.{f.name}".lstrip(".")
            if where not in VOLATILE:
                yield from _differences(getattr(a, f.name), getattr(b, f.name), where, seen)
        return
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b), key=str):
            yield from _differences(a.get(key), b.get(key), f"{path}[{key!r}]", seen)
        return
    if isinstance(a, list | tuple) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            yield from _differences(x, y, f"{path}[{i}]", seen)
        return
    if isinstance(a, str | int | float | bool | enum.Enum | type(None) | list | tuple | set | frozenset):
        if a != b:
            yield path, a, b
        return
    if hasattr(a, "to_dict"):  # a transformers config
        if a.to_dict() != b.to_dict():
            yield path, a.to_dict(), b.to_dict()
        return
    if a != b and repr(a) != repr(b):  # other objects: equal, or at least equal in every visible part
        yield path, a, b


# ---- the parser: every vLLM engine flag, and no other source takes one ---------------------------------


def _vllm_engine_flags() -> set[str]:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())  # type: ignore[no-untyped-call]
    return {s for a in parser._actions for s in a.option_strings if a.dest != "help"}


def test_a_workers_help_lists_every_vllm_engine_flag(model: str) -> None:
    # As a user runs it: the process's --help, not the parser object.
    shown = subprocess.run(
        [sys.executable, "-m", "vllm_server.cli", "serve", "--model", model, "--help"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    flags = _vllm_engine_flags()
    assert len(flags) > 300
    missing = sorted(f for f in flags if f not in shown.split() and f"{f}," not in shown.split())
    missing = [f for f in missing if not any(w.startswith(f) for w in shown.split())]
    assert missing == []


def test_every_vllm_engine_flag_parses_as_vllms(model: str) -> None:
    ours = {s for a in _worker_parser_actions(model) for s in a}
    assert _vllm_engine_flags() <= ours


def _worker_parser_actions(model: str) -> list[list[str]]:
    from vllm_server.cli import serve_parser

    return [list(a.option_strings) for a in serve_parser(engine=True)._actions]


@pytest.mark.parametrize(
    ("source", "flag"),
    [
        (["--remote", "127.0.0.1:1"], ["--tensor-parallel-size", "2"]),
        (["--remote", "127.0.0.1:1"], ["--kv-transfer-config", '{"kv_connector": "NixlConnector"}']),
        (["--mock", "--tokenizer", "/t"], ["--gpu-memory-utilization", "0.5"]),
        (["--mock", "--tokenizer", "/t"], ["--dtype", "float32"]),
    ],
)
def test_a_router_and_the_mock_refuse_engine_flags(
    source: list[str], flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        parse_serve_args([*source, *flag])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"unrecognized arguments: {' '.join(flag)}" in err
    assert "vLLM's engine flags configure a worker's engine, with --model" in err


def test_a_router_never_imports_vllm_to_parse() -> None:
    # A router installs and runs without vLLM: its flags parse without importing it.
    code = (
        "import sys; from vllm_server.cli import serve_config; "
        "serve_config(['--remote', '127.0.0.1:1', '--served-model-name', 'tiny', "
        "'--reasoning-parser', 'qwen3']); "
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'torch'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code], capture_output=True, text=True, check=True
    ).stdout
    assert json.loads(out) == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--tokenizer-mode", "mistral"], "--tokenizer-mode 'mistral' is not supported by this frontend"),
        (["--skip-tokenizer-init"], "--skip-tokenizer-init True is not supported by this frontend"),
        (["--reasoning-parser-plugin", "/p.py"], "--reasoning-parser-plugin '/p.py' is not supported"),
        (["--runner", "pooling"], "--runner 'pooling' is not supported by this frontend"),
        (["--convert", "embed"], "--convert 'embed' is not supported by this frontend"),
        (["--watermark-config", '{"key": 7}'], "--watermark-config {'key': 7} is not supported by this"),
        (["--lora-modules", "a={model}"], "LoRA is not enabled. Use --enable-lora to enable LoRA."),
    ],
)
def test_engine_flags_whose_frontend_half_is_missing_are_refused(
    model: str, argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as stopped:
        serve_config(["--model", model, *argv])
    assert str(stopped.value).startswith("Error: ") and message in str(stopped.value)


def test_vllm_flag_spellings_reach_the_frontend_too(model: str) -> None:
    # What the frontend reads of vLLM's flags: the served names, the reasoning parser, log level.
    config = serve_config(
        [
            "--model",
            model,
            "--served_model_name",
            "a",
            "b",
            "--reasoning_parser",
            "qwen3",
            "--log-level",
            "DEBUG",
        ]
    )
    assert config.server.served_model_name == ("a", "b")
    assert config.server.parsers.reasoning_parser == "qwen3"
    assert config.server.log_level == "debug"


def test_parse_serve_args_takes_vllms_config_file(model: str, tmp_path: Path) -> None:
    config = tmp_path / "serve.yaml"
    config.write_text("max-num-seqs: 5\nreasoning-parser: qwen3\n")
    args = parse_serve_args(["--model", model, "--config", str(config)])
    assert isinstance(args, argparse.Namespace)
    assert (args.max_num_seqs, args.reasoning_parser) == (5, "qwen3")
