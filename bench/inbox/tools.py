"""The inbox family's tool: a small routing table the bench ships, behind ``lookup_team``.

``lookup_team(category)`` is a read-only tool (``@auto.tool("lookup_team", effects="read")``):
it answers the owning team of a category as ``{"team", "queue", "sla_hours"}``; an unknown
category goes to the triage desk.
"""

from __future__ import annotations

import auto

ROUTING_TABLE: dict[str, dict] = {
    "billing": {"team": "Payments Operations", "queue": "PAY", "sla_hours": 8},
    "technical": {"team": "Platform Support", "queue": "TECH", "sla_hours": 12},
    "account": {"team": "Identity & Access", "queue": "IAM", "sla_hours": 12},
    "shipping": {"team": "Fulfilment", "queue": "SHIP", "sla_hours": 24},
    "security": {"team": "Security Response", "queue": "SEC", "sla_hours": 2},
}
UNROUTED = {"team": "Triage Desk", "queue": "DESK", "sla_hours": 24}


def route(category: str) -> dict:
    """The routing row of ``category`` (a copy), the triage desk for an unknown one."""
    return dict(ROUTING_TABLE.get(category, UNROUTED))


@auto.tool("lookup_team", effects="read")
def lookup_team(category: str) -> dict:
    """The recorded tool: the owning team of ``category``."""
    return route(category)
