"""The reaper steps DigitalOcean and Verda share (skyward.providers.cloud.reaping): deleting
doomed instances one by one, which pools stay alive, and the cron job's report."""

from __future__ import annotations

import pytest

from skyward.providers.cloud.naming import PoolMark
from skyward.providers.cloud.reaping import delete_instances, live_pools, reaper_exit


class Busy(Exception):
    pass


def test_one_failed_instance_deletion_is_reported_by_name_and_id_and_the_rest_still_go() -> None:
    said: list[str] = []
    failures: list[str] = []

    def delete(ident: int) -> None:
        if ident == 2:
            raise Busy("locked")

    doomed = [(1, "skyward-a-0", "stopped"), (2, "skyward-b-0", "expired"), (3, "skyward-c-0", "expired")]
    deleted = delete_instances(doomed, delete, "droplet", Busy, failures, said.append)
    assert deleted == [(1, "skyward-a-0", "stopped"), (3, "skyward-c-0", "expired")]
    assert failures == ["droplet skyward-b-0 (2): locked"]  # named as the "deleted" lines name it
    assert said == ["deleted droplet skyward-a-0 (1): stopped", "deleted droplet skyward-c-0 (3): expired"]


def test_another_error_is_not_swallowed() -> None:
    def delete(ident: str) -> None:
        raise KeyError(ident)

    with pytest.raises(KeyError):
        delete_instances([("i-1", "n", "why")], delete, "instance", Busy, [], lambda _m: None)


def test_a_pool_stays_alive_while_an_instance_of_it_is_left_and_the_starting_pool_always() -> None:
    marks = [("i-1", PoolMark("p1", 10)), ("i-2", PoolMark("p2", 10)), ("i-3", None), ("i-4", PoolMark("p2", 10))]
    deleted = [("i-1", "n1", "expired"), ("i-2", "n2", "expired")]
    assert live_pools(marks, deleted, None) == {"p2"}  # i-4 is left
    assert live_pools(marks, deleted, "mine") == {"p2", "mine"}
    assert live_pools(marks, [*deleted, ("i-4", "n4", "expired")], None) == set()


def test_the_reaper_s_report_lists_failures_on_stderr_and_exits_1_for_cron(capsys: pytest.CaptureFixture[str]) -> None:
    assert reaper_exit(["droplet d (7): locked"], [(2, "droplet"), (0, "tag")]) == 1
    out, err = capsys.readouterr()
    assert err == "could not delete droplet d (7): locked\n"
    assert out == "skyward reaper: deleted 2 droplet(s), 0 tag(s); 1 failure(s)\n"
    assert reaper_exit([], [(1, "instance")]) == 0
