"""The generated modules are fresh, deterministic, and `check` reports a stale one with a diff."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_server import protogen


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    """The generator's output for the checked-in .proto files."""
    return protogen.generate()


def test_checked_in_files_are_fresh(generated: dict[str, str]) -> None:
    assert protogen.diff(generated) == ""
    assert sorted(generated) == [
        "__init__.py",
        "control_pb2.py",
        "control_pb2.pyi",
        "control_pb2_grpc.py",
        "inference_pb2.py",
        "inference_pb2.pyi",
        "inference_pb2_grpc.py",
    ]


def test_output_is_deterministic_and_headed(generated: dict[str, str]) -> None:
    assert protogen.generate() == generated
    for name, text in generated.items():
        head = text.split("\n", 5)
        assert "DO NOT EDIT" in "".join(head[:4]), name
        assert str(Path.home()) not in text and "/tmp" not in text, name
    assert "from vllm import" not in generated["inference_pb2_grpc.py"]
    assert "from vllm_server.grpc.proto import inference_pb2" in generated["inference_pb2_grpc.py"]


def test_check_fails_with_a_diff_when_stale(generated: dict[str, str], tmp_path: Path) -> None:
    protogen.write(generated, tmp_path)
    assert protogen.diff(generated, tmp_path) == ""
    stale = tmp_path / "control_pb2.pyi"
    stale.write_text(stale.read_text() + "# edited by hand\n")
    (tmp_path / "extra_pb2.py").write_text("x = 1\n")
    (tmp_path / "inference_pb2.py").unlink()
    report = protogen.diff(generated, tmp_path)
    assert "-# edited by hand" in report
    assert "extra_pb2.py" in report and "+++ /dev/null" in report
    assert "--- /dev/null" in report and "inference_pb2.py" in report
    assert sorted(protogen.write(generated, tmp_path)) == ["control_pb2.pyi", "inference_pb2.py"]
    assert protogen.diff(generated, tmp_path) == ""


def test_cli_check_passes() -> None:
    assert protogen.main(["check"]) == protogen.EXIT_OK
