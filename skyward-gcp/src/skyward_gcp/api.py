"""The Google Cloud calls the provider makes, through Google's own clients.

``google-cloud-compute`` (Compute Engine: instances, firewalls, zones, machine and
accelerator types) and ``google-cloud-tpu`` (``tpu_v2``: TPU nodes), both over their REST
transport to ``GCP(compute_api_url=..., tpu_api_url=...)``. One thin method per call, each
retried by :mod:`skyward.providers.cloud.retry`'s rules (429 always; 5xx only for reads and
deletes: an insert repeated after a 500 could start a second billed VM), errors turned
into :class:`GcpAPIError` carrying Google's reason codes (``ZONE_RESOURCE_POOL_EXHAUSTED``,
``QUOTA_EXCEEDED``...), which :func:`unavailable` maps onto the failover's kinds.

Long-running operations (an insert, a delete, a TPU create) are polled here with the
injected ``sleep``, every ``poll`` seconds up to ``timeout``: their error, when they end
with one, is the refusal that matters (a stockout is reported by the *operation*, not
by the insert call).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit

from google.api_core import exceptions as gexc
from google.api_core.client_options import ClientOptions
from google.cloud import compute_v1, tpu_v2

from skyward.errors import CapacityError, ConfigurationError, ProvisioningError, QuotaError, UnavailableError
from skyward.providers.cloud.addresses import is_loopback
from skyward.providers.cloud.retry import Backoff, Failure, call_with_retry
from skyward_gcp.config import GCP
from skyward_gcp.credentials import find_credentials, project_of

T = TypeVar("T")

STOCKOUT_CODES = frozenset(
    {
        "ZONE_RESOURCE_POOL_EXHAUSTED",
        "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
        "RESOURCE_POOL_EXHAUSTED",
        "RESOURCE_EXHAUSTED",
    }
)
"""Google's reasons for "no capacity for this machine in this zone now" (Compute Engine's
``ZONE_RESOURCE_POOL_EXHAUSTED*``; the TPU API's ``RESOURCE_EXHAUSTED`` status, which it
also uses for quota, told apart by its message)."""
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "QUOTA_LIMIT_EXCEEDED"})
_QUOTA_WORDS = ("quota",)


class GcpAPIError(ProvisioningError):
    """A Google Cloud call failed; ``status`` is the HTTP status, ``codes`` Google's reasons."""

    def __init__(self, action: str, status: int | None, codes: Sequence[str], message: str) -> None:
        self.action = action
        self.status = status
        self.codes = tuple(codes)
        self.api_message = message
        code = f"HTTP {status}" if status is not None else "no response"
        reasons = ", ".join(self.codes) or "error"
        super().__init__(f"Google Cloud: {action} failed ({code}, {reasons}): {message}")


def unavailable(error: GcpAPIError, what: str, where: str) -> UnavailableError | None:
    """A refusal as the failover's kind: a stockout is a CapacityError (another zone or
    region may have the machine), a quota a QuotaError; anything else ``None``."""
    message = error.api_message.lower()
    if set(error.codes) & QUOTA_CODES or (error.status in (403, 429) and any(w in message for w in _QUOTA_WORDS)):
        return QuotaError(
            f"Google Cloud refused {what} in {where}: quota reached ({error.api_message}). Ask for more in the "
            "console (IAM & Admin > Quotas), use fewer nodes, or another region"
        )
    if "RESOURCE_EXHAUSTED" in error.codes and any(w in message for w in _QUOTA_WORDS):
        return QuotaError(f"Google Cloud refused {what} in {where}: quota reached ({error.api_message})")
    if set(error.codes) & STOCKOUT_CODES or "no more capacity" in message:
        return CapacityError(
            f"Google Cloud has no capacity for {what} in {where} right now ({error.api_message}); "
            "another zone, region, machine or later may have it"
        )
    return None


def _codes_of(errors: Iterable[Any]) -> list[str]:
    codes = []
    for item in errors or ():
        if isinstance(item, Mapping):
            code = item.get("reason") or item.get("code")
        else:
            code = getattr(item, "reason", None) or getattr(item, "code", None)
        if code:
            codes.append(str(code))
    return codes


def from_google(action: str, exc: gexc.GoogleAPICallError) -> GcpAPIError:
    codes = _codes_of(exc.errors)
    if exc.reason:
        codes.append(str(exc.reason))
    status = exc.code if isinstance(exc.code, int) else None
    grpc_status = getattr(exc, "grpc_status_code", None)
    if grpc_status is not None and getattr(grpc_status, "name", None):
        codes.append(str(grpc_status.name))
    return GcpAPIError(action, status, sorted(set(codes), key=codes.index), str(exc.message))


def _done(operation: Any) -> bool:
    status = getattr(operation, "status", None)
    return status == compute_v1.Operation.Status.DONE


def _classify(exc: BaseException) -> Failure | None:
    if isinstance(exc, gexc.GoogleAPICallError) and isinstance(exc.code, int):
        return Failure(exc.code, True, {})
    if isinstance(exc, ConnectionError | TimeoutError | gexc.RetryError):
        return Failure(None, False, {})
    return None


def _endpoint(name: str, url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise ConfigurationError(
            f"GCP({name}={url!r}): plain http would send access tokens unencrypted; use https "
            "(plain http is allowed only on a loopback address, for test doubles)"
        )
    return url.rstrip("/")


class GcpAPI:
    """The project's Compute Engine and Cloud TPU, through Google's clients (made on first use)."""

    def __init__(
        self,
        config: GCP,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        backoff: Backoff | None = None,
    ) -> None:
        self.config = config
        found = find_credentials(config)
        self.project = project_of(config, found)
        self.source = found.source
        self._credentials = found.credentials
        self._sleep = sleep
        self._clock = clock
        self._backoff = backoff or Backoff(attempts=config.api_retries, base=config.api_backoff)
        self._compute_url = _endpoint("compute_api_url", config.compute_api_url)
        self._tpu_url = _endpoint("tpu_api_url", config.tpu_api_url)
        self._clients: dict[str, Any] = {}

    def _client(self, kind: str) -> Any:
        if kind not in self._clients:
            if kind == "tpu":
                options = ClientOptions(api_endpoint=self._tpu_url)
                self._clients[kind] = tpu_v2.TpuClient(
                    credentials=self._credentials, transport="rest", client_options=options
                )
            else:
                options = ClientOptions(api_endpoint=self._compute_url)
                factory = getattr(compute_v1, kind)
                self._clients[kind] = factory(credentials=self._credentials, transport="rest", client_options=options)
        return self._clients[kind]

    def _call(self, action: str, method: str, fn: Callable[[], T]) -> T:
        try:
            return call_with_retry(
                fn, method=method, classify=_classify, backoff=self._backoff, sleep=self._sleep, clock=self._clock
            )
        except gexc.GoogleAPICallError as exc:
            raise from_google(action, exc) from None

    def _wait(self, action: str, operation: Any, zone: str | None = None) -> None:
        """Poll a Compute Engine operation (a zone's, or a global one) until it is DONE; its
        error becomes a GcpAPIError. Polled through operation clients made here, with this
        endpoint: the client library's own polling (``ExtendedOperation.done``) builds its
        operation client with Google's default endpoint, whatever the instance client had."""
        name = str(operation.name)
        if zone is None:
            client = self._client("GlobalOperationsClient")
            read = lambda: client.get(project=self.project, operation=name)  # noqa: E731
        else:
            client = self._client("ZoneOperationsClient")
            read = lambda: client.get(project=self.project, zone=zone, operation=name)  # noqa: E731
        deadline = self._clock() + self.config.provision_timeout
        delay = min(0.05, self.config.poll_interval)
        current = operation
        while not _done(current):
            if self._clock() > deadline:
                raise GcpAPIError(action, None, ["TIMEOUT"], "the operation did not finish in time")
            self._sleep(delay)
            delay = min(delay * 2, self.config.poll_interval)
            current = self._call(f"{action} (polling)", "GET", read)
        error = getattr(current, "error", None)
        errors = list(getattr(error, "errors", None) or ())
        if errors:
            codes = _codes_of(errors)
            message = "; ".join(str(getattr(e, "message", "")) for e in errors)
            status = int(current.http_error_status_code) if getattr(current, "http_error_status_code", 0) else None
            raise GcpAPIError(action, status, codes, message)

    # -- read-only -------------------------------------------------------------------------

    def zones(self, region: str) -> list[str]:
        """The zones of ``region`` that are UP, in name order."""
        listed = self._call(
            f"listing the zones of {region}", "GET",
            lambda: list(self._client("ZonesClient").list(project=self.project)),
        )  # fmt: skip
        return sorted(
            str(z.name) for z in listed if str(z.name).startswith(f"{region}-") and str(z.status or "UP") == "UP"
        )

    def offered_in(self, zone: str) -> frozenset[str]:
        """The machine types and GPU accelerator types ``zone`` offers (two list calls)."""
        machines = self._call(
            f"listing machine types in {zone}", "GET",
            lambda: [str(m.name) for m in self._client("MachineTypesClient").list(project=self.project, zone=zone)],
        )  # fmt: skip
        accelerators = self._call(
            f"listing accelerator types in {zone}", "GET",
            lambda: [str(a.name) for a in self._client("AcceleratorTypesClient").list(project=self.project, zone=zone)],
        )  # fmt: skip
        return frozenset(machines) | frozenset(accelerators)

    def instance(self, zone: str, name: str) -> Any | None:
        try:
            return self._call(
                f"reading instance {name}", "GET",
                lambda: self._client("InstancesClient").get(project=self.project, zone=zone, instance=name),
            )  # fmt: skip
        except GcpAPIError as exc:
            if exc.status == 404:
                return None
            raise

    def instances(self, zone: str, label_filter: str) -> list[Any]:
        return self._call(
            f"listing instances in {zone}", "GET",
            lambda: list(
                self._client("InstancesClient").list(
                    request={"project": self.project, "zone": zone, "filter": label_filter}
                )
            ),
        )  # fmt: skip

    def all_instances(self, label_filter: str) -> list[tuple[str, Any]]:
        """``(zone, instance)`` for every instance in the project matching ``label_filter``."""
        pages = self._call(
            "listing instances in every zone", "GET",
            lambda: list(
                self._client("InstancesClient").aggregated_list(
                    request={"project": self.project, "filter": label_filter}
                )
            ),
        )  # fmt: skip
        found: list[tuple[str, Any]] = []
        for scope, scoped in pages:
            zone = str(scope).rsplit("/", 1)[-1]
            found.extend((zone, instance) for instance in scoped.instances or ())
        return found

    def firewalls(self) -> list[Any]:
        return self._call(
            "listing firewall rules", "GET",
            lambda: list(self._client("FirewallsClient").list(project=self.project)),
        )  # fmt: skip

    # -- changes ---------------------------------------------------------------------------

    def insert_instance(self, zone: str, body: Mapping[str, Any]) -> None:
        """Create one VM and wait until Compute Engine has accepted or refused it (its
        operation ends when the VM is provisioning, or with the stockout/quota error)."""
        name = str(body["name"])
        operation = self._call(
            f"creating instance {name} in {zone}", "POST",
            lambda: self._client("InstancesClient").insert(
                project=self.project, zone=zone, instance_resource=compute_v1.Instance(body)
            ),
        )  # fmt: skip
        self._wait(f"creating instance {name} in {zone}", operation, zone)

    def delete_instances(self, targets: Sequence[tuple[str, str]]) -> list[str]:
        """Delete ``(zone, name)`` VMs: every delete sent first, then each operation awaited.
        Returns failures in words (one already gone is not one)."""
        operations: list[tuple[tuple[str, str], Any]] = []
        failures: list[str] = []
        for zone, name in targets:
            try:
                op = self._call(
                    f"deleting instance {name}", "DELETE",
                    lambda zone=zone, name=name: self._client("InstancesClient").delete(  # type: ignore[misc]
                        project=self.project, zone=zone, instance=name
                    ),
                )  # fmt: skip
            except GcpAPIError as exc:
                if exc.status != 404:
                    failures.append(f"{name}: {exc}")
                continue
            operations.append(((zone, name), op))
        for (zone, name), op in operations:
            try:
                self._wait(f"deleting instance {name}", op, zone)
            except GcpAPIError as exc:
                if exc.status != 404:
                    failures.append(f"{name}: {exc}")
        return failures

    def insert_firewall(self, body: Mapping[str, Any]) -> None:
        name = str(body["name"])
        operation = self._call(
            f"creating firewall rule {name}", "POST",
            lambda: self._client("FirewallsClient").insert(
                project=self.project, firewall_resource=compute_v1.Firewall(body)
            ),
        )  # fmt: skip
        self._wait(f"creating firewall rule {name}", operation)

    def delete_firewall(self, name: str) -> None:
        try:
            operation = self._call(
                f"deleting firewall rule {name}", "DELETE",
                lambda: self._client("FirewallsClient").delete(project=self.project, firewall=name),
            )  # fmt: skip
            self._wait(f"deleting firewall rule {name}", operation)
        except GcpAPIError as exc:
            if exc.status != 404:
                raise

    # -- Cloud TPU --------------------------------------------------------------------------

    def _tpu_parent(self, zone: str) -> str:
        return f"projects/{self.project}/locations/{zone}"

    def create_tpu(self, zone: str, node_id: str, node: Mapping[str, Any]) -> None:
        """Create a TPU node and wait for its long-running operation (the stockout or quota
        refusal comes back there)."""
        operation = self._call(
            f"creating TPU {node_id} in {zone}", "POST",
            lambda: self._client("tpu").create_node(
                parent=self._tpu_parent(zone), node_id=node_id, node=tpu_v2.Node(node)
            ),
        )  # fmt: skip
        self._wait_lro(f"creating TPU {node_id} in {zone}", operation)

    def _wait_lro(self, action: str, operation: Any) -> None:
        deadline = self._clock() + self.config.provision_timeout
        delay = min(0.05, self.config.poll_interval)
        while not self._call(f"{action} (polling)", "GET", operation.done):
            if self._clock() > deadline:
                raise GcpAPIError(action, None, ["TIMEOUT"], "the operation did not finish in time")
            self._sleep(delay)
            delay = min(delay * 2, self.config.poll_interval)
        error = operation.exception()
        if isinstance(error, gexc.GoogleAPICallError):
            raise from_google(action, error)
        if error is not None:
            raise GcpAPIError(action, None, [], str(error))

    def tpu_types(self, zone: str) -> frozenset[str]:
        """The TPU accelerator types (slices) ``zone`` offers; none where the TPU API has no such location."""
        try:
            listed = self._call(
                f"listing TPU types in {zone}", "GET",
                lambda: list(self._client("tpu").list_accelerator_types(parent=self._tpu_parent(zone))),
            )  # fmt: skip
        except GcpAPIError as exc:
            if exc.status == 404:
                return frozenset()
            raise
        return frozenset(str(t.type_) or str(t.name).rsplit("/", 1)[-1] for t in listed)

    def tpu(self, zone: str, node_id: str) -> Any | None:
        try:
            return self._call(
                f"reading TPU {node_id}", "GET",
                lambda: self._client("tpu").get_node(name=f"{self._tpu_parent(zone)}/nodes/{node_id}"),
            )  # fmt: skip
        except GcpAPIError as exc:
            if exc.status == 404:
                return None
            raise

    def tpus(self, zone: str) -> list[Any]:
        return self._call(
            f"listing TPUs in {zone}",
            "GET",
            lambda: list(self._client("tpu").list_nodes(parent=self._tpu_parent(zone))),
        )

    def delete_tpu(self, zone: str, node_id: str) -> None:
        try:
            operation = self._call(
                f"deleting TPU {node_id}", "DELETE",
                lambda: self._client("tpu").delete_node(name=f"{self._tpu_parent(zone)}/nodes/{node_id}"),
            )  # fmt: skip
            self._wait_lro(f"deleting TPU {node_id}", operation)
        except GcpAPIError as exc:
            if exc.status != 404:
                raise
