"""The soak tests run only under `make soak` (VLLM_SOAK=1): `make test` collects nothing here."""

from __future__ import annotations

import os

collect_ignore_glob = [] if os.environ.get("VLLM_SOAK") == "1" else ["test_*.py"]
