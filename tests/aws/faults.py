"""A recording, fault-injecting HTTP proxy in front of moto.

Every AWS call the code under test makes goes through it (``AWS_ENDPOINT_URL`` points
here). It records EC2/IAM query calls (``Action`` plus the form parameters) and can
answer chosen calls with an EC2 error instead of forwarding them: that is how a test
makes "the second launch" fail, or spot capacity run out, for real boto3 code.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Params = dict[str, str]
# (action, params, how many calls of this action came before) -> (status, code, message) or None
Rule = Callable[[str, Params, int], tuple[int, str, str] | None]

_ERROR = (
    '<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
    "<Message>{message}</Message></Error></Errors><RequestID>fault-injected</RequestID></Response>"
)


@dataclass
class Call:
    action: str
    params: Params
    refused: str | None = None


@dataclass
class FaultProxy:
    target: str  # moto's url
    calls: list[Call] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    delays: dict[str, float] = field(default_factory=dict)  # action -> seconds each call is held (a slow API)
    most_in_flight: dict[str, int] = field(default_factory=dict)  # action -> most calls in the proxy at once

    def __post_init__(self) -> None:
        parsed = urllib.parse.urlparse(self.target)
        self._host, self._port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return None

            def _relay(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, headers, payload = proxy.handle(self.command, self.path, dict(self.headers), body)
                self.send_response(status)
                for key, value in headers:
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _relay

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def handle(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        action, params = "", {}
        if headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"):
            params = dict(urllib.parse.parse_qsl(body.decode(), keep_blank_values=True))
            action = params.get("Action", "")
        elif "X-Amz-Target" in headers:
            action = headers["X-Amz-Target"].rsplit(".", 1)[-1]
        if action:
            with self._lock:
                before = sum(1 for c in self.calls if c.action == action)
                call = Call(action, params)
                self.calls.append(call)
                for rule in self.rules:
                    fault = rule(action, params, before)
                    if fault is not None:
                        status, code, message = fault
                        call.refused = code
                        payload = _ERROR.format(code=code, message=message).encode()
                        return status, [("Content-Type", "text/xml")], payload
        with self._lock:
            self._in_flight[action] = self._in_flight.get(action, 0) + 1
            self.most_in_flight[action] = max(self.most_in_flight.get(action, 0), self._in_flight[action])
        try:
            time.sleep(self.delays.get(action, 0.0))
            return self._forward(method, path, headers, body)
        finally:
            with self._lock:
                self._in_flight[action] -= 1

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(self._host, self._port, timeout=60)
        try:
            forward = {k: v for k, v in headers.items() if k.lower() not in ("connection",)}
            connection.request(method, path, body=body, headers=forward)
            response = connection.getresponse()
            return response.status, list(response.getheaders()), response.read()
        finally:
            connection.close()

    # -- ready-made rules --------------------------------------------------------------------

    def fail_nth(self, action: str, n: int, code: str, message: str = "injected", status: int = 500) -> None:
        """Answer the ``n``-th call (1-based) of ``action`` with ``code``."""
        self.rules.append(lambda a, _p, before: (status, code, message) if a == action and before == n - 1 else None)

    def refuse_spot(self, times: int | None, code: str = "InsufficientInstanceCapacity") -> list[int]:
        """Refuse the first ``times`` spot launches (all of them when ``None``); returns a
        one-item list counting refusals so far."""
        refused = [0]

        def rule(action: str, params: Params, _before: int) -> tuple[int, str, str] | None:
            if action != "RunInstances" or params.get("InstanceMarketOptions.MarketType") != "spot":
                return None
            if times is not None and refused[0] >= times:
                return None
            refused[0] += 1
            return 500, code, "There is no Spot capacity available that matches your request."

        self.rules.append(rule)
        return refused

    def actions(self, action: str) -> list[Call]:
        with self._lock:
            return [c for c in self.calls if c.action == action]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
