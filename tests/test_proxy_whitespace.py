"""What the proxy merges and what it keeps apart: the JSON text of a request (spacing, key order,
``0.0`` vs ``0``) is not the request, so bodies that differ only there route to one site with one
input; whitespace inside a message's text is what the model reads, so it is a different input of
that site (forwarded, not answered from another input's witness)."""

from __future__ import annotations

import json

from auto.sites.request import request_shape

SYSTEM = "Classify the ticket. Answer with one word."


def _body(ticket: str) -> dict:
    return {"model": "m-1", "temperature": 0, "messages": [{"role": "system", "content": SYSTEM},
                                                          {"role": "user", "content": ticket}]}


def test_json_spacing_and_number_form_are_one_request():
    body = _body("My invoice is wrong")
    compact = json.loads(json.dumps(body, separators=(",", ":")))
    spaced = json.loads(json.dumps(body, indent=4, sort_keys=True).replace('"temperature": 0', '"temperature": 0.0'))
    assert request_shape(compact) == request_shape(spaced) == request_shape(body)


def test_whitespace_inside_message_text_is_content():
    a, b = request_shape(_body("My invoice is wrong")), request_shape(_body("My invoice  is wrong "))
    assert a[1] == b[1]  # the same shape: one site
    assert a[0] != b[0]  # two inputs of it: the second is never answered with the first's witness
