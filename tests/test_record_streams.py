"""What real clients and providers send, as the recorder must keep it: streamed tool calls with a
repeated or missing ``index``, and streams the caller stops reading (``break``, ``close()``,
abandoned inside a task, the process killed right after)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import auto
from auto.store import Store
from openai_mock import chunk, client, completion

CALLS = [("call_a", "get_weather", '{"city": "Paris"}'), ("call_b", "get_time", '{"tz": "CET"}')]
MSGS = [{"role": "user", "content": "weather and time in Paris?"}]


def _tool_call(cid: str, name: str, args: str) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


def _repeated_index() -> list[dict]:
    """Both calls complete in the first chunk, both under ``index: 0``."""
    deltas = [{"index": 0, **_tool_call(*c)} for c in CALLS]
    return [chunk({"role": "assistant", "content": None, "tool_calls": deltas}), chunk({}, "tool_calls")]


def _missing_index() -> list[dict]:
    """A provider that omits ``index`` on every delta: each call's id and name, then its arguments
    in two pieces."""
    out = [chunk({"role": "assistant", "content": None})]
    for cid, name, args in CALLS:
        out.append(chunk({"tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": ""}}]}))
        out.append(chunk({"tool_calls": [{"function": {"arguments": args[:5]}}]}))
        out.append(chunk({"tool_calls": [{"function": {"arguments": args[5:]}}]}))
    return out + [chunk({}, "tool_calls")]


def _two_indices() -> list[dict]:
    """The usual shape (index 0 then 1, arguments split): must not change."""
    out = [chunk({"role": "assistant", "content": None})]
    for i, (cid, name, args) in enumerate(CALLS):
        out.append(chunk({"tool_calls": [{"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": ""}}]}))
        out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": args}}]}))
    return out + [chunk({}, "tool_calls")]


@pytest.mark.parametrize("shape", [_repeated_index, _missing_index, _two_indices])
def test_streamed_parallel_tool_calls_equal_the_non_streamed_ones(tmp_path, shape):
    def answer(body, request):
        if body.get("stream"):
            return shape()
        return completion({"content": None, "tool_calls": [_tool_call(*c) for c in CALLS]})

    c = client(answer)
    with auto.recording(tmp_path / "s.db"):
        c.chat.completions.create(model="gpt-4o", messages=MSGS)
        for _ in c.chat.completions.create(model="gpt-4o", messages=MSGS, stream=True):
            pass
    with Store(tmp_path / "s.db") as st:
        plain, streamed = st.spans(kind="llm")
    assert streamed["attributes"]["auto.stream"] is True and streamed["status"] == "ok"
    assert streamed["output"]["tool_calls"] == plain["output"]["tool_calls"]
    assert [tc["id"] for tc in streamed["output"]["tool_calls"]] == ["call_a", "call_b"]
    assert [tc["function"]["name"] for tc in streamed["output"]["tool_calls"]] == ["get_weather", "get_time"]
    assert streamed["output"]["finish_reason"] == "tool_calls"


# ----------------------------------------------------------------------------- stopping early

TEXT = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": w}) for w in ("billing ", "is ", "the ", "label")]
USAGE = {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}


def _text_stream(body, request):
    tail = [chunk({}, "stop")]
    if (body.get("stream_options") or {}).get("include_usage"):
        tail.append(chunk(None, usage=USAGE))
    return TEXT + tail if body.get("stream") else completion({"content": "billing is the label"}, usage=USAGE)


def _llm_spans(path: Path) -> list[dict]:
    with Store(path) as st:
        return st.spans(kind="llm")


@pytest.mark.parametrize("how", ["break", "close", "abandon"])
@pytest.mark.parametrize("usage", [False, True])
def test_a_stream_stopped_early_ends_its_span_then_and_its_cost_is_unknown(tmp_path, how, usage):
    path = tmp_path / "s.db"
    c = client(_text_stream)
    kw = {"stream_options": {"include_usage": True}} if usage else {}
    seen_inside: list[int] = []
    with auto.recording(path):
        with auto.task("t", input={"q": 1}) as t:
            s = c.chat.completions.create(model="gpt-4o", messages=MSGS, stream=True, **kw)
            if how == "break":
                for _ in s:
                    break
                seen_inside.append(len(_llm_spans(path)))  # written when the caller stopped iterating
            elif how == "close":
                next(s)
                s.close()
                seen_inside.append(len(_llm_spans(path)))
            else:
                next(s)  # neither exhausted nor closed: the task's end ends it
            t.output = "billing"
    assert seen_inside == ([] if how == "abandon" else [1])
    (s_,) = _llm_spans(path)
    assert s_["status"] == "error" and s_["error"]["type"] == "stream_incomplete"
    assert s_["attributes"]["auto.stream.complete"] is False
    assert s_["attributes"]["auto.cost_usd_micros"] is None  # the usage chunk never came
    with Store(path) as st:
        (w,) = st.witnesses("t")
    assert w.attributes["auto.llm_calls"] == 1 and w.attributes["auto.llm_attempts"] == 1
    assert w.attributes["auto.cost_usd_micros"] is None  # streamed and billed: unknown, never 0
    with Store(path) as st:
        (task_span,) = st.spans(kind="task")
    assert s_["ended_ns"] <= task_span["ended_ns"]  # the model call ended before its task


def test_a_stream_read_to_the_end_keeps_its_cost(tmp_path):
    path = tmp_path / "s.db"
    c = client(_text_stream)
    with auto.recording(path):
        with auto.task("t", input={"q": 1}) as t:
            t.output = "".join(ch.choices[0].delta.content or "" for ch in
                               c.chat.completions.create(model="gpt-4o", messages=MSGS, stream=True,
                                                         stream_options={"include_usage": True}) if ch.choices)
    (s,) = _llm_spans(path)
    with Store(path) as st:
        (w,) = st.witnesses("t")
    assert s["status"] == "ok" and s["attributes"]["auto.cost_usd_micros"] == pytest.approx(12 * 2.5 + 4 * 10.0)
    assert w.attributes["auto.cost_usd_micros"] == pytest.approx(12 * 2.5 + 4 * 10.0)


def test_async_break_ends_the_span(tmp_path):
    path = tmp_path / "s.db"
    ac = client(_text_stream, async_=True)

    async def main() -> int:
        async with auto.task("t", input={}) as t:
            s = await ac.chat.completions.create(model="gpt-4o", messages=MSGS, stream=True)
            async for _ in s:
                break
            for _ in range(20):  # the event loop closes the abandoned async generator soon after
                await asyncio.sleep(0.01)
                if _llm_spans(path):
                    break
            t.output = "x"
            return len(_llm_spans(path))

    with auto.recording(path):
        assert asyncio.run(main()) == 1
    with Store(path) as st:
        (w,) = st.witnesses("t")
    assert w.attributes["auto.llm_calls"] == 1 and w.attributes["auto.cost_usd_micros"] is None


CHILD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, sys.argv[2])
    import auto
    from openai_mock import chunk, client, completion
    TEXT = [chunk({"role": "assistant", "content": ""})] + [chunk({"content": w}) for w in ("a ", "b ", "c")]
    c = client(lambda body, req: TEXT + [chunk({}, "stop")])
    rec = auto.start_recording(sys.argv[1])
    for _ in c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}], stream=True):
        break
    assert rec.wait_durable(30)  # the break ended the attempt: its span is journaled, not left to exit
    print("broke", flush=True)
    time.sleep(60)
""")


def test_break_then_kill_9_loses_nothing(tmp_path):
    path = tmp_path / "s.db"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(path), str(Path(__file__).parent)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "broke"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    (s,) = _llm_spans(path)
    assert s["error"]["type"] == "stream_incomplete"
    assert "stopped iterating" in s["error"]["message"]
