"""The pytest plugin of ``skyward.testing`` (entry point ``pytest11``: active wherever
skyward-core and pytest are installed, and doing nothing until a test asks).

It declares the ``cloud`` marker the conformance suite uses, refuses to run a ``cloud``
test outside an isolated network namespace (an emulated cloud hands out addresses that
must never be dialled for real), and offers ``emulated_instances``: a fresh
:class:`~skyward.testing.EmulatedInstances` whose shut-down instances are recorded in
``.stopped``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skyward.testing.instances import EmulatedInstances
from skyward.testing.netns import isolation_problem


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "cloud: provider tests against emulated clouds; run inside an isolated network namespace"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("cloud") is None:
        return
    problem = isolation_problem()
    if problem is not None:
        pytest.fail(
            f"cloud test outside an isolated network namespace: {problem}. Run it with: unshare --net -- sh -c "
            "'ip link set lo up && exec python -m pytest -m cloud ...'",
            pytrace=False,
        )


class _Stopped(list[str]):
    def __call__(self, instance_id: str) -> None:
        self.append(instance_id)


@pytest.fixture
def emulated_instances() -> Iterator[EmulatedInstances]:
    stopped = _Stopped()
    harness = EmulatedInstances(stopped)
    try:
        yield harness
    finally:
        harness.close()
