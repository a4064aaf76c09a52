"""Every public constructor and the odd values a hostile user passes to it.

Shared by ``test_constructor_inputs.py`` (hypothesis, in CI) and by the survey that
produces the bad-input figures in docs/reliability.md::

    PYTHONHASHSEED=0 .venv/bin/python tests/unit/constructor_inputs.py

A constructor call must either accept a value or refuse it with ``ConfigurationError``
naming the parameter, and must do so within ``CALL_BOUND_S`` seconds.
"""

from __future__ import annotations

import math
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from types import FrameType
from typing import Literal

from skyward.errors import ConfigurationError

CALL_BOUND_S = 5.0
"""A constructor that takes longer than this on one value counts as hanging (valid calls
take well under 50 ms on a shared 2-core machine; the margin is for a loaded CI box)."""


class CallTooSlow(Exception):
    """Raised from the alarm signal inside a constructor that ran past ``CALL_BOUND_S``."""


@contextmanager
def bounded(seconds: float = CALL_BOUND_S) -> Iterator[None]:
    """Interrupt the block with ``CallTooSlow`` after ``seconds`` (main thread only)."""

    def _expired(signum: int, frame: FrameType | None) -> None:
        raise CallTooSlow(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, _expired)
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_delay > 0:  # pytest-timeout's alarm, say: give it back what is left of it
            left = max(outer_delay - (time.monotonic() - started), 0.001)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


def _local() -> object:
    from skyward import Local

    return Local


def _pool(**kwargs: object) -> object:
    from skyward import ComputePool

    return ComputePool(**kwargs)  # type: ignore[arg-type]


def _image(**kwargs: object) -> object:
    from skyward import Image

    return Image(**kwargs)  # type: ignore[arg-type]


def _local_config(**kwargs: object) -> object:
    from skyward import Local

    return Local(**kwargs)  # type: ignore[arg-type]


def _nvidia(model: str) -> Callable[..., object]:
    def make(**kwargs: object) -> object:
        from skyward import Accelerator

        return getattr(Accelerator.NVIDIA, model)(**kwargs)

    return make


def _vendor(namespace: str, factory: str, **required: object) -> Callable[..., object]:
    def make(**kwargs: object) -> object:
        from skyward import Accelerator

        return getattr(getattr(Accelerator, namespace), factory)(**{**required, **kwargs})

    return make


def _accelerator(**kwargs: object) -> object:
    from skyward import Accelerator

    return Accelerator("A100", **kwargs)  # type: ignore[arg-type]


def _spot_always(**kwargs: object) -> object:
    from skyward import Spot

    return Spot.Always(**kwargs)  # type: ignore[arg-type]


def _spot_percent(**kwargs: object) -> object:
    from skyward import Spot

    return Spot.Percent(**kwargs)  # type: ignore[arg-type]


def _plugin(module: str, name: str, **required: object) -> Callable[..., object]:
    def make(**kwargs: object) -> object:
        import importlib

        return getattr(importlib.import_module(module), name)(**{**required, **kwargs})

    return make


def _plain(value: object) -> bool:
    """What no parameter takes: a number that is not finite (``nan`` seconds make a timer
    that never fires), a complex number, a byte string."""
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return not isinstance(value, complex | bytes | bytearray)


FLAGS = frozenset({"collect_metrics", "use_ssm", "read_only", "reap"})
# safe_results is a flag too, with None for "the provider's default".
"""Yes/no parameters: only ``True`` and ``False`` may be accepted (``reap="no"`` is truthy)."""

TEXT = frozenset({"client_address", "client_cidr", "region", "transport", "display", "python", "machine"})
"""Parameters that take text only (``client_address=1`` must not become ``0.0.0.1``)."""


def _documented(name: str, value: object) -> bool:
    if name == "safe_results":
        return value is None or isinstance(value, bool)
    if name in FLAGS:
        return isinstance(value, bool)
    if name in TEXT:
        return value is None or isinstance(value, str)
    return _plain(value)


@dataclass(frozen=True)
class Parameter:
    """One parameter of one public constructor."""

    constructor: str
    name: str
    make: Callable[..., object]

    def documented(self, value: object) -> bool:
        """Whether accepting ``value`` is what the documentation promises."""
        return _documented(self.name, value)

    def __str__(self) -> str:
        return f"{self.constructor}({self.name}=)"


def _params(constructor: str, make: Callable[..., object], names: str) -> list[Parameter]:
    return [Parameter(constructor, name, make) for name in names.split()]


PARAMETERS: list[Parameter] = [
    *_params(
        "ComputePool",
        _pool,
        "provider image nodes machine accelerator cpu memory volume spot timeout env concurrency display "
        "on_event collect_metrics pip safe_results allow_results",
    ),
    *_params("Image", _image, "python pip pip_extra_index_url apt env includes excludes"),
    *_params("Local", _local_config, "transport grace_period bootstrap_timeout"),
    # The dataclass itself checks only its shape (the factories check against the catalog).
    *_params("Accelerator", _accelerator, "count mig"),
    *_params("A100", _nvidia("A100"), "count memory mig form_factor"),
    *_params("H100", _nvidia("H100"), "count memory mig form_factor"),
    *_params("T4", _nvidia("T4"), "count memory"),
    *_params("Trainium", _vendor("AWS", "Trainium", version=2), "version count"),
    *_params("Inferentia", _vendor("AWS", "Inferentia", version=2), "version count"),
    *_params("TPU", _vendor("Google", "TPU", version="v5p"), "version count"),
    *_params("TPUSlice", _vendor("Google", "TPUSlice", name="v5p-8"), "name"),
    *_params("MI", _vendor("AMD", "MI", model="300X"), "model count"),
    *_params("RadeonPro", _vendor("AMD", "RadeonPro", model="V710"), "model count"),
    *_params("Spot.Always", _spot_always, "retries interval"),
    *_params("Spot.Percent", _spot_percent, "fraction"),
    *_params(
        "S3Volume",
        _plugin("skyward_aws", "S3Volume", mount_path="/data", bucket="my-bucket"),
        "mount_path bucket prefix read_only",
    ),
    *_params(
        "AWS",
        _plugin("skyward_aws", "AWS"),
        "region use_ssm client_cidr bootstrap_timeout grace_period ami subnet_ids instance_profile endpoint_resolver",
    ),
    *_params(
        "DigitalOcean",
        _plugin("skyward_digitalocean", "DigitalOcean"),
        "region client_address image agent_port grace_period bootstrap_timeout provision_timeout poll_interval "
        "api_url address_url api_timeout api_retries api_backoff reap",
    ),
    *_params(
        "GCP",
        _plugin("skyward_gcp", "GCP"),
        "project region zone credentials_file image tpu_runtime network spot_termination compute_api_url "
        "tpu_api_url client_address agent_port grace_period bootstrap_timeout provision_timeout poll_interval "
        "address_url api_timeout api_retries api_backoff reap",
    ),
    *_params(
        "Verda",
        _plugin("skyward_verda", "Verda"),
        "region client_address image ssh_key_ids agent_port grace_period bootstrap_timeout provision_timeout "
        "poll_interval api_url address_url api_timeout api_retries api_backoff reap",
    ),
]


def _odd_object() -> object:
    class Odd:
        def __repr__(self) -> str:
            return "<odd object>"

    return Odd()


ODD_VALUES: list[object] = [
    None, True, False, 0, -1, 1, 2, 3, 10**30, -(10**30), 2**63, 0.0, -0.0, 0.5, 1.5, -1.5, 1e30, 1e-300,
    math.nan, math.inf, -math.inf, complex(1, 1), Fraction(1, 3),
    "", " ", "x", "1", "0", "-1", "nan", "inf", "3.11", "3", "1.2.3.4", "0.0.0.0", "::1", "10.0.0.1", "\n",
    "a" * 10_000, "ipc", "tcp", "log", "quiet", "always", "0.5", "80GB", "40GB", "3g.40gb", "SXM", "A100",
    "us-east-1", "nyc1", "https://example.com", "/data", "my-bucket",
    b"x", bytearray(b"x"), [], [1], ["x"], [""], [None], ["numpy"], [[1]], ["3g.40gb"], (), ("x",), {}, {"a": 1},
    {1: "x"}, {"A": "b"}, {"A": 1}, set(), frozenset({"x"}), range(3),
    _odd_object(), object, len,
]  # fmt: skip
"""Hand-picked odd values; the hypothesis test adds generated ones."""


Outcome = Literal["accepted", "refused", "bad error", "too slow", "wrongly accepted"]


@dataclass(frozen=True)
class Verdict:
    outcome: Outcome
    detail: str = ""


def try_value(parameter: Parameter, value: object) -> Verdict:
    """Construct with ``parameter=value`` and classify what happened."""
    try:
        with bounded():
            parameter.make(**{parameter.name: value})
    except CallTooSlow as exc:
        return Verdict("too slow", str(exc))
    except ConfigurationError as exc:
        if parameter.name not in str(exc):
            return Verdict("bad error", f"ConfigurationError not naming {parameter.name!r}: {exc}")
        return Verdict("refused")
    except Exception as exc:  # classifying every failure is the point
        return Verdict("bad error", f"{type(exc).__name__}: {exc}")
    if not parameter.documented(value):
        return Verdict("wrongly accepted", "accepted a value the documentation does not allow")
    return Verdict("accepted")


def survey() -> dict[Outcome, int]:
    """Every hand-picked value against every parameter; prints the failures."""
    counts: dict[Outcome, int] = {"accepted": 0, "refused": 0, "bad error": 0, "too slow": 0, "wrongly accepted": 0}
    for parameter in PARAMETERS:
        for value in ODD_VALUES:
            verdict = try_value(parameter, value)
            counts[verdict.outcome] += 1
            if verdict.outcome not in ("accepted", "refused"):
                print(f"{parameter} {value!r:.60}: {verdict.detail:.200}", file=sys.stderr)
    return counts


if __name__ == "__main__":
    figures = survey()
    total = sum(figures.values())
    print(f"{len(PARAMETERS)} parameters x {len(ODD_VALUES)} values = {total} calls: {figures}")
