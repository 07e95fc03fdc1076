"""`--config FILE`: the README's worker command written as a YAML file builds the same server, and so do
a router's and the mock's.

Every source reads the file with `vllm_server.config_file` (no vLLM on a router's path), as vLLM's
`FlexibleArgumentParser` reads it for `vllm serve` (compared with vLLM's own reading of the same file):
each key a flag (dashes or underscores), a list for a flag of several values, `true` for a switch, `false`
for its `--no-` form, and a flag given on the command line wins over the file. The frontend's flags
(`--port`, `--lora-modules`, the parsers) come from the file as much as vLLM's engine flags. No engine
starts: the configurations the CLI builds are compared, which are what `Server` starts from; the mock is
started from a file as a user starts it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_frontend_testing.tiny_model import build_tiny_lora
from vllm_server.cli import serve_config


@pytest.fixture(scope="module")
def sql(tiny_model_dir: Path) -> str:
    return str(build_tiny_lora(tiny_model_dir))


def _readme_worker(model: Path, sql: str) -> list[str]:
    """The README's second worker (`Serving`), with the parsers of its tool-call example."""
    return [
        *("--model", str(model), "--served-model-name", "tiny", "--enforce-eager", "--enable-lora"),
        *("--lora-modules", f"sql={sql}", "--grpc-port", "50052", "--port", "8002"),
        *("--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--reasoning-parser", "qwen3"),
    ]


def _yaml(tmp_path: Path, sql: str) -> Path:
    path = tmp_path / "worker.yaml"
    path.write_text(
        "served-model-name: tiny\n"
        "enforce_eager: true\n"  # vLLM takes either spelling
        "enable-lora: true\n"
        f"lora-modules:\n  - sql={sql}\n"
        "grpc-port: 50052\n"
        "port: 8002\n"
        "enable-auto-tool-choice: true\n"
        "tool-call-parser: hermes\n"
        "reasoning-parser: qwen3\n"
    )
    return path


def test_the_readme_worker_as_a_config_file_is_the_same_server(
    tiny_model_dir: Path, sql: str, tmp_path: Path
) -> None:
    given = serve_config(_readme_worker(tiny_model_dir, sql))
    from_file = serve_config(["--model", str(tiny_model_dir), "--config", str(_yaml(tmp_path, sql))])
    assert from_file == given
    assert from_file.flat() == given.flat()
    # what the file said did arrive (not two configurations equally missing it)
    assert from_file.server.port == 8002 and from_file.server.grpc_port == 50052
    assert from_file.server.parsers.reasoning_parser == "qwen3"
    assert from_file.engine_core is not None and from_file.engine_core.settings.enforce_eager is True
    assert [m.name for m in from_file.engine_core.lora_modules] == ["sql"]


def test_the_command_line_wins_over_the_file(tiny_model_dir: Path, sql: str, tmp_path: Path) -> None:
    config = serve_config(
        ["--model", str(tiny_model_dir), "--config", str(_yaml(tmp_path, sql)), "--port", "9000"]
    )
    assert config.server.port == 9000
    assert config.server.grpc_port == 50052


def test_the_file_may_name_the_worker_itself(tiny_model_dir: Path, sql: str, tmp_path: Path) -> None:
    path = _yaml(tmp_path, sql)
    path.write_text(f"model: {tiny_model_dir}\n" + path.read_text())
    assert serve_config(["--config", str(path)]) == serve_config(_readme_worker(tiny_model_dir, sql))


# ---- a router and the mock: vllm_server.config_file, read as vLLM's parser reads the file ------------

ROUTER = [
    *("--remote", "127.0.0.1:50072", "--remote-prefill", "127.0.0.1:50071"),
    *("--grpc-port", "50073", "--port", "8010", "--served-model-name", "tiny", "--allow-credentials"),
    *("--allowed-origins", '["https://a.example"]', "--middleware", "m.a"),
]
ROUTER_YAML = """\
remote: 127.0.0.1:50072
remote_prefill: 127.0.0.1:50071
grpc-port: 50073
port: 8010
served-model-name: [tiny]
allow-credentials: true
enable-ssl-refresh: false
allowed-origins: '["https://a.example"]'
middleware: m.a
"""


def test_a_router_reads_the_file_as_a_worker_does(tmp_path: Path) -> None:
    path = tmp_path / "router.yml"
    path.write_text(ROUTER_YAML)
    from_file = serve_config(["--config", str(path)])
    assert from_file == serve_config(ROUTER)
    assert from_file.server.port == 8010 and from_file.server.allow_credentials is True
    assert from_file.server.middleware == ("m.a",)
    # the command line wins, a --no- form over the file's `true` as well
    argv = ["--port", "9000", "--config", str(path), "--no-allow-credentials"]
    over = serve_config(argv)
    assert over.server.port == 9000 and over.server.allow_credentials is False
    assert over.server.grpc_port == 50073


def test_the_flags_of_a_file_are_vllms(tmp_path: Path) -> None:
    """vLLM's FlexibleArgumentParser.load_config_file on the same file gives the same flags."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    from vllm_server import config_file
    from vllm_server.cli import serve_parser

    path = tmp_path / "router.yaml"
    path.write_text(
        ROUTER_YAML.replace("remote_prefill", "remote-prefill")  # vLLM looks --no- up with the key as written
        + "headless: false\nh11-max-header-count: 64\nempty: []\nnested: {a: {b: 1}}\n"
    )
    parser = serve_parser(engine=False)
    theirs = FlexibleArgumentParser()  # type: ignore[no-untyped-call]
    for action in parser._actions:  # vLLM's parser with our options, for its --no- lookups
        theirs._option_string_actions.update(dict.fromkeys(action.option_strings, action))
    ours = config_file.flags(config_file.load(str(path)), parser._option_string_actions)
    assert ours == theirs.load_config_file(str(path))
    assert "--no-enable-ssl-refresh" in ours and "--no-headless" not in ours  # --headless: a store_true


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--config", "{path}.json"], "a config file is a .yaml or .yml file"),
        (["--config", "{dir}/missing.yaml"], "cannot be read: No such file or directory"),
        (["--config", "{path}", "--config", "{path}"], "--config is given more than once"),
        (["--config"], "--config names no file"),
        (["--config", "{list}"], "the file is a mapping of flag names to values"),
        (["--config", "{bad}"], "is not valid YAML"),
        (["--config", "{none}"], "'port' has no value"),
    ],
)
def test_a_file_that_cannot_be_read_stops_the_start(argv: list[str], says: str, tmp_path: Path) -> None:
    paths = {"path": tmp_path / "r.yaml", "list": tmp_path / "l.yaml", "bad": tmp_path / "b.yaml"}
    paths["none"] = tmp_path / "n.yaml"
    paths["path"].write_text("mock: true\n")
    paths["list"].write_text("- mock\n")
    paths["bad"].write_text("port: [\n")
    paths["none"].write_text("mock: true\nport:\n")
    given = [a.format(dir=tmp_path, **{k: str(v) for k, v in paths.items()}) for a in argv]
    with pytest.raises(SystemExit) as stopped:
        serve_config([*given, "--tokenizer", "/t"])
    assert str(stopped.value).startswith("Error: --config") and says in str(stopped.value), stopped.value


async def test_a_mock_started_from_a_file_serves_as_it_says(tiny_model_dir: Path, tmp_path: Path) -> None:
    """`vllm-frontend serve --config FILE` as a user runs it: the file's model name and key are served."""
    import httpx

    from tests.support.timing import PATIENCE
    from vllm_frontend_testing.processes import Frontend

    path = tmp_path / "mock.yaml"
    path.write_text(
        f"mock: true\ntokenizer: {tiny_model_dir}\ngrpc_port: -1\nserved-model-name: [from-file]\n"
        "api-key: [k1]\n"
    )
    front = await Frontend.start("--config", str(path))
    try:
        async with httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE) as http:
            assert (await http.get("/v1/models")).status_code == 401
            models = await http.get("/v1/models", headers={"Authorization": "Bearer k1"})
            assert [m["id"] for m in models.json()["data"]] == ["from-file"]
    finally:
        await front.stop(10)
