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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

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


#: Beside the record: the server group of each recorded test, and how long it took (`plan` writes it).
SERVERS_NAME = f"vllm-{VLLM_VERSION}-servers.txt"
#: What a test costs when no run measured it, in seconds, and a server's start beside it.
_TEST_SECONDS = 5.0
_START_SECONDS = 45.0


def _pytest(
    server: str, tests: list[str], results: Path, logs: Path, pytest_args: list[str], **popen: Any
) -> subprocess.Popen[bytes]:
    """pytest over `tests` (node ids or paths under the sdist's root) against `server`, started."""
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
    env.update(popen.pop("env", {}))
    results.unlink(missing_ok=True)
    argv = [
        sys.executable, "-m", "pytest", "-p", "vllm_frontend_testing.conformance.plugin",
        "-p", "no:cacheprovider", "-q", "-rN", "--rootdir", str(root), *pytest_args, *tests,
    ]  # fmt: skip
    return subprocess.Popen(argv, cwd=root, env=env, **popen)


def _reports(results: Path) -> dict[str, dict[str, Any]]:
    if not results.is_file():
        raise SystemExit(f"conformance: pytest wrote no results to {results} (it did not start; see above)")
    reports: dict[str, dict[str, Any]] = json.loads(results.read_text())
    return reports


def plan(tests: list[str], work: Path, pytest_args: list[str]) -> dict[str, list[tuple[str, ...]]]:
    """The servers (model and arguments) each test asks for: its fixtures set up, no server started and
    no test body run (the plugin's plan run)."""
    results = work / "plan.json"
    _pytest("plan", tests, results, work / "logs", pytest_args, stdout=subprocess.DEVNULL).wait()
    return {
        node: [tuple(key) for key in report.get("servers", [])] for node, report in _reports(results).items()
    }


def groups_of(servers: Mapping[str, Sequence[tuple[str, ...]]]) -> dict[str, str]:
    """Each test's server group (`s1`, `s2`, ... by the first test asking for its first server; `-` for a
    test that asks for none)."""
    numbers: dict[tuple[str, ...], int] = {}
    groups: dict[str, str] = {}
    for node, keys in servers.items():
        if keys:
            groups[node] = f"s{numbers.setdefault(keys[0], len(numbers) + 1)}"
        else:
            groups[node] = "-"
    return groups


def read_servers(path: Path) -> tuple[dict[str, str], dict[str, float]]:
    """The server group of each test and how long it took (`GROUP SECONDS NODE` a line), from `path`."""
    groups: dict[str, str] = {}
    seconds: dict[str, float] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line and not line.startswith("#"):
                group, took, node = line.split(maxsplit=2)
                groups[node] = group
                seconds[node] = float(took)
    return groups, seconds


def share(
    tests: list[str], groups: Mapping[str, str], seconds: Mapping[str, float], jobs: int
) -> list[list[str]]:
    """`tests` (node ids) in at most `jobs` shares that take about as long, the tests of one server group
    in one share, one after the other (so that its server starts once), in the order they came in. A
    group's cost is what its tests took (the first one's set-up starts the server), or an estimate for
    tests not measured; the tests that ask for no server (group `-`) go with the first share."""
    members: dict[str, list[str]] = {}
    for node in tests:
        members.setdefault(groups.get(node, "-"), []).append(node)

    def cost(nodes: list[str]) -> float:
        measured = [seconds[node] for node in nodes if seconds.get(node, 0.0) > 0]  # 0: not measured
        guessed = (len(nodes) - len(measured)) * _TEST_SECONDS
        return sum(measured) + guessed + (0.0 if measured else _START_SECONDS)

    shares: list[list[str]] = [[] for _ in range(jobs)]
    loads = [0.0] * jobs
    if "-" in members:
        shares[0] += members["-"]
        loads[0] += cost(members["-"])
    for group, nodes in sorted(members.items(), key=lambda item: -cost(item[1])):  # the longest first
        if group != "-":
            least = loads.index(min(loads))
            shares[least] += nodes
            loads[least] += cost(nodes)
    first = {node: i for i, node in enumerate(tests)}
    group_at = {group: min(first[node] for node in nodes) for group, nodes in members.items()}
    order = {node: (group_at[groups.get(node, "-")], first[node]) for node in tests}
    return [sorted(nodes, key=order.__getitem__) for nodes in shares if nodes]


def _under(test: str, groups: Mapping[str, str]) -> list[str]:
    """The planned node ids under `test` (a module or a directory), in their order."""
    return [node for node in groups if node == test or node.startswith((test + "::", test.rstrip("/") + "/"))]


def run(
    server: str,
    tests: list[str],
    work: Path,
    pytest_args: list[str],
    jobs: int = 1,
    servers_file: Path | None = None,
) -> dict[str, tuple[str, bool]]:
    """Run `tests` (node ids or paths under the sdist's root) against `server`: each test's outcome
    (`passed`, `failed` or `skipped`) and whether it reached a server (vLLM's modules also hold
    in-process tests of vLLM's own classes, which do not, and are not counted).

    With `jobs` > 1, `jobs` pytest processes run a share each (`share`), side by side, by the server
    groups of `servers_file` (a plan run finds those of the tests it does not name); each job's engines
    run on a CPU of their own (`VLLM_CPU_OMP_THREADS_BIND`, unless it is set); job `i`'s output is in
    `logs/job-i.log`."""
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    results = work / f"{server}.json"
    if jobs <= 1:
        print(
            f"conformance: {server}: pytest over {len(tests)} modules or tests (logs in {logs})", flush=True
        )
        _pytest(server, tests, results, logs, pytest_args).wait()
        reports = _reports(results)
    else:
        servers_file = servers_file or RECORD.with_name(SERVERS_NAME)
        groups, seconds = read_servers(servers_file)
        unknown = [test for test in tests if test not in groups]  # a module, or a test not planned yet
        if unknown:
            print(f"conformance: planning {len(unknown)} tests or modules not in {servers_file}", flush=True)
            planned = groups_of(plan(unknown, work, pytest_args))
            groups.update({node: f"new-{group}" if group != "-" else "-" for node, group in planned.items()})
        nodes_run = [node for test in tests for node in ([test] if test in groups else _under(test, groups))]
        shares = share(nodes_run, groups, seconds, jobs)
        cpus = sorted(os.sched_getaffinity(0))
        procs: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
        for i, nodes in enumerate(shares):
            log = logs / f"job-{i}.log"
            starts = len({groups[node] for node in nodes} - {"-"})
            print(
                f"conformance: {server}: job {i}: {len(nodes)} tests on {starts} servers (output in {log})",
                flush=True,
            )
            # A job runs each server's tests one after the other: a released server is kept only until
            # another is asked for (the next module of its group may ask for it again).
            env = {
                "VLLM_CONFORMANCE_JOB": str(i),
                "VLLM_CONFORMANCE_IDLE": os.environ.get("VLLM_CONFORMANCE_IDLE", "1"),
            }
            if "VLLM_CPU_OMP_THREADS_BIND" not in os.environ:
                env["VLLM_CPU_OMP_THREADS_BIND"] = str(cpus[i % len(cpus)])
            job_results = work / f"{server}-job-{i}.json"
            with log.open("wb") as out:
                proc = _pytest(
                    server,
                    nodes,
                    job_results,
                    logs,
                    pytest_args,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            procs.append((proc, job_results, log))
        reports = {}
        for i, (proc, job_results, log) in enumerate(procs):
            code = proc.wait()
            tail = log.read_text(errors="replace").splitlines()[-3:]
            print(f"conformance: {server}: job {i} ended ({code}): " + " / ".join(tail), flush=True)
            reports.update(_reports(job_results))
        results.write_text(json.dumps(reports, indent=1, sort_keys=True) + "\n")
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


def _write_plan(record: Path, work: Path, pytest_args: list[str]) -> int:
    """Write the server group of every recorded test beside the record, with how long it took in the last
    check in `work` (`ours.json`), if there was one."""
    nodes = _read_record(record)
    groups = groups_of(plan(nodes, work, pytest_args))
    last = work / "ours.json"
    took = (
        {node: float(r.get("seconds", 0.0)) for node, r in _reports(last).items()} if last.is_file() else {}
    )
    missing = [node for node in nodes if node not in groups]
    if missing:
        raise SystemExit(
            f"conformance: the plan run did not reach {len(missing)} recorded tests: {missing[:5]}"
        )
    path = record.with_name(SERVERS_NAME)
    header = (
        f"# The server group of each test of {record.name} (tests asking for the same model and arguments\n"
        "# share one) and the seconds it took in a check, its server's start in the first test's: what\n"
        "# `check --jobs N` shares the tests out by. `python -m vllm_frontend_testing.conformance plan`\n"
        "# writes it (after a `check --with-known` in the same --work, for the seconds). GROUP SECONDS NODE\n"
    )
    lines = [f"{groups[node]} {took.get(node, 0.0):.1f} {node}\n" for node in nodes]
    path.write_text(header + "".join(lines))
    print(f"conformance: {len(nodes)} tests in {len(set(groups.values()) - {'-'})} server groups, in {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vllm_frontend_testing.conformance", description=__doc__)
    parser.add_argument("command", choices=("fetch", "run", "record", "check", "plan"))
    parser.add_argument("--server", choices=("ours", "vllm"), default="ours", help="for run")
    parser.add_argument("--record", type=Path, default=RECORD, help="the record of vLLM's passes")
    parser.add_argument("--work", type=Path, default=Path("conformance-results"), help="results and logs")
    parser.add_argument(
        "--jobs", type=int, default=1, help="pytest processes side by side, each with a share of the servers"
    )
    parser.add_argument(
        "--with-known",
        action="store_true",
        help="for check: run the known differences too (a known difference that passes then fails the check)",
    )
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
        reports = run(args.server, args.tests or list(MODULES), work, pytest_args, args.jobs)
        served = [outcome for outcome, server in reports.values() if server]
        print(
            f"conformance: {args.server}: {served.count('passed')} of the {len(served)} tests that reached a "
            f"server passed ({len(reports) - len(served)} in-process tests not counted)"
        )
        return 0
    if args.command == "plan":
        return _write_plan(args.record, work, pytest_args)
    if args.command == "record":
        reports = run("vllm", args.tests or list(MODULES), work, pytest_args, args.jobs)
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
    if not args.with_known:
        skipped = len(set(known) & set(recorded))
        print(f"conformance: {skipped} known differences not run (--with-known runs them)")
        recorded = [node for node in recorded if node not in known]
    reports = run("ours", recorded, work, pytest_args, args.jobs)  # only the recorded
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
