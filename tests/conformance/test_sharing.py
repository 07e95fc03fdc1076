"""`check --jobs N` shares the tests out by server: each server's tests in one job, one after the other."""

from __future__ import annotations

from vllm_frontend_testing.conformance.__main__ import share

A = ("model-a", "--seed", "0")
B = ("model-b", "--seed", "0")
C = ("model-c", "--seed", "0")


def test_the_tests_of_one_server_run_in_one_job_one_after_the_other_in_their_order() -> None:
    tests = ["m1::t1", "m2::t1", "m1::t2", "m3::t1", "m2::t2", "m1::t3"]
    servers = {"m1::t1": [A], "m1::t2": [A], "m1::t3": [A], "m2::t1": [B], "m2::t2": [B], "m3::t1": [C]}
    shares = share(tests, servers, 2)
    assert sorted(node for nodes in shares for node in nodes) == sorted(tests)  # each test once
    for key in (A, B, C):
        holding = [nodes for nodes in shares if any(servers[node][0] == key for node in nodes)]
        assert len(holding) == 1  # the server starts in one job only
        (nodes,) = holding
        at = [i for i, node in enumerate(nodes) if servers[node][0] == key]
        assert at == list(range(at[0], at[0] + len(at)))  # one after the other
        assert [nodes[i] for i in at] == [node for node in tests if servers[node][0] == key]  # in order


def test_the_jobs_start_about_as_many_servers() -> None:
    keys = [(f"model-{i}",) for i in range(6)]
    tests = [f"m{i}::t" for i in range(6)]
    servers = {test: [key] for test, key in zip(tests, keys, strict=True)}
    shares = share(tests, servers, 2)
    assert [len(nodes) for nodes in shares] == [3, 3]


def test_a_test_that_asks_for_no_server_goes_with_the_first_job() -> None:
    servers: dict[str, list[tuple[str, ...]]] = {"m1::t1": [A], "m1::t2": [], "m2::t1": [B]}
    shares = share(["m1::t1", "m1::t2", "m2::t1"], servers, 2)
    assert "m1::t2" in shares[0]
    assert len(shares) == 2


def test_fewer_servers_than_jobs_leaves_no_empty_job() -> None:
    assert share(["m1::t1", "m1::t2"], {"m1::t1": [A], "m1::t2": [A]}, 3) == [["m1::t1", "m1::t2"]]
