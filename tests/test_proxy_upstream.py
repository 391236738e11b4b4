"""The proxy's upstream URLs: worked out once per path and query, never for a refused path, and
the memory of them bounded."""

from __future__ import annotations

import pytest

from auto.proxy import upstream as up_mod
from auto.proxy.upstream import PathRefused, Upstream


def test_url_for_is_remembered_refusals_are_not_and_the_memory_is_bounded(monkeypatch):
    u = Upstream("http://svc:pw@127.0.0.1:4000/v1")
    first = u.url_for("/v1/chat/completions")
    assert str(first) == "http://svc:pw@127.0.0.1:4000/v1/chat/completions"
    assert u.url_for("/v1/chat/completions") is first  # the same object: not worked out again
    assert str(u.url_for("/v1/models", "limit=2")) == "http://svc:pw@127.0.0.1:4000/v1/models?limit=2"
    for _ in range(2):
        with pytest.raises(PathRefused):
            u.url_for("/v1/%2e%2e/admin")
    monkeypatch.setattr(up_mod, "URL_CACHE", 4)
    for i in range(10):
        u.url_for(f"/v1/files/f{i}")
    assert len(u._urls) <= 4 and str(u.url_for("/v1/files/f3")).endswith("/v1/files/f3")
