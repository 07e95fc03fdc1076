"""Route groups of the HTTP API; `vllm_server.app.build_app` wires them."""
