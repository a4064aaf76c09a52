"""A real HTTP server on 127.0.0.1 (free port) that fake cloud APIs build on.

It runs in a thread, logs every request, and can be told to misbehave: fail a call with
any status (``fail``), answer 429 (``rate_limit``), or answer slowly (``slow``). A fake
that sees a request its real counterpart would refuse answers the way the real API
would *and* records a ``violation``, so a test can also assert the provider never sent
one.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    query: Mapping[str, list[str]]
    headers: Mapping[str, str]  # lower-case names
    body: bytes
    client: str

    def arg(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[0] if values else None

    def json(self) -> Any:
        return json.loads(self.body or b"null")


@dataclass
class Response:
    status: int
    body: Any = None  # dict/list: JSON; str: text/plain; None: empty
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Rule:
    method: str | None
    path: re.Pattern[str] | None
    times: int | None  # None: forever
    after: int  # let this many matching calls through first
    seen: int = 0

    def matches(self, request: Request) -> bool:
        if self.method is not None and request.method != self.method:
            return False
        return self.path is None or bool(self.path.fullmatch(request.path))

    def fire(self) -> bool:
        """Whether this matching call is one the rule applies to (and count it)."""
        self.seen += 1
        if self.seen <= self.after:
            return False
        return self.times is None or self.seen - self.after <= self.times


@dataclass
class _Fault(_Rule):
    response: Response = field(default_factory=lambda: Response(500))
    process: bool = False  # carry the request out, then answer with the fault (a lost answer)


@dataclass
class _Delay(_Rule):
    seconds: float = 0.0


@dataclass(frozen=True)
class LoggedCall:
    method: str
    path: str
    status: int
    at: float


class FakeHTTPServer:
    """Subclasses implement ``route(request) -> Response``."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.calls: list[LoggedCall] = []
        self.violations: list[str] = []
        self._faults: list[_Fault] = []
        self._delays: list[_Delay] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeHTTPServer:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                fake._serve(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        host, port = self._server.server_address[:2]
        self.url = f"http://{host!s}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeHTTPServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class FakeCloud(FakeHTTPServer):
    """A fake cloud API whose machines an emulated-instance harness can run: hooks
    ``on_running(id, user_data, ip)`` / ``on_deleted(id)`` / ``address_for(id)``, and
    timers (a machine's boot steps) that ``stop`` cancels."""

    def __init__(self) -> None:
        super().__init__()
        self.on_running: Callable[[str, str, str], None] | None = None
        self.on_deleted: Callable[[str], None] | None = None
        # where a machine's address comes from: an emulated-instance harness hands out
        # loopback addresses with its agent port free; else the fake's own range
        self.address_for: Callable[[str], str] | None = None
        self._timers: list[threading.Timer] = []

    def later(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        """Call ``fn(*args)`` in ``delay`` seconds, unless the fake stops first."""
        timer = threading.Timer(delay, fn, args=args)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def stop(self) -> None:
        for timer in self._timers:
            timer.cancel()
        super().stop()

    # -- misbehaviour -------------------------------------------------------------------

    @staticmethod
    def _pattern(path: str | None) -> re.Pattern[str] | None:
        return None if path is None else re.compile(path)

    def fail(
        self,
        method: str | None,
        path: str | None,
        status: int = 500,
        body: Any = None,
        *,
        times: int | None = 1,
        after: int = 0,
        headers: Mapping[str, str] | None = None,
        process: bool = False,
    ) -> None:
        """The next ``times`` matching calls (after letting ``after`` through) get ``status``.
        ``path`` is a regular expression matched against the whole path. ``process=True``
        carries the request out first (the server acted; its answer was lost)."""
        response = Response(status, body, dict(headers or {}))
        with self.lock:
            self._faults.append(_Fault(method, self._pattern(path), times, after, response=response, process=process))

    def slow(
        self, seconds: float, method: str | None = None, path: str | None = None, *, times: int | None = None
    ) -> None:
        """Matching calls wait ``seconds`` before they are answered."""
        with self.lock:
            self._delays.append(_Delay(method, self._pattern(path), times, 0, seconds=seconds))

    def clear_faults(self) -> None:
        with self.lock:
            self._faults.clear()
            self._delays.clear()

    def count(self, method: str, path: str, status: int | None = None) -> int:
        """How many calls matched (``path`` a regular expression over the whole path)."""
        pattern = re.compile(path)
        with self.lock:
            return sum(
                1
                for c in self.calls
                if c.method == method and pattern.fullmatch(c.path) and (status is None or c.status == status)
            )

    def violation(self, why: str) -> None:
        with self.lock:
            self.violations.append(why)

    # -- serving --------------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        raise NotImplementedError

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else b""
        request = Request(
            method=handler.command,
            path=url.path,
            query=parse_qs(url.query, keep_blank_values=True),
            headers={k.lower(): v for k, v in handler.headers.items()},
            body=body,
            client=handler.client_address[0],
        )
        delay = 0.0
        response: Response | None = None
        process = False
        with self.lock:
            for rule in self._delays:
                if rule.matches(request) and rule.fire():
                    delay += rule.seconds
            for fault in self._faults:
                if fault.matches(request) and fault.fire():
                    response, process = fault.response, fault.process
                    break
        if delay:
            time.sleep(delay)
        if process:
            self.route(request)
        if response is None:
            try:
                response = self.route(request)
            except Exception as exc:  # a bug in the fake: show it, as a 500
                response = Response(500, {"message": f"fake API crashed: {type(exc).__name__}: {exc}"})
                self.violation(f"fake crashed on {request.method} {request.path}: {exc!r}")
        with self.lock:
            self.calls.append(LoggedCall(request.method, request.path, response.status, time.monotonic()))
        self._write(handler, response)

    @staticmethod
    def _write(handler: BaseHTTPRequestHandler, response: Response) -> None:
        headers = dict(response.headers)
        if response.body is None:
            payload = b""
        elif isinstance(response.body, str | bytes):
            payload = response.body.encode() if isinstance(response.body, str) else response.body
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
        else:
            payload = json.dumps(response.body).encode()
            headers.setdefault("Content-Type", "application/json; charset=utf-8")
        try:
            handler.send_response(response.status)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if payload and handler.command != "HEAD":
                handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test): nothing to answer


class LoopbackAddresses:
    """Hands out 127.A.B.n addresses: all of 127.0.0.0/8 is this machine's loopback, and a
    random A.B per fake keeps fakes that run at the same time apart."""

    def __init__(self, seed: int | None = None) -> None:
        import random

        rng = random.Random(seed)
        self.a = rng.randint(16, 250)
        self.b = rng.randint(0, 250)
        self._next = 1
        self._lock = threading.Lock()

    def allocate(self) -> tuple[str, str]:
        """(public, private) for one instance; both are loopback addresses."""
        with self._lock:
            n = self._next
            self._next += 1
        if n > 250:
            raise RuntimeError("this fake handed out all its loopback addresses")
        return f"127.{self.a}.{self.b}.{n}", f"127.{self.a}.{self.b + 1}.{n}"
