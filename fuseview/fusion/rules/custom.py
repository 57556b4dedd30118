"""fuseview's own fused ops (reference-only): EyeLike + Add -> AddEyeLike."""

from __future__ import annotations

from fuseview.fusion.rule import Match, Replacement, Rule
from fuseview.fusion.rules._common import scalar
from fuseview.provenance import CUSTOM_DOMAIN


def _plain(op, a, like):
    return op.Add(a, op.EyeLike(like, _label="eye"), _label="add")


def _scaled(op, a, like):
    return op.Add(
        a, op.Mul(op.EyeLike(like, _label="eye"), op.constant("alpha"), _label="scale"), _label="add"
    )


def _check(m: Match) -> str | None:
    sa, sl = m.shape("a"), m.shape("like")
    if sa is not None and len(sa) != 2:
        return f"{m['a']} has rank {len(sa)}; AddEyeLike adds to a matrix"
    if sa is not None and sl is not None and list(sa) != list(sl):
        return f"{m['a']} has shape {sa}, the identity is {sl}: broadcasting Add is not fused"
    if "scale" in m.nodes and scalar(m, "alpha") is None:
        return f"{m['alpha']} is not a scalar constant"
    eye_dtype = m.attr("eye", "dtype")
    a_dtype = m.index.const_dtype(m["a"])
    if eye_dtype is not None and a_dtype is not None and eye_dtype != a_dtype:
        return "EyeLike dtype differs from the matrix it is added to"
    return None


def _replace(m: Match) -> Replacement:
    alpha = m.number("alpha") if "scale" in m.nodes else 1.0
    return Replacement([m["a"], m["like"]], {"k": int(m.attr("eye", "k", 0)), "alpha": float(alpha)})


RULES = [
    Rule(
        name="add_eyelike",
        description="Add(A, alpha*EyeLike(L)) -> AddEyeLike (reference kernel only)",
        fused_op="AddEyeLike",
        domain=CUSTOM_DOMAIN,
        runs_on=("reference",),
        patterns=(_plain, _scaled),
        check=_check,
        priority=5,
        replace=_replace,
    ),
]
