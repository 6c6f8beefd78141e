"""A conversation's turns in one replay process: turn N+1 is sent `think_s` after turn N's answer
ended, carrying the messages turn N sent, then the answer the server gave (in place of the one the
trace's source recorded), then the turn's own new messages. A turn whose turn before it failed is
not sent (it would ask about an answer that never came), and says so.

No Locust and no gevent: the replay gives it the event type to wait on (gevent's), and a test a
thread's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class Event(Protocol):
    def set(self) -> None: ...

    def wait(self, timeout: float | None = None) -> bool: ...


@dataclass(frozen=True)
class Answer:
    """How a turn ended, as the next turn needs it."""

    status: str                      # the turn's record status (ok, error, timeout, not_sent)
    ended: float                     # monotonic seconds: its last token, or when it ended without one
    messages: tuple[dict, ...] = ()  # what it sent, then its answer: the next turn's prefix (ok only)


def next_messages(prefix: tuple[dict, ...], recorded: list[dict]) -> list[dict]:
    """A later turn's messages: the conversation as replayed so far (`prefix`: the turn before's
    messages and the answer it got), then the trace's messages for this turn past that point (the
    trace holds the conversation as its source had it, the source's answer where ours now is)."""
    return [*prefix, *recorded[len(prefix):]]


def with_answer(sent: list[dict], text: str) -> tuple[dict, ...]:
    """The prefix the next turn carries: what this turn sent, and the answer it got."""
    return (*sent, {"role": "assistant", "content": text})


class Conversations:
    """The turns of this process' conversations: each answer kept until the turn after it takes
    it (only for turns that have one: `followed`)."""

    def __init__(self, new_event: Callable[[], Event], followed: set[tuple[str, int]]) -> None:
        self._new_event = new_event
        self._followed = followed
        self._events: dict[tuple[str, int], Event] = {}
        self._answers: dict[tuple[str, int], Answer] = {}

    def followed(self, conversation: str, turn: int) -> bool:
        """Whether a later turn of the conversation waits for this one's answer."""
        return (conversation, turn) in self._followed

    def _event(self, key: tuple[str, int]) -> Event:
        if key not in self._events:
            self._events[key] = self._new_event()
        return self._events[key]

    def answered(self, conversation: str, turn: int, answer: Answer) -> None:
        key = (conversation, turn)
        if key in self._followed:
            self._answers[key] = answer
            self._event(key).set()

    def wait(self, conversation: str, turn: int, timeout: float | None) -> Answer | None:
        """The answer to the turn before `turn` (taken: nobody else needs it), or None when it did
        not come within `timeout` seconds."""
        key = (conversation, turn - 1)
        if not self._event(key).wait(timeout):
            return None
        self._events.pop(key, None)
        return self._answers.pop(key)


def first_turn_keys(conversations: list[str | None]) -> np.ndarray:
    """Per row, its own index, or for a conversation's turn the row of its first turn (rows in send
    order): what picks a row's shard and replica, so a conversation stays in one process and on one
    replica (whose prefix cache holds it)."""
    keys = np.arange(len(conversations))
    first: dict[str, int] = {}
    for i, c in enumerate(conversations):
        if c is not None:
            keys[i] = first.setdefault(c, i)
    return keys


def followed_turns(rows: Any) -> set[tuple[str, int]]:
    """(conversation, turn) of every turn that a later turn of the rows follows."""
    return {(c, t - 1) for c, t in rows if c is not None and t}
