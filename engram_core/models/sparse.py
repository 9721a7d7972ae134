"""A base for results whose optional keys are simply absent when they do not apply."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, SerializerFunctionWrapHandler, model_serializer


class Sparse(BaseModel):
    """Its JSON holds the required fields and the optional ones that were given: a depth-0 explore answer has no
    ``tables`` key rather than ``"tables": null``, as these answers always had. Rebuilt from that JSON, the same
    fields count as given, so the shape survives the daemon's socket both ways."""

    @model_serializer(mode="wrap")
    def _given_fields_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        fields = type(self).model_fields
        return {
            k: v
            for k, v in data.items()
            if k in self.model_fields_set or (k in fields and fields[k].is_required())
        }
