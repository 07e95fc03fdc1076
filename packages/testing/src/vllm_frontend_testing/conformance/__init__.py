"""vLLM's own server tests, run unchanged against our worker and against vLLM's server (`make conformance`).

vLLM 0.32.0's source distribution carries its test suite; its server tests reach a server only through
`tests.utils.RemoteOpenAIServer(model, args)`. `python -m vllm_frontend_testing.conformance`:

- `fetch` downloads the sdist from PyPI (checked against the index's sha256), keeps its `tests/` in a
  cache outside the repository, and installs the few test-only packages those tests import into a
  directory of their own there (never into the project's environment);
- `run --server ours|vllm` runs the chosen modules (`MODULES`) with the plugin
  `vllm_frontend_testing.conformance.plugin`, which replaces `RemoteOpenAIServer` by one that starts
  `vllm-frontend serve` (ours) or vLLM's own server with the module's own arguments on the tiny model;
- `record` runs them against vLLM's server and writes the ids of the tests that pass there to
  `RECORD` (in the repository: what vLLM's server passes on this harness);
- `check` (what `make conformance` runs) runs the recorded tests against our worker and fails when one
  of them does not pass.

The same harness serves both servers, so a test that cannot run here (a model it downloads, a GPU it
needs) fails on both and is not in the record. The harness adapts the environment equally for both: the
tiny model is served under the name the test asks for, `HF_HUB_OFFLINE=1` (nothing can be downloaded),
`VLLM_ALLOW_LONG_MAX_MODEL_LEN=1` (tests ask for longer contexts than the tiny model's 512 positions), and
`--enforce-eager --dtype float32` unless the test names them.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["MODULES", "PENDING", "RECORD", "VLLM_VERSION"]

#: The vLLM release whose tests are run (the version of the engine this project serves).
VLLM_VERSION = "0.32.0"

#: The repository's record of the tests vLLM's own server passes on this harness, one node id a line.
RECORD = Path(__file__).resolve().parents[5] / "tests" / "conformance" / f"vllm-{VLLM_VERSION}-passes.txt"

#: The modules recorded and run (`record` with no TESTS runs them all against vLLM's server: over an hour of
#: vLLM server starts on a 2-core machine; `record TESTS...` refreshes a part of the record).
MODULES: tuple[str, ...] = (
    "tests/entrypoints/openai/completion/test_completion.py",
    "tests/entrypoints/openai/completion/test_prompt_validation.py",
    "tests/entrypoints/openai/completion/test_token_in_token_out.py",
    "tests/entrypoints/openai/test_return_token_ids.py",
    "tests/entrypoints/openai/test_return_tokens_as_ids.py",
    "tests/entrypoints/openai/test_chunked_prompt.py",
    "tests/entrypoints/openai/models/test_models.py",
    "tests/entrypoints/openai/chat_completion/test_chat.py",
    "tests/entrypoints/openai/chat_completion/test_chat_completion.py",
    "tests/entrypoints/openai/chat_completion/test_batched_chat_completions.py",
    "tests/entrypoints/openai/chat_completion/test_chat_logit_bias_validation.py",
    "tests/entrypoints/openai/chat_completion/test_logprob_token_ids.py",
    "tests/entrypoints/openai/chat_completion/test_chat_echo.py",
    "tests/entrypoints/openai/chat_completion/test_enable_force_include_usage.py",
    "tests/entrypoints/openai/chat_completion/test_completion_with_function_calling.py",
    "tests/entrypoints/openai/chat_completion/test_include_reasoning.py",
    "tests/entrypoints/openai/chat_completion/test_root_path.py",
    "tests/entrypoints/serve/tokenize/test_tokenization.py",
    "tests/entrypoints/serve/instrumentator/test_basic.py",
    "tests/entrypoints/serve/instrumentator/test_metrics.py",
    "tests/entrypoints/serve/instrumentator/test_orca_metrics.py",
    "tests/entrypoints/serve/instrumentator/test_uds.py",
    "tests/entrypoints/serve/lora",
    "tests/entrypoints/serve/sagemaker",
    "tests/entrypoints/serve/exception_handling",
    "tests/entrypoints/serve/middleware",
)

#: Chosen, not recorded yet (`record` with these as TESTS adds them to the record).
PENDING: tuple[str, ...] = ()
