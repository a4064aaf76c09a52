"""While a task runs long, a worker still answers its client.

A worker runs tasks on its main thread and reads its socket between them, so a RECALL
(the client taking back tasks that wait behind a long one, to run them on an idle
worker, or because nobody wants them any more) would otherwise wait for the long task to
end. Once a task has run ``WATCH_AFTER`` seconds, this thread takes the socket (a lock
hands it over; the main thread does not touch the socket while user code runs) and
handles what arrives until the task ends. Quick tasks never engage it: their only cost
is a few attribute writes and a lock release and acquire (0.2 us a task, measured with
200,000 ``task_begins``/``task_ends`` pairs on this machine).

The thread sleeps until the running task could be long (or, while none runs, for
``after``), rather than waking every 5 ms: an idle worker's CPU fell from 0.6-0.7% of a
core to 0.2-0.4% (a 4-node Local pool, 10 s, psutil), and the thread still wakes as a
task reaches ``after`` (the sleep ends when the task running now would; one that began
during an idle sleep is measured from its own start at the next wake).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import zmq

WATCH_AFTER = 0.02  # a task this old is long: the client may want to take back what waits behind it
_LONGEST_SLEEP = 1.0  # a closed watch's thread ends within this (a test's ``after`` may be days)


class SocketWatch:
    def __init__(
        self,
        context: zmq.Context[zmq.Socket[bytes]],
        tasks: zmq.Socket[bytes],
        handle: Callable[[], None],
        engage: Callable[[], None] | None = None,
        after: float = WATCH_AFTER,
    ):
        self._after = after  # how long a task runs before this thread takes the socket
        self._tasks = tasks
        self._handle = handle  # reads and handles every waiting message on ``tasks``
        self._engage = engage  # runs once as the watch takes the socket (a stream sends what waits)
        self._io = threading.Lock()  # whoever holds it may use ``tasks``
        self._io.acquire()  # the main thread, except while a task runs
        address = f"inproc://skyward-watch-{id(self)}"
        self._wake_recv = context.socket(zmq.PAIR)
        self._wake_recv.bind(address)
        self._wake_send = context.socket(zmq.PAIR)
        self._wake_send.connect(address)
        self._busy = False
        self._since = 0.0
        self._seq = 0
        self._watching = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="skyward-watch", daemon=True)
        self._thread.start()

    def task_begins(self) -> None:
        self._seq += 1
        self._since = time.monotonic()
        self._busy = True
        self._io.release()

    def task_ends(self) -> None:
        self._busy = False
        if self._watching:
            self._wake_send.send(b"")
        self._io.acquire()

    def close(self) -> None:
        self._closed = True

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._tasks, zmq.POLLIN)
        poller.register(self._wake_recv, zmq.POLLIN)
        while not self._closed:
            seq = self._seq
            if not self._busy:
                time.sleep(min(self._after, _LONGEST_SLEEP))
                continue
            left = self._since + self._after - time.monotonic()
            if left > 0:
                time.sleep(min(left, _LONGEST_SLEEP))
                continue
            self._watching = True
            with self._io:
                try:
                    if self._busy and self._seq == seq:
                        if self._engage is not None:
                            self._engage()
                        while True:
                            ready = dict(poller.poll())
                            if self._tasks in ready:
                                self._handle()
                            if self._wake_recv in ready:
                                break
                finally:
                    self._watching = False
                    while self._wake_recv.poll(0):
                        self._wake_recv.recv()
