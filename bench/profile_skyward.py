#!/usr/bin/env python3
"""Where does Skyward's time go? Two views of the ``>>`` round trip and the 10k gather.

    python bench/profile_skyward.py trace   # per-stage breakdown across client, agent, worker
    python bench/profile_skyward.py pyspy   # py-spy profiles of the client, an agent, a worker

``trace`` runs with bench/profiling/site on PYTHONPATH, so every process of the pool
(client, each node's agent, each worker) records when a task passes each stage; the
stages are subtracted across processes (CLOCK_MONOTONIC is machine-wide).
``pyspy`` samples every process of the pool while it runs the same workloads and prints
each process's hottest functions. Output goes to bench/.work/profiles/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import env  # noqa: E402
from bench.stats import median, percentile  # noqa: E402

PROFILES = env.WORK / "profiles"
SITE = env.BENCH / "profiling" / "site"


# -- trace ------------------------------------------------------------------------------


def _load_events(directory: Path) -> dict[str, list[tuple[str, list[int], int]]]:
    by_file: dict[str, list[tuple[str, list[int], int]]] = {}
    for path in sorted(directory.glob("*.jsonl")):
        events = [tuple(json.loads(line)) for line in path.read_text().splitlines()]
        by_file[path.stem] = sorted(events, key=lambda e: e[2])  # type: ignore[arg-type,return-value]
    return by_file


# (label, from stage, to stage): consecutive stages of one ``>>`` on the direct path
HOPS: tuple[tuple[str, str, str], ...] = (
    ("client: fn(x) >> pool until payload build", "client.call_start", "client.payload_start"),
    ("client: payload (cloudpickle fn + args)", "client.payload_start", "client.payload_end"),
    ("client: pool.run() bookkeeping until client.run()", "client.payload_end", "client.call_enter"),
    ("client: reserve worker, socket, pack header", "client.call_enter", "client.send"),
    ("client: send_multipart call", "client.send", "client.sent"),
    ("client send returned -> worker poll returns", "client.sent", "worker.poll_return"),
    ("worker: poll returned -> task unpacked", "worker.poll_return", "worker.recv"),
    ("worker: unpickle args", "worker.recv", "worker.loads_end"),
    ("worker: run fn + pickle result", "worker.loads_end", "worker.send"),
    ("worker: send_multipart call", "worker.send", "worker.sent"),
    ("worker send returned -> client poll returns", "worker.sent", "client.poll_return"),
    ("client: poll returned -> results unpacked", "client.poll_return", "client.recv"),
    ("client: unpickle result", "client.recv", "client.loads_end"),
    ("client: client.run() exit + progress + return", "client.loads_end", "client.call_end"),
)


def _first_after(events: Sequence[tuple[str, list[int], int]], stage: str, t: int) -> int | None:
    for s, _, te in events:
        if s == stage and te >= t:
            return te
    return None


def analyse_trace(directory: Path) -> None:
    files = _load_events(directory)
    client = next(events for name, events in files.items() if name.startswith("client"))
    workers = [events for name, events in files.items() if name.startswith("worker")]
    t_latency = next(t for s, _, t in client if s == "phase.latency")
    t_gather = next(t for s, _, t in client if s == "phase.gather")
    worker_by_task: dict[int, dict[str, int]] = defaultdict(dict)
    for events in workers:
        # Events without task ids belong to the task being run (after its recv), except
        # the poll that returned just before a recv, which is that task's arrival.
        current: list[int] = []
        last_poll = 0
        for stage, ids, t in events:
            if t < t_latency or t >= t_gather:
                continue
            if stage == "worker.poll_return":
                last_poll = t
                continue
            if stage == "worker.recv":
                current = ids
                for task in ids:
                    worker_by_task[task].setdefault("worker.poll_return", last_poll)
            for task in ids or current:
                worker_by_task[task].setdefault(stage, t)

    # -- latency: one task in flight on the caller's own socket
    hops: dict[str, list[float]] = defaultdict(list)
    window: list[tuple[str, list[int], int]] = []
    for event in (e for e in client if t_latency <= e[2] < t_gather):
        window.append(event)
        if event[0] != "client.call_end":
            continue
        stages: dict[str, int] = {}
        task = -1
        for stage, ids, t in window:
            stages.setdefault(stage, t)
            if stage == "client.send":
                task = ids[0]
        window = []
        for stage, t in worker_by_task.get(task, {}).items():
            stages.setdefault(stage, t)
        if all(s in stages for _, a, b in HOPS for s in (a, b)):
            for label, a, b in HOPS:
                hops[label].append((stages[b] - stages[a]) / 1e3)
            hops["total"].append((stages["client.call_end"] - stages["client.call_start"]) / 1e3)
    n = len(hops["total"])
    if not n:
        raise SystemExit(f"no complete >> round trip in the trace ({directory}): the hooks no longer match the core")
    print(f"\n== >> round trip, stage by stage ({n} calls, one in flight; us) ==")
    print(f"{'stage':48} {'median':>8} {'p90':>8} {'share':>6}")
    total = median(hops["total"])
    for label, _, _ in HOPS:
        m = median(hops[label])
        print(f"{label:48} {m:8.1f} {percentile(hops[label], 90):8.1f} {m / total:6.0%}")
    print(f"{'total (call_start -> call_end)':48} {total:8.1f} {percentile(hops['total'], 90):8.1f}")

    # -- gather: a timeline of the batch
    g = [e for e in client if e[2] >= t_gather]
    t0 = next(t for s, _, t in g if s == "gather.start")
    t_end = next(t for s, _, t in g if s == "gather.end")
    wall = (t_end - t0) / 1e9

    def at(t: int | None) -> str:
        return "-" if t is None else f"{(t - t0) / 1e6:8.1f} ms"

    def total_of(start: str, end: str, events: Sequence[tuple[str, list[int], int]]) -> float:
        opened: int | None = None
        spent = 0
        for s, _, t in events:
            if s == start:
                opened = t
            elif s == end and opened is not None:
                spent += t - opened
                opened = None
        return spent / 1e6

    sends = [(t, len(ids)) for s, ids, t in g if s == "client.send"]
    recvs = [(t, len(ids)) for s, ids, t in g if s == "client.recv"]
    n_tasks = sum(k for _, k in recvs)
    print(f"\n== gather of {n_tasks} tasks: timeline (t=0 at gather start) ==")
    print(f"first payload built                  {at(_first_after(g, 'client.payload_end', t0))}")
    print(f"submit_many called (all payloads)    {at(_first_after(g, 'client.submit_start', t0))}")
    print(f"I/O thread woken                     {at(_first_after(g, 'io.wake_start', t0))}")
    print(f"first chunk sent                     {at(sends[0][0] if sends else None)}")
    print(f"first results received               {at(recvs[0][0] if recvs else None)}")
    print(f"last chunk sent                      {at(sends[-1][0] if sends else None)}")
    print(f"last results received                {at(recvs[-1][0] if recvs else None)}")
    print(f"gather returns                       {at(t_end)}")
    print(f"wall {wall:.3f} s = {n_tasks / wall:,.0f} tasks/s")
    print(
        f"chunks sent: {len(sends)} (median {median([k for _, k in sends]):.0f} tasks); "
        f"result messages: {len(recvs)} (median {median([k for _, k in recvs]):.0f} results)"
    )
    print("client CPU spent (ms):")
    print(
        f"  building payloads (ComputePool._payload)   {total_of('client.payload_start', 'client.payload_end', g):8.1f}"
    )
    print(
        f"  submit_many (futures, lock, wake)          {total_of('client.submit_start', 'client.submit_end', g):8.1f}"
    )
    print(f"  I/O thread: resolving futures (_resolve)   {total_of('io.resolve_start', 'io.resolve_end', g):8.1f}")
    print(f"    of which unpickling results (loads)      {total_of('client.loads_start', 'client.loads_end', g):8.1f}")
    for i, events in enumerate(workers):
        w = [e for e in events if e[2] >= t0]
        busy = 0
        outstanding: set[int] = set()
        mark = 0
        for stage, ids, t in w:
            if stage == "worker.recv":
                if not outstanding:
                    mark = t
                outstanding.update(ids)
            elif stage == "worker.send":
                busy += t - mark
                mark = t
                outstanding.difference_update(ids)
        loads = total_of("worker.loads_start", "worker.loads_end", w)
        dumps = total_of("worker.dumps_start", "worker.dumps_end", w)
        print(
            f"worker {i}: busy {busy / 1e6:7.1f} ms of {wall * 1e3:.0f} ms ({busy / 1e9 / wall:.0%}); "
            f"unpickling {loads:.1f} ms, pickling results {dumps:.1f} ms"
        )
    print(f"\ntrace files: {directory}")


def trace(calls: int, gather_n: int) -> None:
    """Re-run this script with the tracing sitecustomize on PYTHONPATH (the pool's
    processes inherit it), then analyse what every process wrote."""
    out = PROFILES / f"trace-{int(time.time())}"
    out.mkdir(parents=True, exist_ok=True)
    run_env = dict(os.environ, BENCH_TRACE_DIR=str(out))
    run_env["PYTHONPATH"] = os.pathsep.join([str(SITE), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    subprocess.run(
        [sys.executable, __file__, "_traced", "--calls", str(calls), "--gather", str(gather_n)],
        env=run_env,
        check=True,
    )
    analyse_trace(out)


def _traced_workload(calls: int, gather_n: int) -> None:
    env.prepare_environment()
    import skyward as sky
    from bench.profiling import trace_hooks
    from bench.workload import inc

    fn = sky.compute(inc)
    with sky.ComputePool(provider=sky.Local(), nodes=2, display="quiet") as pool:
        for i in range(200):
            fn(i) >> pool
        sky.gather(*(fn(i) for i in range(1000))) >> pool
        time.sleep(0.2)
        trace_hooks.record("phase.latency")
        for i in range(calls):
            trace_hooks.record("client.call_start")
            fn(i) >> pool
            trace_hooks.record("client.call_end")
        time.sleep(0.3)
        trace_hooks.record("phase.gather")
        trace_hooks.record("gather.start")
        sky.gather(*(fn(i) for i in range(gather_n))) >> pool
        trace_hooks.record("gather.end")


# -- py-spy -----------------------------------------------------------------------------


def _pool_processes() -> dict[str, int]:
    """Every agent and worker process of this client's pools, by role name."""
    import psutil

    found: dict[str, int] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
            # a worker forked from its agent keeps the agent's command line; its name says
            forked = child.name() == "skyward-worker"
        except psutil.Error:
            continue
        if forked or "skyward.agent.worker" in cmd:
            found[f"worker{sum(k.startswith('worker') for k in found)}"] = child.pid
        elif "skyward.agent" in cmd:
            found[f"agent{sum(k.startswith('agent') for k in found)}"] = child.pid
    return found


def _record(pid: int, seconds: float, out: Path, threads: bool) -> subprocess.Popen[bytes]:
    py_spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    cmd = [py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "1000",
           "--format", "raw", "--output", str(out), "--nonblocking"]  # fmt: skip
    if threads:
        cmd.append("--threads")
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def summarise_raw(path: Path, top: int = 18) -> str:
    """Self and inclusive time of the hottest functions in a py-spy raw (collapsed) file."""
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    per_thread: Counter[str] = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        count = int(count_text)
        frames = stack.split(";")
        total += count
        per_thread[frames[0]] += count
        leaf = frames[-1]
        self_time[leaf] += count
        for frame in set(frames[1:]):
            inclusive[frame] += count
    lines = [f"{path.name}: {total} samples"]
    if len(per_thread) > 1:
        lines.append("  by thread: " + ", ".join(f"{k} {v / total:.0%}" for k, v in per_thread.most_common(6)))
    lines.append("  self time:")
    lines += [f"    {v / total:6.1%}  {k}" for k, v in self_time.most_common(top)]
    lines.append("  inclusive:")
    lines += [f"    {v / total:6.1%}  {k}" for k, v in inclusive.most_common(top)]
    return "\n".join(lines)


def pyspy(seconds: float) -> None:
    env.prepare_environment()
    import skyward as sky
    from bench.workload import inc

    out = PROFILES / f"pyspy-{int(time.time())}"
    out.mkdir(parents=True, exist_ok=True)
    fn = sky.compute(inc)
    workloads: dict[str, Callable[[Any], object]] = {
        "latency": lambda pool: [fn(i) >> pool for i in range(10**9)],
        "gather": lambda pool: [sky.gather(*(fn(i) for i in range(10_000))) >> pool for _ in range(10**9)],
    }
    for name, workload in workloads.items():
        with sky.ComputePool(provider=sky.Local(), nodes=2, display="quiet") as pool:
            for i in range(200):
                fn(i) >> pool
            pids = {"client": os.getpid(), **_pool_processes()}
            stop = threading.Event()

            def loop(w: Callable[[Any], object] = workload, p: Any = pool, stop: threading.Event = stop) -> None:
                try:
                    w(p)
                except Exception:
                    if not stop.is_set():
                        raise

            # the workload runs in a thread until the pool closes under it; the client's
            # samples are split by thread, so the workload thread and the I/O thread show apart
            thread = threading.Thread(target=loop, name=f"workload-{name}", daemon=True)
            thread.start()
            time.sleep(0.5)
            import psutil

            procs = {role: psutil.Process(pid) for role, pid in pids.items()}
            cpu_before = {role: sum(p.cpu_times()[:2]) for role, p in procs.items()}
            wall_before = time.monotonic()
            recorders = {
                role: _record(pid, seconds, out / f"{name}-{role}.txt", threads=(role == "client"))
                for role, pid in pids.items()
            }
            for role, proc in recorders.items():
                _, err = proc.communicate(timeout=seconds + 60)
                if proc.returncode != 0:
                    print(f"py-spy on {role} failed: {err.decode(errors='replace')[-400:]}")
            wall = time.monotonic() - wall_before
            cpu = {role: (sum(p.cpu_times()[:2]) - cpu_before[role]) / wall for role, p in procs.items()}
            stop.set()
        print(f"\n== {name}: CPU use while sampling (1.0 = one core), py-spy's own cost included ==")
        print("  " + ", ".join(f"{role} {share:.2f}" for role, share in cpu.items()))
        for role in pids:
            path = out / f"{name}-{role}.txt"
            if path.exists():
                print(f"\n== {name}: {role} ==\n{summarise_raw(path)}")
    print(f"\nprofiles: {out}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/profile_skyward.py", description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["trace", "pyspy", "_traced"])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--gather", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=8)
    args = parser.parse_args(argv)
    if args.what == "trace":
        trace(args.calls, args.gather)
    elif args.what == "_traced":
        _traced_workload(args.calls, args.gather)
    else:
        pyspy(args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
