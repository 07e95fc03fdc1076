"""`python -m vllm_frontend_testing.conformance fetch|run|record|check`: see the package's docstring.

Left out of `MODULES` and `PENDING`, and why:
- `openai/chat_completion/test_serving_chat.py`, `test_chat_error.py`, `completion/test_completion_error.py`
  and the other modules that build vLLM's `OpenAIServingChat` in-process: they test vLLM's Python
  classes, not a server;
- `test_extra_content_fields.py`, `test_thinking_token_budget.py`, `test_openai_schema.py` and the
  vision modules: they need a particular model's tokenizer or processor, which cannot be downloaded here;
- `completion/test_tensorizer_entrypoint.py`, `completion/test_lora_resolvers.py`: they download weights
  or build adapters from a model's weights (the adapters other modules download are tiny ones here: see
  the plugin);
- `completion/test_completion_with_prompt_embeds.py` and
  `chat_completion/test_chat_completion_with_prompt_embeds.py`: the test process loads
  `facebook/opt-125m`'s config (and weights) from the Hub to compute the embeddings;
- `responses`, `anthropic`, `pooling`, `speech_to_text`, `cohere`, `rl`, `scale_out`: later steps
  (Responses and Anthropic tests need models with their parsers; pooling is Step 18).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from vllm_frontend_testing.conformance import MODULES, RECORD, VLLM_VERSION
from vllm_frontend_testing.tiny_model import build_tiny_model

#: Where the sdist's tests and their test-only packages are kept (outside the repository).
CACHE = Path(os.environ.get("VLLM_CONFORMANCE_CACHE", "~/.cache/vllm-frontend/conformance")).expanduser()
#: Packages vLLM's test suite imports that the project's environment does not have (vLLM's
#: requirements/test.txt pins more; these are the ones the chosen modules reach), pure-Python wheels.
TEST_PACKAGES = ("tblib==3.2.2",)
#: Beside the record: recorded tests that fail on ours for a reason written there (a test listed that
#: passes fails the check, so the list only shrinks).
KNOWN_NAME = "known-differences.txt"
_SDIST = f"vllm-{VLLM_VERSION}.tar.gz"


def _root() -> Path:
    return CACHE / f"vllm-{VLLM_VERSION}"


def _site() -> Path:
    return CACHE / "site"


def fetch() -> Path:
    """The sdist's root (its `tests/` extracted), downloading and installing what is missing."""
    root = _root()
    if not (root / "tests" / "utils.py").is_file():
        data = _pypi_file("vllm", _SDIST)
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=CACHE) as tmp:
            archive = Path(tmp) / _SDIST
            archive.write_bytes(data)
            prefix = f"vllm-{VLLM_VERSION}/tests/"
            with tarfile.open(archive) as tar:
                members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
                tar.extractall(tmp, members=members, filter="data")
            shutil.rmtree(root, ignore_errors=True)
            (Path(tmp) / f"vllm-{VLLM_VERSION}").rename(root)
    stamp = _site() / ".installed"
    if not stamp.is_file() or stamp.read_text() != "\n".join(TEST_PACKAGES):
        shutil.rmtree(_site(), ignore_errors=True)
        _site().mkdir(parents=True)
        for package in TEST_PACKAGES:
            _install_wheel(package)
        stamp.write_text("\n".join(TEST_PACKAGES))
    return root


def _pypi_file(project: str, filename: str) -> bytes:
    """`filename` of `project` from PyPI, checked against the index's sha256."""
    request = urllib.request.Request(
        f"https://pypi.org/simple/{project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        files = json.load(response)["files"]
    entry = next((f for f in files if f["filename"] == filename), None)
    if entry is None:
        raise SystemExit(f"conformance: {filename} is not on PyPI's index of {project}")
    print(f"conformance: downloading {entry['url']}", flush=True)
    with urllib.request.urlopen(entry["url"], timeout=600) as response:
        data: bytes = response.read()
    digest = hashlib.sha256(data).hexdigest()
    expected = entry["hashes"]["sha256"]
    if digest != expected:
        raise SystemExit(f"conformance: {filename}: sha256 {digest}, the index says {expected}")
    return data


def _install_wheel(requirement: str) -> None:
    """A pure-Python package (`NAME==VERSION`, whose wheel is py3-none-any) unpacked into `_site()`."""
    name, _, version = requirement.partition("==")
    data = _pypi_file(name, f"{name}-{version}-py3-none-any.whl")
    with zipfile.ZipFile(io.BytesIO(data)) as wheel:
        wheel.extractall(_site())


def run(
    server: str, tests: list[str], results: Path, logs: Path, pytest_args: list[str]
) -> dict[str, tuple[str, bool]]:
    """Run `tests` (node ids or paths under the sdist's root) against `server`: each test's outcome
    (`passed`, `failed` or `skipped`) and whether it reached a server (vLLM's modules also hold
    in-process tests of vLLM's own classes, which do not, and are not counted)."""
    root = fetch()
    env = dict(os.environ)
    paths = [str(root), str(_site()), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    env["VLLM_CONFORMANCE_SERVER"] = server
    env["VLLM_CONFORMANCE_MODEL"] = str(build_tiny_model())
    env["VLLM_CONFORMANCE_LOGS"] = str(logs.resolve())
    env["VLLM_CONFORMANCE_RESULTS"] = str(results.resolve())
    env["HF_HUB_OFFLINE"] = "1"
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    results.unlink(missing_ok=True)
    argv = [
        sys.executable, "-m", "pytest", "-p", "vllm_frontend_testing.conformance.plugin",
        "-p", "no:cacheprovider", "-q", "-rN", "--rootdir", str(root), *pytest_args, *tests,
    ]  # fmt: skip
    print(f"conformance: {server}: pytest over {len(tests)} modules or tests (logs in {logs})", flush=True)
    subprocess.run(argv, cwd=root, env=env, check=False)
    if not results.is_file():
        raise SystemExit("conformance: pytest wrote no results (it did not start; see above)")
    reports: dict[str, dict[str, object]] = json.loads(results.read_text())
    return {node: (str(report["outcome"]), bool(report["server"])) for node, report in reports.items()}


def _read_record(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line and not line.startswith("#")]


def _read_known(path: Path) -> dict[str, str]:
    """The known differences (`NODE_ID  # why`, beside the record), by node id."""
    if not path.is_file():
        return {}
    known: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            node, _, why = line.partition("#")
            known[node.strip()] = why.strip()
    return known


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_frontend_testing.conformance", description=__doc__)
    parser.add_argument("command", choices=("fetch", "run", "record", "check"))
    parser.add_argument("--server", choices=("ours", "vllm"), default="ours", help="for run")
    parser.add_argument("--record", type=Path, default=RECORD, help="the record of vLLM's passes")
    parser.add_argument("--work", type=Path, default=Path("conformance-results"), help="results and logs")
    parser.add_argument("tests", nargs="*", help="node ids or paths under the sdist's root (default: all)")
    argv = sys.argv[1:] if argv is None else argv
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_intermixed_args(argv[:split])
    pytest_args = argv[split + 1 :]  # after `--`: pytest's own options
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    if args.command == "fetch":
        print(fetch())
        return 0
    if args.command == "run":
        results = work / f"{args.server}.json"
        reports = run(args.server, args.tests or list(MODULES), results, work / "logs", pytest_args)
        served = [outcome for outcome, server in reports.values() if server]
        print(
            f"conformance: {args.server}: {served.count('passed')} of the {len(served)} tests that reached a "
            f"server passed ({len(reports) - len(served)} in-process tests not counted)"
        )
        return 0
    if args.command == "record":
        reports = run("vllm", args.tests or list(MODULES), work / "vllm.json", work / "logs", pytest_args)
        outcomes = {node: outcome for node, (outcome, server) in reports.items() if server}
        passes = {node for node, outcome in outcomes.items() if outcome == "passed"}
        print(f"conformance: vllm: {len(passes)} of the {len(outcomes)} tests that reached a server passed")
        if args.tests and args.record.is_file():  # the rest of the record stays as it is
            others = [node for node in _read_record(args.record) if not any(map(node.startswith, args.tests))]
            passes.update(others)
        header = (
            f"# vLLM {VLLM_VERSION}'s own server tests that pass on vLLM's server on this harness\n"
            "# (`python -m vllm_frontend_testing.conformance record [TESTS]`, docs/conformance.md).\n"
            "# `make conformance` fails when one of them does not pass on our worker.\n"
        )
        args.record.parent.mkdir(parents=True, exist_ok=True)
        args.record.write_text(header + "".join(f"{node}\n" for node in sorted(passes)))
        print(f"conformance: {len(passes)} tests recorded in {args.record}")
        return 0
    wanted = args.tests
    recorded = [node for node in _read_record(args.record) if not wanted or any(map(node.startswith, wanted))]
    known = _read_known(args.record.with_name(KNOWN_NAME))
    reports = run("ours", recorded, work / "ours.json", work / "logs", pytest_args)  # only the recorded
    outcomes = {node: outcome for node, (outcome, _) in reports.items()}
    failing = [node for node in recorded if outcomes.get(node) != "passed"]
    print(
        f"conformance: {len(recorded)} of vLLM's tests pass on vLLM's server on this harness; "
        f"{len(recorded) - len(failing)} of them pass on ours, {len(failing)} do not "
        f"({sum(node in known for node in failing)} of those are known differences)"
    )
    bad = 0
    for node in failing:
        if node in known:
            print(f"conformance: known difference: {node}: {known[node]}")
        else:
            bad += 1
            print(f"conformance: FAILED on ours (passes on vLLM's): {node}: {outcomes.get(node, 'not run')}")
    for node in sorted(set(known) & set(recorded) - set(failing)):
        bad += 1
        print(f"conformance: PASSES on ours but listed as a known difference (take it out): {node}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
