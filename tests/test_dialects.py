"""One site per request, however a client writes it (the request's canonical form).

``tests/dialects/requests.json`` holds the request bodies that the real ``openai`` client,
LangChain's ``ChatOpenAI`` and LiteLLM's ``completion`` sent to a loopback upstream for the same calls
(``tests/dialects/make_fixtures.py`` made it). The property test renders random requests the way
those clients and a client that writes every documented default do, and checks that they give
one site, one template and the same slot values.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from auto.sites import discover
from auto.sites.request import canonical_request, request_shape

from site_fixtures import chat_span

FIXTURES = Path(__file__).parent / "dialects"


def _spans(bodies: list[dict]) -> list[dict]:
    out = []
    for b in bodies:
        s = chat_span(b["messages"], "bug")
        s["input"] = b
        out.append(s)
    return out


def _sites(bodies: list[dict]) -> dict:
    d = discover(_spans(bodies))
    return {sid: (site.describe()["template"], [d.inputs[i] for i in d.members[sid]]) for sid, site in d.sites.items()}


@pytest.mark.parametrize("other", ["langchain", "litellm"])
def test_real_client_requests_give_the_openai_client_s_sites(other):
    """LangChain's ``ChatOpenAI`` and LiteLLM's ``completion`` (request bodies recorded from the real
    packages, ``make_fixtures.py``) give the sites, templates and slot values of the ``openai``
    client's requests for the same calls."""
    rec = json.loads((FIXTURES / "requests.json").read_text())
    # the clients do write them differently: LangChain temperature 0.0, stream false, its key order;
    # LiteLLM an assistant tool-call message without a content key (its plain requests are the openai client's)
    assert rec["openai"]["tools"] != rec[other]["tools"]
    for scenario in ("tickets", "tools"):
        a, b = rec["openai"][scenario], rec[other][scenario]
        sa, sb = _sites(a), _sites(b)
        assert sa and sa == sb, scenario
        # and the two clients' calls together are still those sites, each call once
        both = discover(_spans(a + b))
        assert set(both.sites) == set(sa)
        assert sum(len(m) for m in both.members.values()) == len(a) + len(b)


def test_documented_defaults_and_numbers_by_value():
    base = {"model": "m", "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}
    same = {"model": "m", "temperature": 0.0, "n": 1, "top_p": 1.0, "presence_penalty": 0.0, "frequency_penalty": 0,
            "logprobs": False, "stream": False, "response_format": {"type": "text"}, "stop": None, "tool_choice": "none",
            "messages": [{"content": [{"type": "text", "text": "hi"}], "role": " User ", "name": None}]}
    assert canonical_request(same) == canonical_request(base) == base
    assert request_shape(same)[1] == request_shape(base)[1]
    # values other than the documented default stay, and stay apart
    for k, v in (("temperature", 1.5), ("n", 2), ("top_p", 0.5), ("logprobs", True), ("presence_penalty", 0.5),
                 ("response_format", {"type": "json_object"}), ("tool_choice", "required")):
        assert request_shape({**base, k: v})[1] != request_shape(base)[1], k
    assert "temperature" not in canonical_request({**base, "temperature": 1.0})  # 1 is the documented default
    assert canonical_request({**base, "n": True}).get("n") is True  # a boolean is not the number 1
    # max_tokens is the deprecated name of max_completion_tokens
    assert request_shape({**base, "max_tokens": 5})[1] == request_shape({**base, "max_completion_tokens": 5.0})[1]
    assert request_shape({**base, "stop": "END"})[1] == request_shape({**base, "stop": ["END"]})[1]
    assert request_shape({**base, "modalities": ["text"]})[1] == request_shape(base)[1]
    # message text is never touched
    assert request_shape(base)[0] != canonical_request({**base, "messages": [{"role": "user", "content": "hi "}]})


def test_tool_schemas_and_tool_call_arguments_are_normalized():
    tool = {"type": "function", "function": {"name": "f", "description": "d", "parameters": {
        "type": "object", "properties": {"a": {"type": "number", "minimum": 0}, "b": {"type": "string"}},
        "required": ["a", "b"]}}}
    other = {"function": {"strict": False, "parameters": {"required": ["b", "a"], "properties": {
        "b": {"type": "string"}, "a": {"minimum": 0.0, "type": "number"}}, "type": "object"}, "description": "d",
        "name": "f"}, "type": "function"}
    hist = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1,"b":"x"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "r"}]
    hist2 = copy.deepcopy(hist)
    del hist2[1]["content"]
    hist2[1]["tool_calls"][0]["function"]["arguments"] = '{"a": 1, "b": "x"}'
    a = canonical_request({"model": "m", "tools": [tool], "tool_choice": "auto", "messages": hist})
    b = canonical_request({"model": "m", "tools": [other], "parallel_tool_calls": True, "messages": hist2})
    assert a == b
    assert "tool_choice" not in a  # auto is the default with tools
    assert a["messages"][1]["content"] is None  # as the openai client writes a tool-call message
    strict = copy.deepcopy(tool)
    strict["function"]["strict"] = True
    assert canonical_request({"model": "m", "tools": [strict], "messages": hist}) != a


# ----------------------------------------------------------------------------- property

_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=12)
_PARAMS = st.fixed_dictionaries({}, optional={
    "temperature": st.sampled_from([0, 0.2, 0.7, 1.5]), "top_p": st.sampled_from([0.5, 0.9]),
    "max_tokens": st.integers(1, 500), "seed": st.integers(0, 99), "presence_penalty": st.sampled_from([0.5, 1])})


def _openai(req: dict) -> dict:
    """As the ``openai`` client sends it: the caller's values as written (ints stay ints)."""
    body = {"model": req["model"], "messages": copy.deepcopy(req["messages"]), **req["params"]}
    if req["tools"]:
        body["tools"] = copy.deepcopy(req["tools"])
    return body


def _langchain(req: dict) -> dict:
    """As ``ChatOpenAI`` sends it (seen in ``requests.json``): floats for its float parameters,
    ``stream: false``, messages with ``content`` first, ``null`` content on tool-call messages,
    ``max_completion_tokens`` for ``max_tokens``, tool-call arguments re-dumped with spaces."""
    body: dict = {"model": req["model"], "stream": False}
    for k, v in req["params"].items():
        if k == "max_tokens":
            body["max_completion_tokens"] = v
        else:
            body[k] = float(v) if k in ("temperature", "top_p", "presence_penalty") else v
    msgs = []
    for m in req["messages"]:
        m = dict(sorted(m.items()))
        if m.get("tool_calls"):
            m["content"] = None
            m["tool_calls"] = [{"type": c["type"], "id": c["id"], "function": {
                "name": c["function"]["name"], "arguments": json.dumps(json.loads(c["function"]["arguments"]))}}
                for c in m["tool_calls"]]
        msgs.append(m)
    body["messages"] = msgs
    if req["tools"]:
        body["tools"] = copy.deepcopy(req["tools"])
    return body


def _litellm(req: dict) -> dict:
    """As LiteLLM's ``completion`` sends it (seen in ``requests.json``): the caller's values as
    written, and an assistant tool-call message passed back as LiteLLM returned it: no
    ``content`` key, ``function`` before ``id`` and ``type`` in each call."""
    body = _openai(req)
    msgs = []
    for m in body["messages"]:
        if m.get("tool_calls"):
            m = {"role": m["role"], "tool_calls": [{"function": dict(sorted(c["function"].items())), "id": c["id"],
                                                    "type": c["type"]} for c in m["tool_calls"]]}
        msgs.append(m)
    body["messages"] = msgs
    return body


def _explicit(req: dict) -> dict:
    """A client that writes every documented default and ``null`` for what it was not given,
    sends text as one text part, pads roles, and orders keys its own way (hand-written: the
    variations a client may produce, whether or not a given one does)."""
    body = {"n": 1, "top_p": 1, "presence_penalty": 0, "frequency_penalty": 0.0, "logprobs": False,
            "response_format": {"type": "text"}, "stop": None, "user": None, **req["params"]}
    if req["tools"]:
        body["tools"] = [{"type": t["type"], "function": {**t["function"], "strict": False,
                                                         "parameters": {**t["function"]["parameters"],
                                                                        "required": sorted(t["function"]["parameters"]["required"], reverse=True)}}}
                         for t in req["tools"]]
        body["tool_choice"] = "auto"
        body["parallel_tool_calls"] = True
    msgs = []
    for m in req["messages"]:
        m = copy.deepcopy(m)
        if isinstance(m.get("content"), str) and m["role"] != "tool":
            m["content"] = [{"type": "text", "text": m["content"]}]
        if m.get("tool_calls"):
            m["content"] = ""
        m["role"] = f" {m['role']}"
        msgs.append(dict(reversed(list(m.items()))))
    body["messages"] = msgs
    body["model"] = req["model"]
    return dict(reversed(list(body.items())))


@st.composite
def _requests(draw: st.DrawFn) -> list[dict]:
    """Requests of one call site: fixed system text, a fixed question around a varying value,
    optionally a tool round (tools, an assistant tool call, the tool's answer)."""
    system, question = draw(_TEXT), draw(_TEXT)
    params = draw(_PARAMS)
    tools = draw(st.booleans())
    tool_defs = [{"type": "function", "function": {"name": "lookup", "description": draw(_TEXT), "parameters": {
        "type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer"}}, "required": ["q", "k"]}}}]
    out = []
    for i, value in enumerate(draw(st.lists(_TEXT, min_size=1, max_size=10, unique=True))):
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": f"{question}: {value}"}]
        if tools:
            args = json.dumps({"q": value, "k": i}, separators=(",", ":"))
            msgs += [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{i}", "type": "function", "function": {"name": "lookup", "arguments": args}}]},
                {"role": "tool", "tool_call_id": f"call_{i}", "content": f"found {value}"}]
        out.append({"model": "gpt-4o-mini", "messages": msgs, "params": params, "tools": tool_defs if tools else None})
    return out


@settings(max_examples=40, deadline=None)
@given(_requests())
def test_every_client_rendering_gives_one_site_and_template(reqs):
    renderings = {name: [f(r) for r in reqs] for name, f in
                  (("openai", _openai), ("langchain", _langchain), ("litellm", _litellm), ("explicit", _explicit))}
    got = {name: _sites(bodies) for name, bodies in renderings.items()}
    assert len(got["openai"]) == 1
    assert got["openai"] == got["langchain"] == got["litellm"] == got["explicit"]
    for name, bodies in renderings.items():  # the canonical form is a fixed point
        for b in bodies:
            assert canonical_request(canonical_request(b)) == canonical_request(b), name
