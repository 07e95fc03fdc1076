"""Under CI (`CI=true`, as `.ci/run` sets it) a test skipped at run time fails, naming the test and
the reason; elsewhere it stays a skip. An xfail is an xfail either way (tests/conftest.py's hooks)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests import conftest

pytest_plugins = ["pytester"]

#: A skip in each place pytest allows one, an xfail, an xfail that never runs, and a test that passes.
SKIPPING = """
import pytest

@pytest.fixture
def part():
    pytest.skip("missing fixture part")

def test_missing_part():
    pytest.skip("missing part")

@pytest.mark.skipif(True, reason="missing marked part")
def test_marked():
    pass

def test_needs(part):
    pass

@pytest.mark.xfail(strict=True, reason="known gap")
def test_known_gap():
    assert False

@pytest.mark.xfail(run=False, reason="known crash")
def test_known_crash():
    pass

def test_present():
    pass
"""
MODULE_SKIP = """
import pytest

pytest.skip("missing module part", allow_module_level=True)

def test_never_collected():
    pass
"""


def _run(pytester: pytest.Pytester, source: str) -> pytest.RunResult:
    """`source` as a test module, run in-process with the project conftest's hooks (nothing else of it)."""
    hooks = SimpleNamespace(
        **{name: getattr(conftest, name) for name in dir(conftest) if name.startswith("pytest_")}
    )
    pytester.makepyfile(test_inner=source)
    return pytester.runpytest(
        "-p", "no:asyncio", "-p", "no:hypothesispytest", "-p", "no:cacheprovider", "-rA", plugins=[hooks]
    )


def test_under_ci_a_skip_fails_naming_the_test_and_the_reason(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = _run(pytester, SKIPPING)
    # a skip in the test fails it; one at setup (a mark, a fixture) is an error of that test
    result.assert_outcomes(passed=1, failed=1, errors=2, xfailed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    for line in (
        "FAILED test_inner.py::test_missing_part - skipped under CI=true at test_inner.py:8: missing part",
        "ERROR test_inner.py::test_marked - skipped under CI=true at test_inner.py:10: missing marked part",
        "ERROR test_inner.py::test_needs - skipped under CI=true at test_inner.py:14: missing fixture part",
        "XFAIL test_inner.py::test_known_gap - known gap",
        "XFAIL at setup of test_inner.py::test_known_crash - [[]NOTRUN[]] known crash",
    ):
        result.stdout.fnmatch_lines([line])
    result.stdout.no_fnmatch_line("SKIPPED*")


def test_under_ci_a_module_skipped_at_collection_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = _run(pytester, MODULE_SKIP)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # an error during collection
    result.stdout.fnmatch_lines(
        ["ERROR test_inner.py - skipped under CI=true at test_inner.py:3: missing module part"]
    )


def test_without_ci_a_skip_is_a_skip(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    result = _run(pytester, SKIPPING)
    result.assert_outcomes(passed=1, skipped=3, xfailed=2)
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["SKIPPED [[]1[]] test_inner.py:*: missing part"])
    module = _run(pytester, MODULE_SKIP)
    module.assert_outcomes(skipped=1)
    assert module.ret == pytest.ExitCode.NO_TESTS_COLLECTED


@pytest.mark.parametrize(("ci", "expected"), [("true", True), ("1", True), ("", False), ("false", False)])
def test_ci_is_ci_true(monkeypatch: pytest.MonkeyPatch, ci: str, expected: bool) -> None:
    monkeypatch.setenv("CI", ci)
    assert conftest.under_ci() is expected
