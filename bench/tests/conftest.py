"""Bench test settings.

Hypothesis: with ``CI`` set (``.ci/run`` sets ``CI=1``) the ``ci`` profile is loaded: examples are
derandomized (a fixed seed per test) and no example database is read or written, so a CI run on a
clean checkout is the same every time. Locally the default profile draws fresh examples.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
    settings.load_profile("ci")
