"""A worker's engine flags take effect in its engine, as on vLLM's server started with the same argv.

`test_engine_flags.py` compares the engine config a worker builds with vLLM's, field by field, with no
engine. Here both run: one worker (`vllm-frontend serve --model`, the tiny model) and vLLM's own server,
started together with the same engine flags (`FLAGS`, each off vLLM's default), and every flag is read
back from the engine side of both, against a value this module writes from the argv (never one read
from our code). A flag the worker dropped or passed differently fails on the worker alone.

Where each flag shows:

- `--dtype`, `--enforce-eager`, `--seed`, `--max-model-len`, `--served-model-name`,
  `--no-enable-prefix-caching`: the engine core's config line (`Initializing a V1 LLM engine ...`);
- `--block-size`, `--num-gpu-blocks-override`: `vllm:cache_config_info`, the engine's KV cache size
  line, the worker's `LlmInfo`;
- `--enable-logging-iteration-details`: the engine's line per step (`Iteration(N): ...`), read below;
- `--max-num-batched-tokens`: a 300-token prompt prefilled in steps of 256 and 44 tokens;
- `--no-enable-prefix-caching`: a prompt sent twice is prefilled whole twice, no prefix cache hit;
- `--max-num-seqs`: of seven requests at once five run and two wait, no step runs more than five;
- `--scheduling-policy priority`: of the two waiting, the later one with the lower priority runs first;
- `--seed`: the engine's first unseeded draw is the draw of a request seeded with 7;
- `--generation-config vllm`, `--override-generation-config`: a request without sampling parameters
  samples as one with temperature 0.3 alone (not with the model's top_k and top_p);
- `--logprobs-mode processed_logprobs`: a token's logprob changes with the temperature;
- `--max-logprobs`: 3 logprobs answered, 4 refused;
- `--max-model-len`: `/v1/models`, `LlmInfo`; a 384-token prompt refused, a 300-token one given 84
  tokens at most;
- `--stream-interval`: streamed chunks of 1, 4, 4 and 4 tokens;
- `--served-model-name`: `/v1/models` lists both names, and the alias answers.

Both servers start once (the module's fixture), together, and serve the tests one after the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio

from tests.reliability.sse import Streamed, stream_completion
from tests.support.metrics import families, sample
from tests.support.timing import PATIENCE
from tests.support.vllm_server import START_DEADLINE, STOP_GRACE, vllm_argv
from vllm_frontend_testing.processes import Frontend, ServerProcess, free_port, start_server, until
from vllm_llm.wire import GenerationDefaults, ModelDtype
from vllm_remote_llm import RemoteLlm

MAX_MODEL_LEN = 384  # the tiny model has 512 positions
BLOCK_SIZE = 32  # vLLM's default on CPU: 128
KV_BLOCKS = 64  # what the KV cache's 1 GiB holds: 32768
MAX_NUM_SEQS = 5  # a server's default on CPU: 128
MAX_NUM_BATCHED_TOKENS = 256  # a server's default on CPU: 2048
SEED = 7  # vLLM's default: 0
MAX_LOGPROBS = 3  # vLLM's default: 20
STREAM_INTERVAL = 4  # vLLM's default: 1
TEMPERATURE = 0.3  # the one sampling default (`--generation-config vllm`: none of the model's)
NAMES = ("tiny", "alias")

#: The engine flags: the same argv for both servers.
FLAGS = (
    *("--dtype", "float32", "--enforce-eager", "--max-model-len", str(MAX_MODEL_LEN)),
    *("--block-size", str(BLOCK_SIZE), "--num-gpu-blocks-override", str(KV_BLOCKS)),
    *("--max-num-seqs", str(MAX_NUM_SEQS), "--max-num-batched-tokens", str(MAX_NUM_BATCHED_TOKENS)),
    *("--no-enable-prefix-caching", "--seed", str(SEED), "--scheduling-policy", "priority"),
    *("--generation-config", "vllm"),
    *("--override-generation-config", json.dumps({"temperature": TEMPERATURE})),
    *("--max-logprobs", str(MAX_LOGPROBS), "--logprobs-mode", "processed_logprobs"),
    *("--stream-interval", str(STREAM_INTERVAL), "--enable-logging-iteration-details"),
    *("--served-model-name", *NAMES),
)

#: Prompts of token ids (the tiny model's vocabulary has 1316), longer than a step's token budget.
LONG_PROMPT = list(range(10, 310))
OTHER_LONG_PROMPT = list(range(600, 900))
#: A sampled request whose draw depends on the sampler's random state (a hot temperature, no seed).
DRAW = {"model": "tiny", "prompt": "hello there", "max_tokens": 16, "temperature": 2.0, "ignore_eos": True}


@dataclass
class Served:
    """One of the two servers: its name in messages, its base URL, its whole output (a log file), and its
    engine's first unseeded draw (of `DRAW`, the first sampled request it served)."""

    name: str
    base_url: str
    log: Path
    first_draw: str = ""

    def log_size(self) -> int:
        """Bytes of output so far (where the output of what comes next begins)."""
        return self.log.stat().st_size

    def log_text(self, start: int = 0) -> str:
        """Its output from byte `start` on."""
        with self.log.open("rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace")


@dataclass
class Both:
    """The worker and vLLM's server, started with `FLAGS`."""

    worker: Frontend
    ours: Served
    theirs: Served

    @property
    def servers(self) -> tuple[Served, Served]:
        """The worker's, then vLLM's."""
        return self.ours, self.theirs


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def both(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Both]:
    """The worker and vLLM's server, started together; each has served `DRAW` first."""
    logs = tmp_path_factory.mktemp("engine_flags")
    port = free_port()
    worker, server = await asyncio.gather(
        _start_worker(tiny_model_dir, logs / "worker.log"),
        start_server(
            "vLLM's server",
            vllm_argv(tiny_model_dir, port, *FLAGS),
            http_port=port,
            ready_path="/health",
            log_path=logs / "vllm.log",
            within=START_DEADLINE,
        ),
        return_exceptions=True,
    )
    try:
        if isinstance(worker, BaseException):
            raise worker
        if isinstance(server, BaseException):
            raise server
        pair = Both(
            worker,
            Served("the worker", worker.base_url, logs / "worker.log"),
            Served("vLLM's server", server.base_url, logs / "vllm.log"),
        )
        for served in pair.servers:
            async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
                served.first_draw = (await _complete(http, DRAW))["choices"][0]["text"]
        yield pair
    finally:
        running = [p for p in (worker, server) if isinstance(p, ServerProcess)]
        await asyncio.gather(*(p.stop(STOP_GRACE) for p in running))


async def _start_worker(model: Path, log: Path) -> Frontend:
    worker = await Frontend.start(
        "--model", str(model), "--grpc-port", "0", *FLAGS, within=START_DEADLINE, log_path=log
    )
    await worker.wait_serving(START_DEADLINE)  # (which stops it if it does not serve)
    return worker


async def _complete(http: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    """A completion that must succeed."""
    response = await http.post("/v1/completions", json=body)
    assert response.status_code == 200, f"{http.base_url}: {response.text[:500]}"
    answer: dict[str, Any] = response.json()
    return answer


# ---- the engine's log, /metrics, /v1/models and LlmInfo -------------------------------------------


async def test_the_engine_logs_its_config_from_the_flags(both: Both) -> None:
    """The engine core's config line, the config's chunked-prefill line and the KV cache lines."""
    per_request = math.ceil(MAX_MODEL_LEN / BLOCK_SIZE)  # the blocks a request of max_model_len takes
    in_config_line = [
        "dtype=torch.float32,",
        f"max_seq_len={MAX_MODEL_LEN},",
        "enforce_eager=True,",
        f"seed={SEED},",
        f"served_model_name={NAMES[0]},",  # the engine's name: the first
        "enable_prefix_caching=False,",
    ]
    in_log = [
        f"Chunked prefill is enabled with max_num_batched_tokens={MAX_NUM_BATCHED_TOKENS}.",
        f"with num_gpu_blocks_override={KV_BLOCKS}",
        f"KV cache size: {KV_BLOCKS * BLOCK_SIZE:,} tokens, Maximum concurrency for {MAX_MODEL_LEN:,} "
        f"tokens per request: {KV_BLOCKS / per_request:.2f}x",
    ]
    for served in both.servers:
        log = served.log_text()
        config = next((line for line in log.splitlines() if "Initializing a V1 LLM engine" in line), "")
        assert config, f"{served.name} logged no engine config"
        missing = [f for f in in_config_line if f not in config] + [f for f in in_log if f not in log]
        assert not missing, f"{served.name}'s log lacks {missing}; its config line: {config}"


async def test_the_cache_config_info_metric_has_the_block_flags(both: Both) -> None:
    """`vllm:cache_config_info`: the engine's cache config in labels, the same on both."""
    expected = {
        "block_size": str(BLOCK_SIZE),
        "user_specified_block_size": "True",
        "num_gpu_blocks": str(KV_BLOCKS),
        "num_gpu_blocks_override": str(KV_BLOCKS),
        "kv_cache_size_tokens": str(KV_BLOCKS * BLOCK_SIZE),
        "enable_prefix_caching": "False",
    }
    labels = []
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            text = (await http.get("/metrics")).text
        [info] = families(text)["vllm:cache_config_info"].samples
        assert {k: info.labels.get(k) for k in expected} == expected, served.name
        labels.append(info.labels)
    assert labels[0] == labels[1]


async def test_the_models_are_listed_under_both_names_with_max_model_len(both: Both) -> None:
    """Both names listed and served (an answer names the model by the first), no other."""
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            models = (await http.get("/v1/models")).json()["data"]
            assert [(m["id"], m["max_model_len"]) for m in models] == [(n, MAX_MODEL_LEN) for n in NAMES]
            answer = await _complete(http, {"model": NAMES[1], "prompt": "hi", "max_tokens": 2})
            assert answer["model"] == NAMES[0], served.name
            other = await http.post("/v1/completions", json={"model": "other", "prompt": "hi"})
            assert other.status_code == 404, f"{served.name}: {other.text[:300]}"


async def test_the_workers_llm_info_reports_the_flags(both: Both) -> None:
    """The worker's `LlmInfo` (what a router over it adopts), over gRPC."""
    remote = await RemoteLlm.connect(both.worker.grpc_target, connect_timeout=PATIENCE)
    try:
        info = remote.info()
    finally:
        await remote.shutdown()
    got = (
        info.dtype, info.max_model_len, info.block_size, info.num_kv_blocks, info.max_num_seqs,
        info.max_num_batched_tokens, info.served_model_name, info.generation_defaults,
    )  # fmt: skip
    assert got == (
        ModelDtype.FLOAT32, MAX_MODEL_LEN, BLOCK_SIZE, KV_BLOCKS, MAX_NUM_SEQS,
        MAX_NUM_BATCHED_TOKENS, NAMES[0], GenerationDefaults(temperature=TEMPERATURE),
    )  # fmt: skip


# ---- what requests meet ----------------------------------------------------------------------------


async def test_max_model_len_bounds_the_prompt_and_the_output(both: Both) -> None:
    """A prompt of max_model_len tokens leaves no room: refused. A shorter one gets the room left."""
    full = {"model": "tiny", "prompt": [5] * MAX_MODEL_LEN}
    longer = {"model": "tiny", "prompt": LONG_PROMPT, "max_tokens": 200, "ignore_eos": True}
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            refused = await http.post("/v1/completions", json=full)
            assert refused.status_code == 400, f"{served.name}: {refused.text[:300]}"
            answer = await _complete(http, longer)
        assert answer["usage"]["completion_tokens"] == MAX_MODEL_LEN - len(LONG_PROMPT), served.name
        assert answer["choices"][0]["finish_reason"] == "length", served.name


async def test_max_logprobs_refuses_more_logprobs(both: Both) -> None:
    base = {"model": "tiny", "prompt": "hi", "max_tokens": 2}
    messages = [{"role": "user", "content": "hi"}]
    chat = {"model": "tiny", "messages": messages, "max_tokens": 2, "logprobs": True}
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            allowed = await _complete(http, base | {"logprobs": MAX_LOGPROBS})
            assert len(allowed["choices"][0]["logprobs"]["top_logprobs"][0]) >= MAX_LOGPROBS, served.name
            refused = [
                await http.post("/v1/completions", json=base | {"logprobs": MAX_LOGPROBS + 1}),
                await http.post("/v1/chat/completions", json=chat | {"top_logprobs": MAX_LOGPROBS + 1}),
            ]
        for response in refused:
            assert response.status_code == 400, f"{served.name}: {response.text[:300]}"
            assert f"max allowed: {MAX_LOGPROBS}" in response.json()["error"]["message"], served.name


async def test_the_seed_seeds_the_engines_sampler(both: Both) -> None:
    """The first request either engine sampled without a seed of its own (`DRAW`, sent by the fixture
    before anything else) drew from the engine's generator as seeded at start: the draw of a request
    seeded with `SEED`, not that of vLLM's default seed, 0."""
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            seeded = (await _complete(http, DRAW | {"seed": SEED}))["choices"][0]["text"]
            default = (await _complete(http, DRAW | {"seed": 0}))["choices"][0]["text"]
        assert seeded != default, "the draw does not depend on the seed: nothing to compare"
        assert served.first_draw == seeded, f"{served.name}: {served.first_draw!r}, seeded: {seeded!r}"
    assert both.ours.first_draw == both.theirs.first_draw


async def test_the_generation_config_flags_set_the_sampling_defaults(
    both: Both, tiny_model_dir: Path
) -> None:
    """No sampling parameters in the request: it samples as with the override's temperature alone, not
    also with the top_k and top_p of the model's generation_config.json (`--generation-config auto`
    would add them). Seeded, with processed logprobs, which show the temperature, top_k and top_p."""
    model_config = json.loads((tiny_model_dir / "generation_config.json").read_text())
    models = {"top_k": model_config["top_k"], "top_p": model_config["top_p"]}
    base = {"model": "tiny", "prompt": "hello there", "max_tokens": 4, "seed": 3, "logprobs": 1}
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            drawn = [
                _drawn(await _complete(http, base | params))
                for params in ({}, {"temperature": TEMPERATURE}, {"temperature": TEMPERATURE} | models)
            ]
        assert drawn[0] == drawn[1], served.name
        assert drawn[0][1] != drawn[2][1], f"{served.name}: the model's top_k and top_p change nothing here"


def _drawn(answer: dict[str, Any]) -> tuple[str, list[float]]:
    """A completion's text and its tokens' logprobs."""
    choice = answer["choices"][0]
    return choice["text"], choice["logprobs"]["token_logprobs"]


async def test_processed_logprobs_show_the_temperature(both: Both) -> None:
    """The first token's best logprob at two temperatures (raw logprobs: the same at any temperature)."""
    base = {"model": "tiny", "prompt": "hello there", "max_tokens": 1, "logprobs": 1, "seed": 3}
    for served in both.servers:
        best = []
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            for temperature in (TEMPERATURE, 1.0):
                answer = await _complete(http, base | {"temperature": temperature})
                best.append(max(answer["choices"][0]["logprobs"]["top_logprobs"][0].values()))
        assert best[0] > best[1], f"{served.name}: best logprob {best[0]} at {TEMPERATURE}, {best[1]} at 1"


async def test_stream_interval_groups_the_streamed_tokens(both: Both) -> None:
    """The first token alone, then `STREAM_INTERVAL` at a time (logprobs name each token of a chunk)."""
    body = {"model": "tiny", "prompt": "hi", "max_tokens": 1 + 3 * STREAM_INTERVAL, "ignore_eos": True}
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            streamed = await stream_completion(http, body | {"logprobs": 1})
        chunks = [c for frame in streamed.frames for c in frame["choices"] if c.get("logprobs")]
        sizes = [len(c["logprobs"]["tokens"]) for c in chunks]
        assert [n for n in sizes if n] == [1, STREAM_INTERVAL, STREAM_INTERVAL, STREAM_INTERVAL], served.name


# ---- the engine's steps (its iteration lines) ------------------------------------------------------

#: vLLM's line per engine step (`--enable-logging-iteration-details`).
ITERATION = re.compile(
    r"Iteration\(\d+\): (\d+) context requests, (\d+) context tokens, "
    r"(\d+) generation requests, (\d+) generation tokens"
)


@dataclass(frozen=True)
class Step:
    """One engine step, as the engine's iteration line reports it."""

    context_requests: int
    context_tokens: int
    generation_requests: int
    generation_tokens: int

    @property
    def requests(self) -> int:
        """The requests the step ran."""
        return self.context_requests + self.generation_requests


def steps(output: str) -> list[Step]:
    """The engine steps a server's output reports."""
    return [Step(*map(int, m.groups())) for m in ITERATION.finditer(output)]


async def _prefills(served: Served, http: httpx.AsyncClient, prompt: list[int], times: int) -> list[int]:
    """The prompt tokens of each engine step while `prompt` is sent `times` times, one after the other."""
    start = served.log_size()
    for _ in range(times):
        await _complete(http, {"model": "tiny", "prompt": prompt, "max_tokens": 1})

    async def logged() -> bool:  # (a step's line can follow its answer)
        return sum(s.context_tokens for s in steps(served.log_text(start))) >= times * len(prompt)

    with contextlib.suppress(AssertionError):  # the steps it did log say what went wrong
        await until(logged, within=PATIENCE, what=f"{served.name} logging the steps")
    return [s.context_tokens for s in steps(served.log_text(start)) if s.context_tokens]


async def test_max_num_batched_tokens_chunks_a_long_prefill(both: Both) -> None:
    """300 prompt tokens: a step of the budget, then the rest (a server's default takes them in one)."""
    prompt = OTHER_LONG_PROMPT  # (a prompt no other test sends: none of it can come from a cache)
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            chunks = await _prefills(served, http, prompt, 1)
        assert chunks == [MAX_NUM_BATCHED_TOKENS, len(prompt) - MAX_NUM_BATCHED_TOKENS], served.name


async def test_without_prefix_caching_a_repeated_prompt_is_computed_again(both: Both) -> None:
    """The same 100-token prompt twice: prefilled whole both times (with prefix caching the second one
    would compute only the 4 tokens after its 3 cached blocks), and no prefix cache hit."""
    prompt = list(range(400, 500))
    for served in both.servers:
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            chunks = await _prefills(served, http, prompt, 2)
            hits = sample((await http.get("/metrics")).text, "vllm:prefix_cache_hits_total")
        assert chunks == [len(prompt), len(prompt)], served.name
        assert hits == 0, served.name


#: Requests that fill the `MAX_NUM_SEQS` slots for a while (as long as max_model_len allows), the first
#: of them shortest; 57 of the 64 KV blocks at most, with B.
FILLERS = (250, 370, 370, 370, 370)


async def test_max_num_seqs_and_the_priority_policy_schedule_the_requests(both: Both) -> None:
    """Five long requests run; two more wait: A (priority 0), then B (priority -1). When the shortest of
    the five ends, B takes its place (priority first; first come, first served would take A), and A
    waits for the next. No step runs more than five requests."""
    for served in both.servers:
        start = served.log_size()
        async with httpx.AsyncClient(base_url=served.base_url, timeout=PATIENCE) as http:
            queue, done = await _schedule(http, served.name)
        assert all(s.status == 200 and s.finish_reasons == ["length"] for s in done), served.name
        assert queue.finished == ["B", "A"], served.name
        assert max(run for run, _ in queue.gauges) == MAX_NUM_SEQS, f"{served.name}: {queue.gauges}"
        most = max((s.requests for s in steps(served.log_text(start))), default=0)
        assert most == MAX_NUM_SEQS, f"{served.name} ran {most} requests in one step"


async def _schedule(http: httpx.AsyncClient, name: str) -> tuple[Queue, list[Streamed]]:
    """The fillers, then A, then B, each sent once the one before runs or waits; all of them, finished."""
    queue = Queue()
    fillers = [Streamed() for _ in FILLERS]
    tasks = [
        asyncio.create_task(stream_completion(http, _exactly(f"filler {i}", n), s))
        for i, (n, s) in enumerate(zip(FILLERS, fillers, strict=True))
    ]
    try:
        await asyncio.wait_for(asyncio.gather(*(s.first.wait() for s in fillers)), PATIENCE)
        tasks.insert(0, asyncio.create_task(queue.late(http, "A", 0)))
        await until(lambda: queue.waiting(http, 1), within=PATIENCE, what=f"{name} queueing A")
        tasks.insert(1, asyncio.create_task(queue.late(http, "B", -1)))
        await until(lambda: queue.waiting(http, 2), within=PATIENCE, what=f"{name} queueing B")
        return queue, await asyncio.wait_for(asyncio.gather(*tasks), PATIENCE)
    finally:
        for task in tasks:
            task.cancel()  # (on the way out of a failure: no stream left running)
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class Queue:
    """What the scheduling test saw of one server: its gauges (running, waiting) at each look, and the
    late requests in the order they finished."""

    gauges: list[tuple[float, float]] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)

    async def waiting(self, http: httpx.AsyncClient, count: int) -> bool:
        """Whether `count` requests wait now."""
        text = (await http.get("/metrics")).text
        running, waiting = (sample(text, f"vllm:num_requests_{gauge}") for gauge in ("running", "waiting"))
        self.gauges.append((running, waiting))
        return waiting == count

    async def late(self, http: httpx.AsyncClient, name: str, priority: int) -> Streamed:
        """A short request with `priority`, noted when it finishes."""
        streamed = await stream_completion(http, _exactly(name, 8) | {"priority": priority})
        self.finished.append(name)
        return streamed


def _exactly(prompt: str, tokens: int) -> dict[str, Any]:
    """A completion of exactly `tokens` tokens."""
    return {"model": "tiny", "prompt": prompt, "max_tokens": tokens, "ignore_eos": True}
