"""Reading a response body as it streams: content decoding and server-sent events.

* :class:`ContentDecoder` undoes the ``Content-Encoding`` of the raw bytes the recorder tees
  (``gzip``/``x-gzip``/``deflate``, or none; any other encoding, or a corrupt stream, makes the
  body undecodable: :attr:`ContentDecoder.ok` becomes False).
* :class:`SSEParser` splits decoded bytes into server-sent events (the event-stream format of
  the WHATWG HTML standard, "Server-sent events": ``data:``/``event:`` fields, a blank line
  dispatches, a line starting with ``:`` is a comment; lines end in LF or CRLF) and parses each
  ``data`` payload as strict JSON (:func:`~auto.record.completion.parse_json`); ``[DONE]`` (OpenAI's end marker) sets :attr:`SSEParser.done`.
"""

from __future__ import annotations

import zlib
from typing import Any

from auto.record.completion import parse_json

UNPARSED_KEEP = 1000
"""Characters kept of a ``data`` payload that is not JSON (``{"_unparsed": text}``)."""


class SSEParser:
    """Incremental server-sent-events parser: ``feed(bytes)``, then ``close()``; ``events`` holds
    ``(event name or None, parsed JSON)`` for each ``data:`` payload other than ``[DONE]``."""

    def __init__(self) -> None:
        self.buf = b""
        self.data: list[bytes] = []
        self.event: str | None = None
        self.events: list[tuple[str | None, Any]] = []
        self.done = False

    def feed(self, chunk: bytes) -> None:
        """Take the next decoded bytes of the stream (any split)."""
        self.buf += chunk
        while True:
            i = self.buf.find(b"\n")
            if i < 0:
                return
            line, self.buf = self.buf[:i].rstrip(b"\r"), self.buf[i + 1 :]
            self._line(line)

    def _line(self, line: bytes) -> None:
        if not line:
            self._dispatch()
        elif line.startswith(b":"):
            return
        else:
            name, _, value = line.partition(b":")
            if value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                self.data.append(value)
            elif name == b"event":
                self.event = value.decode("utf-8", "replace")

    def _dispatch(self) -> None:
        if self.data:
            text = b"\n".join(self.data).decode("utf-8", "replace")
            if text.strip() == "[DONE]":
                self.done = True
            else:
                try:
                    self.events.append((self.event, parse_json(text)))
                except ValueError:
                    self.events.append((self.event, {"_unparsed": text[:UNPARSED_KEEP]}))
        self.data, self.event = [], None

    def close(self) -> None:
        """End of stream: a last line without its newline, and a pending event, still count."""
        if self.buf:
            self._line(self.buf.rstrip(b"\r"))
            self.buf = b""
        self._dispatch()


class ContentDecoder:
    """Content-Encoding decoder for the raw bytes we tee (gzip/deflate; others: undecodable)."""

    def __init__(self, encoding: str) -> None:
        enc = [e.strip().lower() for e in encoding.split(",") if e.strip() and e.strip().lower() != "identity"]
        self.ok = True
        self._z = None
        if not enc:
            return
        if enc == ["gzip"] or enc == ["x-gzip"]:
            self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif enc == ["deflate"]:
            self._z = zlib.decompressobj()
        else:
            self.ok = False

    def decode(self, data: bytes) -> bytes:
        """The decoded bytes of the next raw chunk (``b""`` once the body is undecodable)."""
        if not self.ok:
            return b""
        if self._z is None:
            return data
        try:
            return self._z.decompress(data)
        except zlib.error:
            self.ok = False
            return b""
