"""A stand-in for ``vllm serve`` that fails in configured ways (written for the launcher tests).

It is not vLLM: it reads a plan (JSON list, one entry per start) from $STANDIN_PLAN, counts its
starts in $STANDIN_STATE, records its argv, and then per the plan entry:
  {"startup_s": 0.2, "then": "exit", "lines": [...], "code": 1}   die before serving
  {"startup_s": 0.1, "serve_s": 0.5, "then": "exit", "lines": [...]}  serve /health, then die
  {"serve_s": 0.3, "then": "unhealthy"}   serve, then answer /health with 503 (engine dead)
  {"then": "serve"}                       serve until SIGTERM
  {"then": "hang"}                        never serve
As a container CLI (``container_cli``), ``rm -f NAME`` calls are appended to $STANDIN_STATE.rm.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HEALTHY = True


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        code = 200 if self.path == "/health" and HEALTHY else 503
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    global HEALTHY
    state = Path(os.environ["STANDIN_STATE"])
    if sys.argv[1:2] == ["rm"]:  # acting as the container CLI's cleanup: record it
        with Path(str(state) + ".rm").open("a") as fh:
            fh.write(" ".join(sys.argv[1:]) + "\n")
        return
    starts = int(state.read_text()) if state.exists() else 0
    tmp = Path(f"{state}.tmp")
    tmp.write_text(str(starts + 1))
    tmp.replace(state)  # atomic: the test polls this file
    Path(str(state) + ".argv").write_text(json.dumps(sys.argv[1:]))
    plan = json.loads(Path(os.environ["STANDIN_PLAN"]).read_text())
    step = plan[min(starts, len(plan) - 1)]
    port = int(sys.argv[sys.argv.index("--port") + 1])
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"INFO standin start {starts + 1} on port {port}", flush=True)
    time.sleep(step.get("startup_s", 0.05))
    if step["then"] == "hang" or ("serve_s" not in step and step["then"] == "exit"):
        if step["then"] == "hang":
            time.sleep(3600)
        for line in step.get("lines", []):
            print(line, file=sys.stderr, flush=True)
        sys.exit(step.get("code", 1))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if step["then"] == "serve":
        time.sleep(3600)
    time.sleep(step["serve_s"])
    if step["then"] == "unhealthy":
        HEALTHY = False
        time.sleep(3600)
    for line in step.get("lines", []):
        print(line, file=sys.stderr, flush=True)
    os._exit(step.get("code", 1))


if __name__ == "__main__":
    main()
