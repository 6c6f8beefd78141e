"""The base of every validated file's model (fleets, scenarios): unknown fields are refused, with
pydantic's message naming them, and a model once read is not changed."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
