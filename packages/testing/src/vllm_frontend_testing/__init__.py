"""Test support for the frontend, never imported by the runtime.

`tiny_model` builds a tiny random-weight Llama with its own tokenizer (what `make serve`, the tests and
the benchmarks serve); `processes` starts, signals, stops and restarts server processes.
"""
