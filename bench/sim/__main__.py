"""``python -m bench.sim --port N [--seed S] [--error-rate R] [--sleep] [--host H]``: serve the
simulated reference model until interrupted (prints the base URL on stdout; on stderr, which
prompts it models and the environment that points an ``openai`` client at it)."""

from __future__ import annotations

import argparse
import sys

from bench.families import FAMILIES
from bench.sim.responders import TOOLS_MARKER
from bench.sim.server import SimServer


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.sim", description="Serve the simulated reference model (auto-sim-1).")
    ap.add_argument("--port", type=int, default=0, help="TCP port (0: any free port)")
    ap.add_argument("--host", default="127.0.0.1", help="bind address (default loopback)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--error-rate", type=float, default=0.02, help="simulated 5xx probability per attempt")
    ap.add_argument("--sleep", action="store_true", help="actually wait the simulated latency")
    args = ap.parse_args(argv)
    sim = SimServer(port=args.port, host=args.host, seed=args.seed, error_rate=args.error_rate, sleep=args.sleep)
    sim.start()
    print(f"auto-sim-1 (simulated) serving on {sim.base_url}", flush=True)
    families = ", ".join(f.marker for f in FAMILIES.values())
    print(f"answers only the AUTO-BENCH prompts it models (a system message with one of {families}, "
          f"{TOOLS_MARKER}); any other request is refused (HTTP 400). Point a client at it with\n"
          f"  export OPENAI_BASE_URL={sim.base_url} OPENAI_API_KEY=sk-simulated-no-key", file=sys.stderr, flush=True)
    try:
        sim._thread.join()  # type: ignore[union-attr]
    except KeyboardInterrupt:
        pass
    finally:
        sim.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
