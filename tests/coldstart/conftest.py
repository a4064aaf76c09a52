"""Cold-start tests: the AWS fixtures (moto, the recording proxy, emulated instances) and
the DigitalOcean fake, shared with tests/aws and tests/digitalocean. Tests marked
``cloud`` run only in an isolated network namespace (see tests/aws/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `aws`, `fakes`, `harness`

from aws.conftest import aws, emulate, emulated, moto_server
from do_fixtures import do_config, fake_do
from providers_support import fail_cloud_test_outside_isolation

__all__ = ["aws", "do_config", "emulate", "emulated", "fake_do", "moto_server"]


def pytest_runtest_setup(item: pytest.Item) -> None:
    fail_cloud_test_outside_isolation(item, "coldstart")
