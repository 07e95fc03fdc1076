"""`python -m vllm_frontend_testing.tiny_model`: one model per invocation, its directory alone on stdout (the
README and `make serve` take it whole with `$(...)`)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from vllm_frontend_testing.tiny_model import build_tiny_llava, build_tiny_lora, build_tiny_model, main


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], build_tiny_model),
        (["--llava"], build_tiny_llava),
        (["--lora"], lambda: build_tiny_lora(build_tiny_model())),
    ],
    ids=["llama", "llava", "lora"],
)
def test_each_flag_prints_one_directory(
    flags: list[str], expected: Callable[[], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    main(flags)
    out = capsys.readouterr().out
    assert out == f"{expected()}\n" and Path(out.strip()).is_dir()


def test_the_command_prints_the_directory_alone_and_refuses_two_models() -> None:
    command = [sys.executable, "-m", "vllm_frontend_testing.tiny_model"]
    built = subprocess.run(command, capture_output=True, text=True, check=True)
    assert built.stdout == f"{build_tiny_model()}\n"
    both = subprocess.run([*command, "--llava", "--lora"], capture_output=True, text=True, check=False)
    assert both.returncode == 2 and both.stdout == "" and "not allowed with" in both.stderr
    usage = subprocess.run([*command, "--help"], capture_output=True, text=True, check=True)
    assert "--llava" in usage.stdout and "--lora" in usage.stdout
