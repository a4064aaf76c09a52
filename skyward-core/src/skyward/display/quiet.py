"""The "quiet" display: only errors, on stderr."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.text import Text

from skyward.display import formatting as fmt
from skyward.display.base import DisplayBase
from skyward.events import Error, InstanceProvisioned, SkywardEvent


class QuietDisplay(DisplayBase):
    """Prints ``Error`` events and nothing else, to stderr unless given a console."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console if console is not None else Console(stderr=True)
        self._nodes: dict[str, int] = {}  # instance id -> node, to name the node in errors
        self._lock = threading.Lock()

    def __call__(self, event: SkywardEvent) -> None:
        match event:
            case InstanceProvisioned(instance_id=iid, node=node):
                with self._lock:
                    self._nodes[iid] = node
            case Error(message=message, instance_id=iid):
                where = "" if iid is None else f" ({fmt.node_label(self._nodes.get(iid), iid)})"
                self.console.print(
                    Text(f"skyward error{where}: {message}", style="red"),
                    soft_wrap=True,
                    highlight=False,
                )
            case _:
                pass
