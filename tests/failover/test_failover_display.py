"""What the displays say of a failed candidate and of where the pool ran."""

from __future__ import annotations

import io

from rich.console import Console

from skyward.display import DisplayState, SpinnerDisplay
from skyward.display.log import describe
from skyward.events import CandidateFailed, CostFinal

FAILED = CandidateFailed(0, "aws", "us-east-1", "capacity", "node 0: no on-demand capacity")


def test_the_log_display_warns_of_a_failed_candidate_with_its_reason() -> None:
    record = describe(DisplayState(), FAILED)
    assert record is not None and record.level == "warning"
    assert record.message == "candidate failed: capacity"
    assert dict(record.fields) == {
        "candidate": 1, "provider": "aws", "region": "us-east-1", "why": "node 0: no on-demand capacity",
    }  # fmt: skip


def test_the_log_display_says_where_the_pool_ran_when_it_stops() -> None:
    record = describe(DisplayState(), CostFinal(1.0, 3600.0, 1.0, 0, 1, 0.0, provider="verda", region="FIN-01"))
    assert record is not None and ("provider", "verda") in record.fields and ("region", "FIN-01") in record.fields


def test_the_spinner_prints_a_failed_candidate_above_its_view() -> None:
    console = Console(record=True, width=160, file=io.StringIO(), force_terminal=True, color_system=None)
    with SpinnerDisplay(console) as display:
        display(FAILED)
    assert "candidate 1 (aws) failed, capacity: node 0: no on-demand capacity" in console.export_text()
