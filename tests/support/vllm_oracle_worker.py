"""vLLM's own `LLM.generate` as a test oracle, in a subprocess speaking JSON lines.

`python tests/support/vllm_oracle_worker.py MODEL_DIR MAX_MODEL_LEN` prints `{"ready": true}` once the
engine is up; then each input line is a list of `{"prompt_token_ids": [...], "params": {SamplingParams
kwargs}}` and each output line the list of results: per choice the text, token ids, finish and stop
reasons, cumulative logprob and logprobs (each position as vLLM's dict, in order), plus the prompt logprobs.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _positions(entries: Any) -> list[Any] | None:
    if entries is None:
        return None
    return [
        None if pos is None else [[tid, lp.logprob, lp.rank, lp.decoded_token] for tid, lp in pos.items()]
        for pos in entries
    ]


def _result(r: Any) -> dict[str, Any]:
    return {
        "prompt_token_ids": list(r.prompt_token_ids or []),
        "prompt_logprobs": _positions(r.prompt_logprobs),
        "outputs": [
            {
                "index": c.index,
                "text": c.text,
                "token_ids": list(c.token_ids),
                "finish_reason": c.finish_reason,
                "stop_reason": c.stop_reason,
                "cumulative_logprob": c.cumulative_logprob,
                "logprobs": _positions(c.logprobs),
            }
            for c in r.outputs
        ],
    }


def _kwargs(params: dict[str, Any]) -> dict[str, Any]:
    # JSON object keys are strings; vLLM's SamplingParams wants logit_bias keyed by token id.
    if params.get("logit_bias") is not None:
        params = {**params, "logit_bias": {int(k): v for k, v in params["logit_bias"].items()}}
    return params


def main() -> None:
    """Serve generate jobs on stdin until it closes."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    # vLLM logs to stdout: keep the protocol on a private copy of it and send fd 1 to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    model, max_model_len = sys.argv[1], int(sys.argv[2])
    llm = LLM(
        model=model,
        dtype="float32",
        max_model_len=max_model_len,
        enforce_eager=True,
        seed=0,
        gpu_memory_utilization=0.5,
    )
    print(json.dumps({"ready": True}), file=out, flush=True)
    for line in sys.stdin:
        jobs = json.loads(line)
        prompts = [TokensPrompt(prompt_token_ids=job["prompt_token_ids"]) for job in jobs]
        params = [SamplingParams(**_kwargs(job["params"])) for job in jobs]
        outputs = llm.generate(prompts, params, use_tqdm=False)
        print(json.dumps([_result(r) for r in outputs]), file=out, flush=True)


if __name__ == "__main__":
    main()
