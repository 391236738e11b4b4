"""Errors a new user of ``auto bench`` hits, each one line with the product's exit code: a real
endpoint configured without a key, unreachable, or refusing the calls; bad counts; Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

AUTO = [sys.executable, "-m", "auto.cli"]


def _auto(*args: str, code: int, env: dict | None = None) -> subprocess.CompletedProcess:
    p = subprocess.run([*AUTO, *args], capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == code, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    return p


def _env(**kw: str | None) -> dict:
    env = dict(os.environ)
    for k, v in kw.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _last_line(p: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    return p.stderr.strip().splitlines()[-1]


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return port


@pytest.mark.parametrize("command", [["bench", "run", "triage"], ["bench", "guards"]])
def test_a_base_url_without_a_key_is_refused_before_any_work(tmp_path, command):
    env = _env(OPENAI_BASE_URL="http://127.0.0.1:1/v1", OPENAI_API_KEY=None)
    p = _auto(*command, "--out", str(tmp_path / "out"), "--items", "10", code=1, env=env)
    line = _last_line(p)
    assert line.startswith("error: OPENAI_BASE_URL is set") and "OPENAI_API_KEY is not" in line
    assert "[offline]" not in p.stderr


@pytest.mark.parametrize("command", [["bench", "run", "triage"], ["bench", "guards"]])
def test_an_unreachable_endpoint_is_one_line(tmp_path, command):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    p = _auto(*command, "--out", str(tmp_path / "out"), "--items", "10", code=1,
              env=_env(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-test-any"))
    line = _last_line(p)
    assert line.startswith(f"error: cannot reach the reference model at {url}")
    assert "unset it to use the embedded simulator" in line


class _Unauthorized(BaseHTTPRequestHandler):
    def log_message(self, *a):  # quiet
        return

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                                     "code": "invalid_api_key"}}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_an_endpoint_that_refuses_the_key_is_one_line(tmp_path):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Unauthorized)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        p = _auto("bench", "run", "triage", "--out", str(tmp_path / "out"), "--items", "10", code=1,
                  env=_env(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-test-wrong"))
    finally:
        srv.shutdown()
        srv.server_close()
    line = _last_line(p)
    assert line.startswith(f"error: the reference model at {url} refused a call: HTTP 401")
    assert "Incorrect API key provided" in line


@pytest.mark.parametrize("args", [["bench", "run", "triage", "--items", "-5"], ["bench", "run", "triage", "--items", "0"],
                                  ["bench", "guards", "--items", "-5"], ["bench", "guards", "--heldout", "0"]])
def test_counts_below_one_are_usage_errors(args):
    p = _auto(*args, code=2)
    assert "Invalid value" in p.stderr and "x>=1" in p.stderr


def test_a_negative_audit_seed_is_a_usage_error():
    p = _auto("bench", "run", "triage", "--audit-seed", "-1", code=2)
    assert "Invalid value for '--audit-seed'" in p.stderr and "x>=0" in p.stderr


def test_ctrl_c_during_bench_run_exits_130(tmp_path):
    proc = subprocess.Popen([*AUTO, "bench", "run", "triage", "--out", str(tmp_path / "out"), "--items", "20"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=_env(OPENAI_BASE_URL=None))
    try:
        while True:  # wait until it is working: the offline recording has started
            line = proc.stderr.readline()
            assert line, "bench run ended before it started recording"
            if line.startswith("[offline] recording"):
                break
        os.killpg(proc.pid, signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, err[-3000:]
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err
