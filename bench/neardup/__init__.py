"""The near-duplicate bench: hand-written support tickets with greetings, sign-offs, casing,
typos, identifiers and paraphrases, through the ratchet beside an exact dict and a similarity cache
(``python -m bench.neardup``)."""
