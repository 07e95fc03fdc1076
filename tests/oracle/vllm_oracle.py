"""vLLM's own `LLM.generate` as a test oracle, run in a subprocess (JSON lines on stdin/stdout).

Start: `python -m tests.oracle.vllm_oracle MODEL_DIR MAX_MODEL_LEN`; it prints `{"ready": true}` once the
engine is up. Each input line is `{"prompts": [[ids...], ...], "params": [{SamplingParams kwargs}, ...]}`;
each output line is a list of results, one per prompt, with every choice's token ids, text, finish and
stop reasons and logprobs (as vLLM's RequestOutput has them).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def _logprobs(entries: Any) -> Any:
    if entries is None:
        return None
    return [
        None
        if pos is None
        else {
            str(tid): {"logprob": lp.logprob, "rank": lp.rank, "decoded": lp.decoded_token}
            for tid, lp in pos.items()
        }
        for pos in entries
    ]


def main() -> None:
    # The protocol owns the original stdout; vLLM's own logging (which writes to stdout) goes to stderr.
    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    model, max_model_len = sys.argv[1], int(sys.argv[2])
    llm = LLM(model=model, dtype="float32", max_model_len=max_model_len, seed=0, enforce_eager=True)
    print(json.dumps({"ready": True}), file=proto, flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        prompts = [TokensPrompt(prompt_token_ids=p) for p in job["prompts"]]
        params = [SamplingParams(**p) for p in job["params"]]
        results = llm.generate(prompts, params, use_tqdm=False)
        out = [
            {
                "prompt_token_ids": list(r.prompt_token_ids or []),
                "prompt_logprobs": _logprobs(r.prompt_logprobs),
                "outputs": [
                    {
                        "index": c.index,
                        "text": c.text,
                        "token_ids": list(c.token_ids),
                        "finish_reason": c.finish_reason,
                        "stop_reason": c.stop_reason,
                        "cumulative_logprob": c.cumulative_logprob,
                        "logprobs": _logprobs(c.logprobs),
                    }
                    for c in r.outputs
                ],
            }
            for r in results
        ]
        print(json.dumps(out), file=proto, flush=True)


if __name__ == "__main__":
    main()
