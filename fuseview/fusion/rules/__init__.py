"""The rule catalogue: every module in RULE_MODULES defines RULES, a list of fuseview.fusion.rule.Rule."""

from __future__ import annotations

import importlib
from functools import lru_cache

from fuseview.fusion.rule import Rule

# One module per family; order here is the catalogue order (bigger fusions come first within a scan anyway).
RULE_MODULES = (
    "attention_mha",
    "attention_packed",
    "attention_gqa",
    "embedding",
    "norms",
    "activations",
    "linear",
    "conv",
    "quantized",
    "custom",
    "constants",
)


@lru_cache(maxsize=1)
def catalogue() -> tuple[Rule, ...]:
    """All rules of all rule modules, in RULE_MODULES order (the scan runs them by their requires)."""
    rules: list[Rule] = []
    for name in RULE_MODULES:
        rules.extend(importlib.import_module(f"fuseview.fusion.rules.{name}").RULES)
    names = [r.name for r in rules]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"duplicate rule names: {sorted(dup)}")
    return tuple(rules)


def rule_by_name(name: str) -> Rule | None:
    """The catalogue rule called ``name``."""
    return next((r for r in catalogue() if r.name == name), None)
