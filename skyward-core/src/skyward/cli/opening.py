"""Opening each chosen provider and judging what state it is in (the rule is pure).

Four states, because each wants a different answer from the user:

``ready``
    credentials found and accepted (Local always: it needs no account).
``not configured``
    no credentials found: the user has not set that cloud up, which is not a fault;
    ``doctor`` exits 0 for it and ``offers`` still answers from a shipped catalog.
``unreachable``
    credentials found, but the provider's API did not answer (offline, a name that does
    not resolve): the credentials were not judged, and the fix is the network.
``refused``
    the API answered and refused the credentials: the fix is a new key or token.
``broken``
    the configuration was refused or the check itself failed in another way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from skyward.providers.reachability import unreachable
from skyward.providers.resources import CredentialCheck, ProviderTools, ResourceSession
from skyward.providers.sessions import NETWORK_FIX


class State(StrEnum):
    READY = "ready"
    NOT_CONFIGURED = "not configured"
    UNREACHABLE = "unreachable"
    REFUSED = "refused"
    BROKEN = "broken"


@dataclass(frozen=True, slots=True)
class Opened:
    """One provider after its check: the session (``None`` when it could not be opened),
    its state, what was found and, unless ready, what to do."""

    tools: ProviderTools
    session: ResourceSession | None
    state: State
    detail: str
    fix: str = ""

    @property
    def name(self) -> str:
        return self.tools.name

    def line(self) -> str:
        """How the command says it, one line (stderr for ``ls``/``offers``, doctor's rows)."""
        if self.state is State.NOT_CONFIGURED:
            return f"{self.name}: not configured: {self.detail}" + (f" ({self.fix})" if self.fix else "")
        if self.state is State.REFUSED:
            return f"{self.name}: credentials not accepted: {self.detail}" + (f" ({self.fix})" if self.fix else "")
        if self.state is State.UNREACHABLE:
            return f"{self.name}: {self.detail} ({self.fix})"
        if self.state is State.BROKEN:
            return f"{self.name}: could not check the credentials: {self.detail}"
        return f"{self.name}: {self.detail}"


def state_of(check: CredentialCheck) -> State:
    """The state a credential check means (pure)."""
    if not check.found:
        return State.NOT_CONFIGURED
    if not check.reachable:
        return State.UNREACHABLE
    return State.READY if check.valid else State.REFUSED


def failed_check(tools: ProviderTools, error: Exception) -> Opened:
    """A provider whose opening or check raised: unreachable when the error is a network
    one, else broken, with the error's own words."""
    offline = unreachable(error)
    if offline is not None:
        return Opened(tools, None, State.UNREACHABLE, str(offline), NETWORK_FIX)
    return Opened(tools, None, State.BROKEN, f"{type(error).__name__}: {error}")


def open_each(
    chosen: Sequence[ProviderTools], open_session: Callable[[ProviderTools], ResourceSession]
) -> list[Opened]:
    """Each provider opened and checked (one harmless read each); never raises for one."""
    found: list[Opened] = []
    for tools in chosen:
        try:
            session = open_session(tools)
            check = session.check()
        except Exception as error:  # a bad configuration, an unreachable API: that provider only
            found.append(failed_check(tools, error))
            continue
        state = state_of(check)
        found.append(Opened(tools, session, state, check.detail, "" if state is State.READY else check.fix))
    return found
