"""Benchmarks of the frontend, each figure beside its baseline: `vllm-frontend-bench` (see `cli`).

B1 `hop` (remote hop; server side `hop_worker`), B1r `slow_reader`, B2 `codec`, B3 `http_e2e` (HTTP end
to end vs vLLM's server; load from `loadgen`, figures in `http_figures`, servers started by
`vllm_frontend_testing.processes` and placed by `placement`), B4 `router`; `report` prints them and
keeps the results file, `stats` summarizes repeats. Never imported by the runtime.
"""
