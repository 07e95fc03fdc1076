"""Requests whose logits held a NaN, counted as vLLM's server counts them under
``VLLM_COMPUTE_NANS_IN_LOGITS=1``: the counter ``vllm:corrupted_requests`` on /metrics, and the
"Corrupted: N reqs" part of the stats line as vLLM's server prints it.

The engine counts NaNs in each request's logits at every step; the frontend marks a request corrupted
when a step reports one and counts it once, when it finishes (vllm/v1/metrics/stats.py). The model here
is the tiny model with one row of its output layer NaN (`build_tiny_nan_model`), so every step of every
request holds one NaN and greedy decoding picks that token. vLLM's own server, started with the same
environment, serves the same requests beside our worker: the oracle.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from tests.support.metrics import families, sample
from tests.support.stat_log import ServerLines, template
from tests.support.vllm_server import vllm_server, worker_process
from vllm_frontend_testing.processes import Frontend, ServerProcess
from vllm_frontend_testing.tiny_model import NAN_TOKEN_ID, build_tiny_nan_model

pytestmark = pytest.mark.asyncio(loop_scope="session")

#: Both servers' environment: the session's (a stats line every 2 s) with NaNs counted.
ENV = {**os.environ, "VLLM_COMPUTE_NANS_IN_LOGITS": "1"}
REQUESTS = 3
MAX_TOKENS = 4
CORRUPTED = re.compile(r"Corrupted: (\d+) reqs")
GENERATION = re.compile(r"Avg generation throughput: (\d+\.\d) tokens/s")
COUNTER = "vllm:corrupted_requests_total"


@pytest.fixture(scope="module")
def nan_model_dir(tiny_model_dir: Path) -> Path:
    return build_tiny_nan_model(tiny_model_dir)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def nan_worker(nan_model_dir: Path) -> AsyncIterator[Frontend]:
    """Our worker over the NaN model, NaNs counted (its own process: the flag is read at start)."""
    async with worker_process(
        "--model", str(nan_model_dir), "--dtype", "float32", "--max-model-len", "512",
        "--served-model-name", "tiny", "--grpc-port", "-1", env=ENV,
    ) as front:  # fmt: skip
        yield front


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def nan_vllm(
    nan_worker: Frontend, nan_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServerProcess]:
    """vLLM's server over the same model and environment, started once our worker is up."""
    async with vllm_server(
        nan_model_dir,
        *("--dtype", "float32", "--max-model-len", "512", "--enforce-eager"),
        log_dir=tmp_path_factory.mktemp("nan_vllm"),
        env=ENV,
    ) as server:
        yield server


async def _serve(base_url: str) -> tuple[str, list[list[int]]]:
    """/metrics after `REQUESTS` greedy completions, and each completion's token ids."""
    tokens = []
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as http:
        for i in range(REQUESTS):
            response = await http.post(
                "/v1/completions",
                json={
                    "model": "tiny",
                    "prompt": f"a corrupted request {i}",
                    "max_tokens": MAX_TOKENS,
                    "temperature": 0,
                    "ignore_eos": True,
                    "return_token_ids": True,
                },
            )
            assert response.status_code == 200, response.text
            tokens.append(response.json()["choices"][0]["token_ids"])
        return (await http.get("/metrics")).text, tokens


def _busy_with_corrupted(line: str) -> bool:
    """A line covering generated tokens, with the corrupted part."""
    match = GENERATION.search(line)
    return match is not None and float(match[1]) > 0 and CORRUPTED.search(line) is not None


async def test_requests_with_nan_logits_are_counted_as_vllms_server_counts_them(
    nan_worker: Frontend, nan_vllm: ServerProcess
) -> None:
    ours_printed, theirs_printed = ServerLines(nan_worker), ServerLines(nan_vllm)
    theirs_text, theirs_tokens = await _serve(nan_vllm.base_url)
    ours_text, ours_tokens = await _serve(nan_worker.base_url)
    # The same model: greedy decoding picks the NaN row's token at every step on both.
    assert ours_tokens == theirs_tokens == [[NAN_TOKEN_ID] * MAX_TOKENS] * REQUESTS
    labels = {"model_name": "tiny", "engine": "0"}
    assert sample(theirs_text, COUNTER, **labels) == REQUESTS
    assert sample(ours_text, COUNTER, **labels) == REQUESTS
    ours_family, theirs_family = (families(t)["vllm:corrupted_requests"] for t in (ours_text, theirs_text))
    assert ours_family.type == theirs_family.type == "counter"
    assert ours_family.documentation == theirs_family.documentation
    # The stats line has the part too, as vLLM's: "..., Corrupted: N reqs". vLLM 0.32's LoggingStatLogger
    # resets the interval's count before it formats the line (`_update_stats` calls `_reset` first), so
    # its N reads 0 even here; ours is vLLM's logger, fed the same figures: the same line.
    ours_line = await ours_printed.wait(_busy_with_corrupted)
    theirs_line = await theirs_printed.wait(_busy_with_corrupted)
    assert CORRUPTED.findall(ours_line) == CORRUPTED.findall(theirs_line), (ours_line, theirs_line)
    assert template(ours_line) == template(theirs_line)
