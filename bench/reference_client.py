"""The reference load generator: plain asyncio + aiohttp, the technique of `vllm bench serve`.

    python bench/reference_client.py URL --closed 64 --seconds 10        # no-delay throughput
    python bench/reference_client.py URL --rate 100 --seconds 10         # paced, open loop

Prints one JSON line: requests, seconds, events, CPU share of a core while sending (start-up
excluded), and per request (X-Request-Id, TTFT ms).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp
import orjson

BODY = orjson.dumps({"model": "bench", "prompt": "hello", "max_tokens": 256, "stream": True,
                     "stream_options": {"include_usage": True, "continuous_usage_stats": True}})


async def one(session: aiohttp.ClientSession, url: str, rid: str, out: list) -> None:
    sent = time.perf_counter()
    ttft = None
    events = 0
    async with session.post(url, data=BODY, headers={"Content-Type": "application/json",
                                                     "X-Request-Id": rid}) as resp:
        async for line in resp.content:  # line by line, as bench serve does
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                break
            obj = orjson.loads(data)
            if obj["choices"] and obj["choices"][0].get("text"):
                events += 1
                if ttft is None:
                    ttft = (time.perf_counter() - sent) * 1e3
    out.append((rid, ttft, events))


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--closed", type=int, default=0, help="concurrency, closed loop")
    ap.add_argument("--rate", type=float, default=0.0, help="requests/s, open loop")
    ap.add_argument("--seconds", type=float, default=10.0)
    a = ap.parse_args()
    url = f"{a.url}/v1/completions"
    out: list = []
    conn = aiohttp.TCPConnector(limit=0)
    start, cpu0 = time.perf_counter(), time.process_time()
    stop = start + a.seconds
    async with aiohttp.ClientSession(connector=conn) as session:
        if a.closed:
            counter = iter(range(10**9))

            async def loop() -> None:
                while time.perf_counter() < stop:
                    await one(session, url, f"ref-{next(counter)}", out)

            await asyncio.gather(*(loop() for _ in range(a.closed)))
        else:
            tasks = []
            n = int(a.seconds * a.rate)
            for i in range(n):
                due = start + i / a.rate
                await asyncio.sleep(max(0.0, due - time.perf_counter()))
                tasks.append(asyncio.create_task(one(session, url, f"ref-{i}", out)))
            await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    print(json.dumps({"requests": len(out), "seconds": wall, "events": sum(e for _, _, e in out),
                      "cpu_share": (time.process_time() - cpu0) / wall,  # while sending, start-up excluded
                      "ttft": {rid: t for rid, t, _ in out}}))


if __name__ == "__main__":
    asyncio.run(main())
