"""Metadata keys that fused nodes carry so timings and errors map back to the original graph."""

# JSON list of the original node names a fused node replaced.
ORIGIN_KEY = "fuseview.origin"
# Name of the rule that produced the fused node.
RULE_KEY = "fuseview.rule"
# Stable id of the candidate that was applied.
CANDIDATE_KEY = "fuseview.candidate"
# Custom domain for fuseview's own reference-only fused ops (e.g. AddEyeLike).
CUSTOM_DOMAIN = "ai.fuseview"
