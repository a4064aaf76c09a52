"""Small formatters shared by the displays: money, durations, sizes, node names."""

from __future__ import annotations

from skyward.events import Metrics


def money(usd: float) -> str:
    """``$1.23``; amounts under a cent keep four decimals, so a short run is not $0.00."""
    if usd == 0:
        return "$0.00"
    if abs(usd) < 0.01:
        return f"${usd:.4f}"
    return f"${usd:,.2f}"


def rate(usd_per_hour: float) -> str:
    return f"{money(usd_per_hour)}/h"


def duration(seconds: float) -> str:
    """``42s``, ``3m04s``, ``1h02m``: precise where it matters, short where it does not."""
    total = max(int(seconds), 0)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def gigabytes(mb: float) -> str:
    return f"{mb / 1024:.1f}"


def percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def memory(metrics: Metrics) -> str:
    """``8.0/16.0G``: compact, so the node table fits an 80-column terminal."""
    return f"{gigabytes(metrics.memory_used_mb)}/{gigabytes(metrics.memory_total_mb)}G"


def gpu(metrics: Metrics) -> str:
    if metrics.gpu_utilization is None:
        return "-"
    text = f"{metrics.gpu_utilization:.0f}%"
    if metrics.gpu_temperature is not None:
        text += f" {metrics.gpu_temperature:.0f}°C"
    return text


def gpu_memory(metrics: Metrics) -> str:
    if metrics.gpu_memory_used_mb is None or metrics.gpu_memory_total_mb is None:
        return "-"
    used = gigabytes(metrics.gpu_memory_used_mb)
    return f"{used}/{gigabytes(metrics.gpu_memory_total_mb)}G"


def node_label(node: int | None, instance_id: str | None) -> str:
    """``node 0`` when the node is known, else the instance id, else ``pool``."""
    if node is not None:
        return f"node {node}"
    return instance_id if instance_id else "pool"
