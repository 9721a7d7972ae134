"""The daemon's answer line: a model is written by pydantic's own encoder inside the envelope, with the same JSON
values as the general encoder gives, on one line whatever the text holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from pydantic import BaseModel

from engram_core.wire.protocol import PROTOCOL_VERSION, encode, ok

TRICKY = 'a [/] b [bold]x[/bold] \\ back ✓ 🧠 \n\r\t\x00\x1b \u2028 \u2029 \u0085 é "quoted" ghp_' + "A" * 36


class Inner(BaseModel):
    text: str
    score: float


class Answer(BaseModel):
    items: list[Inner]
    when: datetime
    extra: dict[str, object]


class Counted(Answer):
    dumps: int = 0

    def model_dump_json(self, **kw: object) -> str:  # type: ignore[override]
        object.__setattr__(self, "dumps", self.dumps + 1)
        return super().model_dump_json(**kw)  # type: ignore[arg-type]


def test_a_model_answer_is_one_line_with_the_same_values() -> None:
    model = Answer(
        items=[Inner(text=TRICKY, score=0.1), Inner(text="", score=-3.5e-7)],
        when=datetime(2026, 11, 24, 12, 0, tzinfo=UTC),
        extra={"k": [1, None, TRICKY]},
    )
    line = ok({"id": TRICKY}, model)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    general = encode(
        {"v": PROTOCOL_VERSION, "id": {"id": TRICKY}, "ok": True, "result": model.model_dump(mode="json")}
    )
    assert json.loads(line) == json.loads(general)


def test_a_model_answer_goes_through_pydantics_encoder() -> None:
    model = Counted(items=[Inner(text=TRICKY, score=1.0)], when=datetime(2026, 1, 1, tzinfo=UTC), extra={})
    line = ok(1, model)
    assert model.dumps == 1
    assert json.loads(line)["result"]["items"][0]["text"] == TRICKY


def test_other_answers_keep_the_general_encoder() -> None:
    assert ok(2, {"a": [1, 2]}) == b'{"v":%d,"id":2,"ok":true,"result":{"a":[1,2]}}\n' % PROTOCOL_VERSION
    assert json.loads(ok(3, "pong"))["result"] == "pong"
