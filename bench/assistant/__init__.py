"""The assistant family: a function-calling loop (tool choice and arguments, tool run, phrasing)."""
