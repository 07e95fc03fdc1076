"""Session-wide fixtures shared by every test package."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Generator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from tests.support.engine import TINY_MAX_MODEL_LEN, tiny_engine_settings
from tests.support.engine_recorder import EngineRecorder
from tests.support.mock import tiny_info as support_tiny_info
from tests.support.servers import RunningServer, start_server
from tests.support.vllm_oracle import VllmOracle
from vllm_llm.wire import LlmInfo

if TYPE_CHECKING:
    from vllm_llm.engine_core import EngineCoreLlm

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
# vLLM's stats line every 2 s instead of 10, from our workers and vLLM's servers (test_engine_stat_log.py)
os.environ.setdefault("VLLM_LOG_STATS_INTERVAL", "2")


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """The tiny Llama model with its locally trained tokenizer (built once, cached on disk)."""
    from vllm_frontend_testing.tiny_model import build_tiny_model

    return build_tiny_model()


@pytest.fixture(scope="session")
def vllm_oracle(tiny_model_dir: Path) -> Iterator[VllmOracle]:
    """vLLM's own `LLM.generate` on the tiny model, in a subprocess; started on first use, answers cached."""
    oracle = VllmOracle(tiny_model_dir, TINY_MAX_MODEL_LEN)
    yield oracle
    oracle.close()


@pytest.fixture(scope="session")
def engine_recorder(tmp_path_factory: pytest.TempPathFactory) -> EngineRecorder:
    """What the session engine core receives, recorded in its own process (installed before it starts)."""
    from tests.support.engine_recorder import install

    return install(tmp_path_factory.mktemp("engine") / "received.jsonl")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def worker(tiny_model_dir: Path, engine_recorder: EngineRecorder) -> AsyncIterator[RunningServer]:
    """The session's worker: the full server over the one engine core of the session (dev mode, LoRA,
    hermes tool calls)."""
    from vllm_llm import ParserOptions
    from vllm_server.config import EngineCoreConfig, ServerConfig
    from vllm_server.source import LlmSource

    config = ServerConfig(
        port=0,
        grpc_port=0,
        served_model_name=("tiny",),
        dev_mode=True,
        enable_runtime_lora=True,
        shutdown_grace_period=5,
        # as vLLM's server in tests/differential: tool calls parsed with hermes
        parsers=ParserOptions(enable_auto_tool_choice=True, tool_call_parser="hermes"),
    )
    engine = EngineCoreConfig(settings=tiny_engine_settings(tiny_model_dir, served_model_name=None))
    running = await start_server(config, LlmSource.engine_core(engine))
    yield running
    await running.stop()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def engine_llm(worker: RunningServer) -> EngineCoreLlm:
    """The session's one EngineCoreLlm over the tiny model (owned by the session worker)."""
    engine = worker.state.engine
    assert engine is not None
    return engine


@pytest.fixture(scope="session")
def generation_config(tiny_model_dir: Path) -> dict[str, Any]:
    """The tiny model's generation_config.json."""
    data: dict[str, Any] = json.loads((tiny_model_dir / "generation_config.json").read_text())
    return data


@pytest.fixture(scope="session")
def tiny_info(tiny_model_dir: Path) -> LlmInfo:
    """The LlmInfo an engine over the tiny model reports."""
    return support_tiny_info(tiny_model_dir)


def under_ci() -> bool:
    """Whether this run is CI's: `CI=true` (`.ci/run` exports it; most CI services set it too)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def _skipped_under_ci(report: pytest.TestReport | pytest.CollectReport, rootpath: Path) -> None:
    """Under CI, a skip (not an xfail) becomes a failure that names the reason and where it was raised.

    CI runs everything it collects: a test that needs a part it cannot find must fail, not pass quietly
    as a skip. A test meant to stay out of a run is left out by selection (as tests/soak is, by
    `--ignore` in pyproject's addopts), so it is never collected.
    """
    if not (report.skipped and under_ci()) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # (path, line, "Skipped: reason"), as pytest reports a skip
        path, line, reason = longrepr
        where = Path(path).relative_to(rootpath) if Path(path).is_relative_to(rootpath) else path
        why = f" at {where}:{line}: {reason.removeprefix('Skipped: ')}"
    else:
        why = f": {longrepr}"
    report.outcome = "failed"
    report.longrepr = (
        f"skipped under CI={os.environ.get('CI')}{why}\n"
        "(in CI a test runs, with what it needs present, or is left out by selection; it never skips)"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A test's setup, call or teardown that skipped fails under CI (`_skipped_under_ci`)."""
    report = yield
    _skipped_under_ci(report, item.config.rootpath)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """A module that skipped as it was collected (`allow_module_level`, `importorskip`) fails under CI."""
    report = yield
    _skipped_under_ci(report, collector.config.rootpath)
    return report
