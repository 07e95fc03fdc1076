"""The soak tests (minutes, a real vLLM engine) run only when named: `make soak` (`pytest tests/soak`).

Every other run leaves them out by selection, not by skipping: pyproject's pytest `addopts` has
`--ignore=tests/soak`, which pytest applies to what it finds under the paths it was given, never to a
path named on its command line. So `.venv/bin/pytest` and `make test` do not collect them, and
`.venv/bin/pytest tests/soak` (or one of its files or tests) runs them, no environment variable needed.
"""
