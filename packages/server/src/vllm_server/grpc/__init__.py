"""The gRPC side of the server: the listener, health, and the servicers of `vllm.internal.Llm`,
`vllm.Inference` and `vllm.Control` with their protobuf conversions (`proto/` is generated)."""
