"""Metadata keys that fused nodes carry so timings and errors map back to the original graph."""

import json

# JSON list of the original node names a fused node replaced.
ORIGIN_KEY = "fuseview.origin"
# Name of the rule that produced the fused node.
RULE_KEY = "fuseview.rule"
# Stable id of the candidate that was applied.
CANDIDATE_KEY = "fuseview.candidate"
# Custom domain for fuseview's own reference-only fused ops (e.g. AddEyeLike).
CUSTOM_DOMAIN = "ai.fuseview"


def origin_names(raw: str | None) -> list[str] | None:
    """The original node names in a fuseview.origin value (a JSON list); None when absent or unreadable."""
    if not raw:
        return None
    try:
        origin = json.loads(raw)
    except ValueError:
        return None
    return [str(x) for x in origin] if isinstance(origin, list) else None
