"""`check --jobs N` shares the tests out by server group: each group's tests in one job, one after the
other, the jobs about as long; the committed groups name every recorded test."""

from __future__ import annotations

from vllm_frontend_testing.conformance import RECORD
from vllm_frontend_testing.conformance.__main__ import (
    KNOWN_NAME,
    SERVERS_NAME,
    _read_known,
    _read_record,
    groups_of,
    read_servers,
    share,
)

TESTS = ["m1::t1", "m2::t1", "m1::t2", "m3::t1", "m2::t2", "m1::t3"]
GROUPS = {"m1::t1": "s1", "m1::t2": "s1", "m1::t3": "s1", "m2::t1": "s2", "m2::t2": "s2", "m3::t1": "s3"}


def test_the_tests_of_one_group_run_in_one_job_one_after_the_other_in_their_order() -> None:
    shares = share(TESTS, GROUPS, {}, 2)
    assert sorted(node for nodes in shares for node in nodes) == sorted(TESTS)  # each test once
    for group in ("s1", "s2", "s3"):
        holding = [nodes for nodes in shares if any(GROUPS[node] == group for node in nodes)]
        assert len(holding) == 1  # the server starts in one job only
        (nodes,) = holding
        at = [i for i, node in enumerate(nodes) if GROUPS[node] == group]
        assert at == list(range(at[0], at[0] + len(at)))  # one after the other
        assert [nodes[i] for i in at] == [node for node in TESTS if GROUPS[node] == group]  # in order


def test_the_jobs_take_about_as_long_by_what_the_tests_took() -> None:
    # s1 took 300 s, s2 and s3 100 s each: s1 alone in one job, s2 and s3 in the other.
    seconds = {
        "m1::t1": 200.0,
        "m1::t2": 50.0,
        "m1::t3": 50.0,
        "m2::t1": 90.0,
        "m2::t2": 10.0,
        "m3::t1": 100.0,
    }
    shares = share(TESTS, GROUPS, seconds, 2)
    assert sorted(map(sorted, shares)) == [["m1::t1", "m1::t2", "m1::t3"], ["m2::t1", "m2::t2", "m3::t1"]]


def test_without_measures_the_jobs_start_about_as_many_servers() -> None:
    tests = [f"m{i}::t" for i in range(6)]
    shares = share(tests, {test: f"s{i}" for i, test in enumerate(tests)}, {}, 2)
    assert [len(nodes) for nodes in shares] == [3, 3]


def test_a_test_that_asks_for_no_server_goes_with_the_first_job() -> None:
    shares = share(["m1::t1", "m1::t2", "m2::t1"], {"m1::t1": "s1", "m1::t2": "-", "m2::t1": "s2"}, {}, 2)
    assert "m1::t2" in shares[0]
    assert len(shares) == 2


def test_fewer_groups_than_jobs_leaves_no_empty_job() -> None:
    assert share(["m1::t1", "m1::t2"], {"m1::t1": "s1", "m1::t2": "s1"}, {}, 3) == [["m1::t1", "m1::t2"]]


def test_groups_are_numbered_by_the_first_test_asking_for_a_server() -> None:
    a, b = ("model-a", "--seed", "0"), ("model-b",)
    servers: dict[str, list[tuple[str, ...]]] = {"x::1": [b], "x::2": [a, b], "x::3": [], "x::4": [b]}
    assert groups_of(servers) == {"x::1": "s1", "x::2": "s2", "x::3": "-", "x::4": "s1"}


def test_every_recorded_test_has_its_server_group() -> None:
    """`plan` was run after the record last changed: else `check --jobs` plans the rest itself, slower."""
    groups, seconds = read_servers(RECORD.with_name(SERVERS_NAME))
    recorded = _read_record(RECORD)
    assert [node for node in recorded if node not in groups] == []
    assert [node for node in groups if node not in recorded] == []
    known = _read_known(RECORD.with_name(KNOWN_NAME))
    assert [node for node in recorded if node not in known and seconds[node] <= 0] == []  # measured
