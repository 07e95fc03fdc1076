"""The benchmark and the tiny model live outside the runtime: a server install runs without them."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

import pytest

from vllm_server.cli import main, serve_config


class _NotInstalled:
    """A meta path finder for which `package` does not exist."""

    def __init__(self, package: str) -> None:
        self.package = package

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname == self.package:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def test_the_server_cli_loads_neither_the_bench_nor_the_testing_package() -> None:
    code = "import sys, vllm_server.cli; print(sorted(m for m in sys.modules if m.startswith('vllm_front')))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == "[]"


def test_vllm_frontend_no_longer_offers_bench(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "--quick"])
    assert "invalid choice: 'bench'" in capsys.readouterr().err


def test_mock_without_tokenizer_serves_the_tiny_models(tiny_model_dir: Path) -> None:
    config = serve_config(["--mock"])
    assert config.server.tokenizer == str(tiny_model_dir)


def test_mock_without_tokenizer_or_testing_package_asks_for_one(monkeypatch: pytest.MonkeyPatch) -> None:
    # As in an install without vllm-frontend-testing: no finder finds it.
    for name in ("vllm_frontend_testing", "vllm_frontend_testing.tiny_model"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NotInstalled("vllm_frontend_testing"), *sys.meta_path])
    with pytest.raises(SystemExit, match="pass --tokenizer DIR"):
        serve_config(["--mock"])
    given = serve_config(["--mock", "--tokenizer", "/models/tok"])
    assert given.server.tokenizer == "/models/tok"
