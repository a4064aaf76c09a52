"""The shared delete-then-verify rules (skyward.providers.cloud.removal)."""

from __future__ import annotations

import pytest

from skyward.providers import FIREWALL, INSTANCE, Removal, Resource
from skyward.providers.cloud.removal import delete_each, reap_containers, verified_removals


class Refused(Exception):
    pass


def resource(ident: str, kind: str = INSTANCE, *, name: str = "", idle: bool = False) -> Resource:
    return Resource("fake", "r", "sky-1", kind, ident, "running", None, 100.0, None, name=name, idle=idle)


def test_a_failed_deletion_is_recorded_and_the_rest_still_go() -> None:
    asked: list[str] = []

    def delete(r: Resource) -> None:
        asked.append(r.id)
        if r.id == "b":
            raise Refused("busy")

    errors = delete_each([resource("a"), resource("b"), resource("c")], delete, Refused)
    assert asked == ["a", "b", "c"]
    assert errors == {(INSTANCE, "b"): "busy"}


def test_an_unexpected_exception_is_not_swallowed() -> None:
    def delete(r: Resource) -> None:
        raise KeyError(r.id)

    with pytest.raises(KeyError):
        delete_each([resource("a")], delete, Refused)


def test_a_resource_counts_as_removed_only_when_the_fresh_listing_lacks_it() -> None:
    a, b, c = resource("a"), resource("b"), resource("c")
    removals = verified_removals([a, b, c], [b, c], {(INSTANCE, "c"): "busy"}, "still there")
    assert removals == [Removal(a, True), Removal(b, False, "still there"), Removal(c, False, "busy")]


def test_a_firewall_sharing_an_instance_id_is_told_apart() -> None:
    instance, firewall = resource("7"), resource("7", FIREWALL)
    assert verified_removals([instance], [firewall], {}) == [Removal(instance, True)]


def test_the_sweep_deletes_only_other_pools_stopped_or_expired_containers() -> None:
    listed = [
        resource("1", name="skyward-old-100000000-0"),  # expired (now 2e8 > 1e8)
        resource("2", name="skyward-live-9999999999-0"),  # not expired, running: kept
        resource("3", name="skyward-idle-9999999999-0", idle=True),  # stopped: goes
        resource("4", name="skyward-mine-100000000-0"),  # the starting pool: kept
        resource("5", name="somebody-else"),  # not ours: kept
    ]
    deleted: list[str] = []

    def delete(ident: str) -> None:
        deleted.append(ident)
        if ident == "3":
            raise Refused("locked")

    said = reap_containers(
        listed, delete, Refused, 200000000.0, "mine", thing="Fake box", verb="destroy", done="destroyed"
    )
    assert deleted == ["1", "3"]
    assert said[0].startswith("destroyed Fake box skyward-old-100000000-0 (1) left by an earlier pool: its pool old")
    assert said[1] == "could not destroy Fake box skyward-idle-9999999999-0 (3) left by an earlier pool: locked"


def test_a_pools_members_are_the_containers_its_label_marks() -> None:
    from skyward.providers.cloud.marketplace import pool_members

    listing = [
        {"id": 1, "name": "skyward-sky-1-100000000-0"},
        {"id": 2, "name": "skyward-sky-2-100000000-0"},
        {"id": 3, "name": None},
        {"id": 4, "label": "skyward-sky-1-100000000-1"},
    ]
    assert pool_members(listing, "name", "sky-1") == ["1"]
    assert pool_members(listing, "label", "sky-1") == ["4"]


def test_a_sweep_that_cannot_list_is_a_notice_not_a_failure() -> None:
    from skyward.events import Notice
    from skyward.providers.cloud.removal import sweep_with_notices

    seen: list[object] = []

    def broken() -> list[str]:
        raise Refused("HTTP 503")

    sweep_with_notices(lambda: ["destroyed one"], seen.append, Refused, "boxes")
    sweep_with_notices(broken, seen.append, Refused, "boxes")
    assert seen == [
        Notice(message="destroyed one"),
        Notice(message="could not look for boxes earlier pools left behind: HTTP 503"),
    ]


def test_a_reapers_report_names_each_deletion_then_each_failure() -> None:
    from skyward.providers.cloud.removal import sweep_messages

    said = sweep_messages([(7, "skyward-a", "stopped")], ["firewall f1: busy"], "droplet")
    assert said == [
        "deleted droplet skyward-a (7) left by an earlier pool: stopped",
        "could not delete a leftover of an earlier pool: firewall f1: busy",
    ]
