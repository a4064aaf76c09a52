"""Testing a provider without a cloud: public, for third-party plugins too.

- :class:`EmulatedInstances`: an instance is a process tree on a loopback address running
  its own user-data (its own PID and mount namespaces, a private ``/tmp``, a clean
  environment, stubbed ``shutdown``/``apt-get``, an offline ``uv``).
- :func:`isolation_problem`: why this process is not in an isolated network namespace
  (None when it is); emulated clouds run only there.
- :mod:`skyward.testing.conformance`: the provider conformance suite
  (:class:`~skyward.testing.conformance.ProviderConformance`), with pytest installed
  (``pip install 'skyward-core[testing]'``); its pytest plugin is registered through the
  ``pytest11`` entry point.
"""

from skyward.testing.instances import (
    AgentEndpoint,
    EmulatedInstance,
    EmulatedInstances,
    UnsafeUserData,
    check_user_data,
    decode_user_data,
)
from skyward.testing.netns import isolation_problem
from skyward.testing.stubs import recorder

__all__ = [
    "AgentEndpoint",
    "EmulatedInstance",
    "EmulatedInstances",
    "UnsafeUserData",
    "check_user_data",
    "decode_user_data",
    "isolation_problem",
    "recorder",
]
