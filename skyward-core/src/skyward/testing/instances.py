"""Emulated cloud instances: a user-data script run as an isolated process tree.

:class:`EmulatedInstances` is cloud-neutral. Given an instance id, the instance's own
user-data text and a loopback address, it runs the script the way cloud-init would, as
root, inside:

* its own PID namespace (killing the namespace's first process ends every process of the
  instance, however it was started: the emulated machine "powers off");
* its own mount namespace with a private ``/tmp`` (instances never share or leave files
  in this machine's ``/tmp``), in which only the ``/tmp`` entries holding the test
  interpreter and its sources (a checkout cloned under ``/tmp``) stay visible;
* a clean environment (nothing of the test process leaks in: no cloud credentials), with
  ``HOME`` and ``SKYWARD_HOME`` in the instance's own directory, ``SKYWARD_BIND_HOST``
  set to its loopback address (an agent told to listen on every address of its machine,
  0.0.0.0, listens on that one: what 0.0.0.0 means on a machine of its own), and stub executables first
  on ``PATH`` (see ``stubs``): ``shutdown``/``poweroff`` end the instance through the
  ``terminate(instance_id)`` callback the cloud glue passes in and never this machine;
  ``apt-get`` installs nothing; ``uv`` is an offline mirror of the test environment
  (see ``uv_mirror``).

Cloud glue (tests/aws, and the DigitalOcean and Verda tests) watches its emulator for
instances that are running, fetches each one's user-data back from the emulator, and
calls :meth:`EmulatedInstances.start`; it calls :meth:`stop` when the emulator says an
instance was terminated, and points the driver's endpoint seam at
:meth:`EmulatedInstances.endpoint_for`.

Everything lives under a directory outside ``/tmp`` (``/var/tmp`` by default), because
``/tmp`` is replaced inside each instance; :meth:`close` removes it.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from skyward.testing.stubs import GUARDED, write_stubs
from skyward.testing.uv_mirror import uv_script

DEFAULT_AGENT_PORT = 16789
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_ABSOLUTE_GUARDED = re.compile(r"(?<![\w./-])/(?:usr/)?s?bin/(" + "|".join(map(re.escape, GUARDED)) + r")(?![\w-])")

# pid 1 of the instance: mount the private /tmp, run the user-data like cloud-init, and
# stay up afterwards (a real instance keeps running, and billing, when its script ends)
# $1 the instance's private /tmp, $2 its home, $3 its user-data, then the host's /tmp
# entries it must still see (a checkout under /tmp holds the interpreter and its sources):
# each is bound into the private /tmp first, and --rbind carries those binds along.
_INIT = (
    'for keep in "${@:4}"; do\n'
    '  mkdir -p "$1/${keep#/tmp/}" && mount --bind "$keep" "$1/${keep#/tmp/}" ||'
    ' { echo "[harness] cannot keep $keep visible" >&2; exit 97; }\n'
    "done\n"
    'mount --rbind "$1" /tmp || { echo "[harness] cannot mount a private /tmp" >&2; exit 97; }\n'
    'cd "$2"\n'
    '"$3"\n'
    'echo "[harness] user-data exited with status $?" >&2\n'
    "exec sleep infinity\n"
)


def host_tmp_entries(paths: Iterable[str]) -> list[str]:
    """The entries of the host's /tmp that ``paths`` lie in (``/tmp/a/b`` -> ``/tmp/a``):
    what an instance, which gets a private /tmp, must still see of the host's."""
    tmp = Path("/tmp")
    kept = {tmp / Path(p).relative_to(tmp).parts[0] for p in paths if p and _strictly_under(Path(p), tmp)}
    return sorted(str(k) for k in kept)


def _strictly_under(path: Path, directory: Path) -> bool:
    return path.is_absolute() and path != directory and path.is_relative_to(directory)


class UnsafeUserData(ValueError):
    """The user-data would reach a real power or package command by absolute path."""


@dataclass(frozen=True, slots=True)
class AgentEndpoint:
    """Where an emulated instance's agent listens (``endpoint`` is ``tcp://ip:port``)."""

    instance_id: str
    ip: str
    endpoint: str


@dataclass
class EmulatedInstance:
    instance_id: str
    ip: str
    directory: Path
    process: subprocess.Popen[bytes]
    started_at: float = field(default_factory=time.monotonic)
    stopping: bool = False  # stop() under way
    stopped: bool = False  # every process of the instance is gone
    stop_reason: str = ""
    requests_offset: int = 0
    scheduled: threading.Timer | None = None

    @property
    def control(self) -> Path:
        return self.directory / "control"

    @property
    def console(self) -> Path:
        return self.directory / "console.log"


def decode_user_data(data: bytes) -> str:
    """The script as cloud-init sees it: gzip-compressed user-data is unpacked first."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    text = data.decode()
    if text.startswith("Content-Type: multipart"):
        raise ValueError("multipart (MIME) user-data is not supported by the harness")
    return text


def check_user_data(text: str) -> None:
    """Refuse a script that names a real power or package command by its path."""
    match = _ABSOLUTE_GUARDED.search(text)
    if match is not None:
        raise UnsafeUserData(
            f"the user-data calls {match.group(0)} by absolute path; the harness would not intercept it"
        )
    if not text.startswith("#!"):
        raise ValueError("the user-data is not a script (no #! line); the harness runs scripts only")


class EmulatedInstances:
    """Runs instances' user-data as isolated local process trees (see the module docs).

    terminate:          called with the instance id when the instance powers itself off
                        (``shutdown``, ``poweroff``), after its process tree has stopped:
                        the cloud glue ends the instance in its emulator.
    root:               where instance directories go (must not be under ``/tmp``).
    agent_port:         the agent's port, for :meth:`endpoint_for`.
    shutdown_time_scale: multiplies delays of scheduled shutdowns (``shutdown -h +2``),
                        so a test can watch a TTL fire in seconds.
    extra_stubs:        more stub executables, name -> script (``{control}`` expanded).
    env:                extra environment for every instance.
    """

    def __init__(
        self,
        terminate: Callable[[str], None],
        *,
        root: Path | None = None,
        agent_port: int = DEFAULT_AGENT_PORT,
        shutdown_time_scale: float = 1.0,
        extra_stubs: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        python: str = sys.executable,
    ) -> None:
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            raise RuntimeError("emulated instances need root and unshare(1) (PID and mount namespaces)")
        if root is None:
            root = Path(tempfile.mkdtemp(prefix="skyward-harness-", dir="/var/tmp"))
            self._owns_root = True
        else:
            self._owns_root = False
        if Path(root).resolve().is_relative_to("/tmp"):
            raise ValueError(f"root={root}: must not be under /tmp (each instance gets a private /tmp)")
        self.root = Path(root)
        self.terminate_callback = terminate
        self.agent_port = agent_port
        self.shutdown_time_scale = shutdown_time_scale
        self.extra_stubs = dict(extra_stubs or {})
        self.env = dict(env or {})
        self.python = python
        self._keep = host_tmp_entries([python, str(Path(python).resolve()), *sys.path])
        self._uv = uv_script(python)
        self._addresses: dict[str, str] = {}
        self._instances: dict[str, EmulatedInstance] = {}
        self._lock = threading.RLock()
        self._closed = threading.Event()
        self.errors: list[str] = []
        self._watcher = threading.Thread(target=self._watch, name="harness-watch", daemon=True)
        self._watcher.start()

    # -- addresses -----------------------------------------------------------------------

    def address_for(self, instance_id: str) -> str:
        """The instance's loopback address: allocated on first use, stable afterwards, and
        free of listeners on the agent's ports when allocated (parallel test runs pick
        from all of 127.0.0.0/8 at random)."""
        with self._lock:
            if instance_id in self._addresses:
                return self._addresses[instance_id]
            taken = set(self._addresses.values())
            for _ in range(1000):
                ip = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"
                if ip not in taken and _bindable(ip, self.agent_port):
                    self._addresses[instance_id] = ip
                    return ip
            raise RuntimeError("no free loopback address found")

    def endpoint_for(self, instance_id: str) -> AgentEndpoint:
        ip = self.address_for(instance_id)
        return AgentEndpoint(instance_id, ip, f"tcp://{ip}:{self.agent_port}")

    # -- lifecycle -----------------------------------------------------------------------

    def start(
        self, instance_id: str, user_data: str, ip: str | None = None, env: Mapping[str, str] | None = None
    ) -> AgentEndpoint:
        """Run ``user_data`` as instance ``instance_id`` at ``ip`` (allocated if ``None``)."""
        check_user_data(user_data)
        with self._lock:
            if self._closed.is_set():
                raise RuntimeError("the harness is closed")
            if instance_id in self._instances:
                raise ValueError(f"instance {instance_id} was already started")
            if ip is None:
                ip = self.address_for(instance_id)
            else:
                self._addresses[instance_id] = ip
            directory = self.root / re.sub(r"[^\w.-]", "_", instance_id)
            for sub in ("control", "home", "tmp"):
                (directory / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
            extra = {"uv": self._uv, **self.extra_stubs}
            write_stubs(directory / "bin", directory / "control", self.python, extra)
            script = directory / "user-data"
            script.write_text(user_data)
            script.chmod(0o700)
            instance_env = {
                "PATH": f"{directory / 'bin'}:{SYSTEM_PATH}",
                "HOME": str(directory / "home"),
                "SKYWARD_HOME": str(directory / "home" / ".skyward"),
                "SKYWARD_BIND_HOST": ip,
                "LANG": "C.UTF-8",
                "USER": "root",
                "LOGNAME": "root",
                **self.env,
                **(env or {}),
            }
            with open(directory / "console.log", "ab") as console:
                process = subprocess.Popen(
                    [
                        "unshare", "--fork", "--pid", "--kill-child=SIGKILL", "--mount-proc",
                        "--propagation", "private", "--",
                        "bash", "-c", _INIT, "init", str(directory / "tmp"), str(directory / "home"), str(script),
                        *self._keep,
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=console,
                    stderr=subprocess.STDOUT,
                    env=instance_env,
                    start_new_session=True,
                    close_fds=True,
                )  # fmt: skip
            self._instances[instance_id] = EmulatedInstance(instance_id, ip, directory, process)
            return AgentEndpoint(instance_id, ip, f"tcp://{ip}:{self.agent_port}")

    def stop(self, instance_id: str, reason: str = "terminated") -> None:
        """End the instance's process tree (the cloud terminated or stopped it)."""
        with self._lock:
            instance = self._instances.get(instance_id)
            if instance is None or instance.stopping:
                return
            instance.stopping = True
            instance.stop_reason = reason
            if instance.scheduled is not None:
                instance.scheduled.cancel()
        namespace = _pid_namespace_of_child(instance.process.pid)
        # unshare ignores SIGTERM while it waits; SIGKILL ends it, and --kill-child then
        # kills the namespace's pid 1, which takes every process of the instance with it
        try:
            os.killpg(instance.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        instance.process.wait(timeout=10)
        deadline = time.monotonic() + 10
        while namespace is not None and _namespace_members(namespace) and time.monotonic() < deadline:
            time.sleep(0.02)  # the kernel ends the namespace's processes asynchronously
        instance.stopped = True

    def is_running(self, instance_id: str) -> bool:
        instance = self._instances.get(instance_id)
        if instance is None or instance.stopped:
            return False
        # while stop() waits for the namespace to empty, the instance still counts as running
        return instance.stopping or instance.process.poll() is None

    def started(self) -> list[str]:
        return list(self._instances)

    def running(self) -> list[str]:
        return [i for i in self._instances if self.is_running(i)]

    def instance(self, instance_id: str) -> EmulatedInstance:
        return self._instances[instance_id]

    def log(self, instance_id: str) -> str:
        """What the instance printed (its "console output")."""
        return self._instances[instance_id].console.read_text(errors="replace")

    def calls(self, instance_id: str) -> list[dict[str, object]]:
        """Every stub call the instance made: ``{"argv": [...], "env": {...}}``."""
        path = self._instances[instance_id].control / "calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]

    def wait_listening(self, instance_id: str, timeout: float = 60.0) -> AgentEndpoint:
        """Wait until the instance's agent port accepts connections."""
        endpoint = self.endpoint_for(instance_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((endpoint.ip, self.agent_port), timeout=1):
                    return endpoint
            except OSError:
                time.sleep(0.1)
        raise TimeoutError(f"{instance_id} did not listen within {timeout:g} s:\n{self.log(instance_id)[-3000:]}")

    def close(self) -> None:
        self._closed.set()
        for instance_id in list(self._instances):
            self.stop(instance_id, reason="harness closed")
        self._watcher.join(timeout=5)
        if self._owns_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> EmulatedInstances:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- power requests from the stubs --------------------------------------------------------

    def _watch(self) -> None:
        while not self._closed.is_set():
            with self._lock:
                instances = [i for i in self._instances.values() if not i.stopping]
            for instance in instances:
                for request in self._new_requests(instance):
                    self._handle(instance, request)
            self._closed.wait(0.05)

    def _new_requests(self, instance: EmulatedInstance) -> list[dict[str, object]]:
        path = instance.control / "requests.jsonl"
        try:
            with open(path, "rb") as f:
                f.seek(instance.requests_offset)
                data = f.read()
        except FileNotFoundError:
            return []
        complete = data[: data.rfind(b"\n") + 1]
        instance.requests_offset += len(complete)
        return [json.loads(line) for line in complete.splitlines() if line.strip()]

    def _handle(self, instance: EmulatedInstance, request: Mapping[str, object]) -> None:
        action = request.get("action")
        if action == "terminate":
            self._power_off(instance.instance_id, f"powered off ({' '.join(map(str, request['command']))})")  # type: ignore[call-overload]
        elif action == "schedule":
            if instance.scheduled is not None:
                instance.scheduled.cancel()
            delay = float(request["delay"]) * self.shutdown_time_scale  # type: ignore[arg-type]
            timer = threading.Timer(
                delay, self._power_off, (instance.instance_id, f"scheduled shutdown after {delay:g} s")
            )
            timer.daemon = True
            instance.scheduled = timer
            timer.start()
        elif action == "cancel" and instance.scheduled is not None:
            instance.scheduled.cancel()
            instance.scheduled = None

    def _power_off(self, instance_id: str, reason: str) -> None:
        # the machine goes down first, then its cloud notices: by the time the emulator
        # reports the instance off or terminated, none of its processes runs any more
        self.stop(instance_id, reason=reason)
        try:
            self.terminate_callback(instance_id)
        except Exception as error:  # recorded for the test to see
            self.errors.append(f"terminate({instance_id}) failed: {error!r}")


def _pid_namespace_of_child(pid: int) -> str | None:
    """The PID namespace of ``pid``'s first child (the instance's pid 1), or ``None``."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return os.readlink(f"/proc/{children[0]}/ns/pid") if children else None
    except OSError:
        return None


def _namespace_members(namespace: str) -> list[int]:
    members = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "pid") == namespace:
                    members.append(int(entry.name))
            except OSError:
                continue
    return members


def _bindable(ip: str, port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind((ip, port))
        except OSError:
            return False
    return True
