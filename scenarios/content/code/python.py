from __future__ import annotations

import asyncio
import dataclasses
import heapq
from collections.abc import AsyncIterator, Iterable


@dataclasses.dataclass(order=True)
class Job:
    priority: int
    name: str = dataclasses.field(compare=False)
    payload: dict = dataclasses.field(default_factory=dict, compare=False)


class Scheduler:
    def __init__(self, workers: int = 4) -> None:
        self._heap: list[Job] = []
        self._workers = workers
        self._done: dict[str, object] = {}

    def submit(self, job: Job) -> None:
        heapq.heappush(self._heap, job)

    async def _worker(self, handler) -> None:
        while self._heap:
            job = heapq.heappop(self._heap)
            self._done[job.name] = await handler(job)

    async def run(self, handler) -> dict[str, object]:
        await asyncio.gather(*(self._worker(handler) for _ in range(self._workers)))
        return self._done


async def batched(items: Iterable[int], size: int) -> AsyncIterator[list[int]]:
    batch: list[int] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def moving_average(values: list[float], window: int) -> list[float]:
    if window <= 0:
        raise ValueError("window must be positive")
    out, acc = [], 0.0
    for i, v in enumerate(values):
        acc += v
        if i >= window:
            acc -= values[i - window]
        out.append(acc / min(i + 1, window))
    return out
