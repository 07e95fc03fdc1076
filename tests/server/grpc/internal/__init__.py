"""Tests of the gRPC frontend: the vllm.internal.Llm servicer, health, TLS and API keys."""
