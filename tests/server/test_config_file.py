"""`--config FILE` on a worker: the README's worker command written as a YAML file builds the same server.

A worker parses with vLLM's own `FlexibleArgumentParser`, which reads `--config` as `vllm serve` does: each
key a flag (dashes or underscores), a list for a flag of several values, `true` for a switch, and a flag
given on the command line wins over the file. The frontend's flags (`--port`, `--lora-modules`, the
parsers) come from the file as much as vLLM's engine flags. No engine starts: the configurations the CLI
builds are compared, which are what `Server` starts from.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_frontend_testing.tiny_model import build_tiny_lora
from vllm_server.cli import serve_config


@pytest.fixture(scope="module")
def sql(tiny_model_dir: Path) -> str:
    return str(build_tiny_lora(tiny_model_dir))


def _readme_worker(model: Path, sql: str) -> list[str]:
    """The README's second worker (`Serving`), with the parsers of its tool-call example."""
    return [
        *("--model", str(model), "--served-model-name", "tiny", "--enforce-eager", "--enable-lora"),
        *("--lora-modules", f"sql={sql}", "--grpc-port", "50052", "--port", "8002"),
        *("--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"),
    ]


def _yaml(tmp_path: Path, sql: str) -> Path:
    path = tmp_path / "worker.yaml"
    path.write_text(
        "served-model-name: tiny\n"
        "enforce_eager: true\n"  # vLLM takes either spelling
        "enable-lora: true\n"
        f"lora-modules:\n  - sql={sql}\n"
        "grpc-port: 50052\n"
        "port: 8002\n"
        "enable-auto-tool-choice: true\n"
        "tool-call-parser: hermes\n"
        "reasoning-parser: qwen3\n"
    )
    return path


def test_the_readme_worker_as_a_config_file_is_the_same_server(
    tiny_model_dir: Path, sql: str, tmp_path: Path
) -> None:
    given = serve_config(_readme_worker(tiny_model_dir, sql))
    from_file = serve_config(["--model", str(tiny_model_dir), "--config", str(_yaml(tmp_path, sql))])
    assert from_file == given
    assert from_file.flat() == given.flat()
    # what the file said did arrive (not two configurations equally missing it)
    assert from_file.server.port == 8002 and from_file.server.grpc_port == 50052
    assert from_file.server.parsers.reasoning_parser == "qwen3"
    assert from_file.engine_core is not None and from_file.engine_core.settings.enforce_eager is True
    assert [m.name for m in from_file.engine_core.lora_modules] == ["sql"]


def test_the_command_line_wins_over_the_file(tiny_model_dir: Path, sql: str, tmp_path: Path) -> None:
    config = serve_config(
        ["--model", str(tiny_model_dir), "--config", str(_yaml(tmp_path, sql)), "--port", "9000"]
    )
    assert config.server.port == 9000
    assert config.server.grpc_port == 50052
