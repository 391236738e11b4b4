"""F2 inbox: ticket → classify → look up the owning team (a tool) → priority → one-line summary."""
