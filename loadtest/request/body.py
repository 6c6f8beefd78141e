"""The request body a trace row becomes: one place, for the replay (sent as bytes) and for the
planner (handed to the simulator's model of the server as a dict)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}


def request_body(row: dict, model: str, messages: Callable[[str], Any] = orjson.loads,
                 stream_options: Any = STREAM_OPTIONS) -> dict:
    """A streamed completion or chat body for `row` (a trace row); `messages` turns the row's
    messages JSON into the body's value, and `stream_options` is the value sent (the replay
    passes both through pre-encoded, as orjson Fragments)."""
    body = {"model": model, "max_tokens": row["max_tokens"], "temperature": row["temperature"], "stream": True,
            "stream_options": stream_options}
    if row["ignore_eos"]:
        body["ignore_eos"] = True
    if row["api"] == "chat":
        body["messages"] = messages(row["messages"])
    else:
        body["prompt"] = row["prompt"]
    return body
