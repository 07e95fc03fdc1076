"""B2 codec: encode + decode of typical wire messages, our msgspec codec vs vLLM's engine-core codec.

Ours: `vllm_llm.wire.encode` / `decode` on a GenerateRequest and on GenerateOutputs (one token; one token
with 5 logprobs). Baseline: `vllm.v1.serial_utils.MsgpackEncoder` / `MsgpackDecoder` on the equivalent
EngineCoreRequest (a real `vllm.SamplingParams`) and EngineCoreOutputs holding one EngineCoreOutput
(logprobs as vLLM's numpy `LogprobsLists`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vllm_frontend_bench.report import BenchResult, Row, Target
from vllm_frontend_bench.stats import Summary
from vllm_llm.wire import GenerateOutput, GenerateRequest, LogprobRow, SamplingParams, decoder, encode

REQUEST_ID = "chatcmpl-3f1c2a9e8b7d4c6f9a0e1d2c3b4a5f6e"
PROMPT_LEN = 200
EOS = 2
TOKEN = 1234
TOP = [TOKEN, 17, 99, 512, 2048, 31000]
TOP_LOGPROBS = [-0.11, -0.11, -2.5, -3.1, -4.75, -6.0]


@dataclass(frozen=True, slots=True)
class _Case:
    name: str
    ours: Callable[[], Any]
    theirs: Callable[[], Any]
    nbytes_ours: int
    nbytes_theirs: int


def _our_request() -> GenerateRequest:
    return GenerateRequest(
        request_id=REQUEST_ID,
        prompt_token_ids=[(i * 7919) % 32000 for i in range(PROMPT_LEN)],
        sampling_params=SamplingParams(
            temperature=0.7,
            top_p=0.9,
            top_k=50,
            max_tokens=256,
            eos_token_id=EOS,
            all_stop_token_ids=[EOS],
        ),
        arrival_time=1_700_000_000.123,
    )


def _their_request() -> Any:
    import vllm
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine import EngineCoreRequest

    sp = vllm.SamplingParams(
        temperature=0.7,
        top_p=0.9,
        top_k=50,
        max_tokens=256,
        output_kind=RequestOutputKind.DELTA,
        detokenize=False,
    )
    sp._eos_token_id = EOS
    sp._all_stop_token_ids = {EOS}
    return EngineCoreRequest(
        request_id=REQUEST_ID + "-0a1b2c3d",
        prompt_token_ids=[(i * 7919) % 32000 for i in range(PROMPT_LEN)],
        mm_features=None,
        sampling_params=sp,
        pooling_params=None,
        arrival_time=1_700_000_000.123,
        lora_request=None,
        cache_salt=None,
        data_parallel_rank=None,
        external_req_id=REQUEST_ID,
    )


def _our_output(logprobs: bool) -> GenerateOutput:
    rows = [LogprobRow(token_ids=TOP, logprobs=TOP_LOGPROBS, rank=1)] if logprobs else None
    return GenerateOutput(request_id=REQUEST_ID, token_ids=[TOKEN], logprobs=rows)


def _their_output(logprobs: bool) -> Any:
    import numpy as np
    from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs
    from vllm.v1.outputs import LogprobsLists

    lists = None
    if logprobs:
        lists = LogprobsLists(
            np.array([TOP], dtype=np.int32),
            np.array([TOP_LOGPROBS], dtype=np.float32),
            np.array([1], dtype=np.int32),
        )
    return EngineCoreOutputs(
        outputs=[
            EngineCoreOutput(request_id=REQUEST_ID + "-0a1b2c3d", new_token_ids=[TOKEN], new_logprobs=lists)
        ]
    )


def _round_trip_ours(msg: Any) -> tuple[Callable[[], Any], int]:
    dec = decoder(type(msg))

    def run() -> Any:
        return dec.decode(encode(msg))

    return run, len(encode(msg))


def _round_trip_theirs(msg: Any) -> tuple[Callable[[], Any], int]:
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    enc = MsgpackEncoder()
    dec = MsgpackDecoder(type(msg))

    def run() -> Any:
        return dec.decode(enc.encode(msg))

    return run, sum(len(b) for b in enc.encode(msg))


def _cases() -> list[_Case]:
    pairs = [
        ("GenerateRequest (200-token prompt)", _our_request(), _their_request()),
        ("GenerateOutput, 1 token", _our_output(False), _their_output(False)),
        ("GenerateOutput, 1 token + 5 logprobs", _our_output(True), _their_output(True)),
    ]
    cases = []
    for name, ours, theirs in pairs:
        run_ours, n_ours = _round_trip_ours(ours)
        run_theirs, n_theirs = _round_trip_theirs(theirs)
        cases.append(_Case(name, run_ours, run_theirs, n_ours, n_theirs))
    return cases


def _time_us(fn: Callable[[], Any], iterations: int) -> float:
    """Mean µs per call over `iterations` calls."""
    start = time.perf_counter_ns()
    for _ in range(iterations):
        fn()
    return (time.perf_counter_ns() - start) / iterations / 1000


def _calibrate(fn: Callable[[], Any], seconds: float) -> int:
    """How many calls of `fn` take about `seconds`."""
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        took = time.perf_counter() - start
        if took > seconds / 10 or n >= 1 << 22:
            return max(1, int(n * seconds / max(took, 1e-9)))
        n *= 4


def run_codec(*, repeats: int = 5, seconds_per_repeat: float = 0.2) -> BenchResult:
    """Run B2: per message, encode + decode µs of ours vs vLLM's (interleaved repeats)."""
    result = BenchResult(
        key="B2",
        title="codec: encode + decode per message",
        ours_label="vllm_llm.wire encode/decode (msgspec, named maps)",
        baseline_label=(
            "vllm.v1.serial_utils MsgpackEncoder/MsgpackDecoder on EngineCoreRequest/EngineCoreOutputs"
        ),
    )
    for case in _cases():
        n_ours = _calibrate(case.ours, seconds_per_repeat)
        n_theirs = _calibrate(case.theirs, seconds_per_repeat)
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(repeats):  # interleaved, so drift hits both alike
            ours.append(_time_us(case.ours, n_ours))
            theirs.append(_time_us(case.theirs, n_theirs))
        result.rows.append(
            Row(f"{case.name} enc+dec", "us", Summary.of(ours), Summary.of(theirs), better="lower")
        )
        size = float(case.nbytes_ours), float(case.nbytes_theirs)
        result.rows.append(
            Row(f"{case.name} size", "B", Summary.of([size[0]]), Summary.of([size[1]]), better="lower")
        )
    timed = [r for r in result.rows if r.unit == "us"]
    worst = max(timed, key=lambda r: r.ratio)
    result.targets.append(
        Target(
            "B2 no slower than vLLM's codec",
            all(r.ratio <= 1.0 for r in timed),
            f"worst ratio {worst.ratio:.2f}x ({worst.name})",
        )
    )
    return result
