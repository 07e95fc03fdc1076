"""Route groups of the HTTP API; `vllm_server.http.app.build_app` wires them."""
