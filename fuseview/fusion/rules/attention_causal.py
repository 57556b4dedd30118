"""Whether a grouped-query block's own mask is causal: then GroupQueryAttention runs with ``causal=1``.

fuseview gives GroupQueryAttention the model's mask as ``attention_bias`` with ``causal=0``, so that the
model's arithmetic decides for every mask (left padding included). onnxruntime's CPU kernel runs that
non-causal path slower than its causal one, with the same bias (``bench/bench_gqa_forms.py``). With
``causal=1`` the kernel also hides key j from new token i when j > past + i (past: ``seqlens_k`` + 1 - new);
that changes nothing where the model's mask already hides those keys, as a decoder's causal mask does.

The mask is evaluated in onnxruntime (the cone of nodes behind it, as the rotary caches are:
``attention_rotary.cone_session``) at (past, new) = (0, 16), (5, 3), (64, 16) (past 0 only without a
cache), with every input read for its values set to ones, then with the first two positions of its last
axis zero (left padding): every key j > past + i must be hidden from every new token i, for every batch
row and head: an additive mask <= ``HIDDEN_AT``, or the condition of a Where-selected mask choosing its
fill. A token with every key hidden must be a padded one (its own position zero in the probe): transformers'
TorchScript exports hide with -inf and their row guard zeroes such a token either way; the dynamo exports
hide with the lowest float, so the model averages every key for it, which causal=1 narrows to the earlier
ones. Such a token has no defined output (torch's SDPA gives NaN there) and no unpadded token reads it (its
key is hidden from them), so causal=1 changes only padded tokens' rows, as onnxruntime-genai's model does;
every other output is the model's. A token of a real position with every key hidden keeps ``causal=0``, as
does a mask that cannot be evaluated.
"""

from __future__ import annotations

import numpy as np

from fuseview.dims import cache_dims
from fuseview.fusion.rules.attention_mha import AttentionMatch
from fuseview.fusion.rules.attention_rotary import cone_session, probe_feeds
from fuseview.fusion.toolkit import Miss, ScanContext, Structure

HIDDEN_AT = -1e4  # an additive mask at or below this hides its key (exp(-1e4) is 0 in float32 and float16)
_PROBES = ((0, 16), (5, 3), (64, 16))


def mask_is_causal(ctx: ScanContext, a: AttentionMatch) -> bool:
    """True when the block's mask hides every later key on every probe (memoised per mask tensor)."""
    if a.where_mask is not None and not a.guard:
        cond, fill, fill_if = a.where_mask
        key: tuple = ("causal_mask", "where", cond, fill_if, fill)
        terms: tuple[str, ...] = (cond,)
    else:
        terms = tuple(a.bias_terms or ((a.bias,) if a.bias else ()))
        if not terms:
            return False  # no mask: every key is seen, not only the earlier ones
        fill_if, fill = True, 0.0
        key = ("causal_mask", "bias", terms)
    where = a.where_mask is not None and not a.guard
    return bool(ctx.memo(key, lambda c: _causal(c.structure, terms, where, fill_if, fill)))


def _causal(s: Structure, terms: tuple[str, ...], where: bool, fill_if: bool, fill: float) -> bool:
    try:
        sess, inputs, read, shaped = cone_session(s, list(terms), "mask")
    except Miss:
        return False
    model = s.ix.model
    cached = cache_dims(model) is not None
    for past, new in _PROBES:
        if past and not cached:
            continue
        for padded in (False, True):
            try:
                feeds = probe_feeds(model, inputs, past, new)
            except Miss:
                return False
            for t in read:
                feeds[t] = np.ones_like(feeds[t])
                if padded and feeds[t].ndim and feeds[t].shape[-1] > 2:
                    feeds[t][..., :2] = 0
            try:
                values = sess.run(None, feeds | shaped)
            except Exception:  # noqa: BLE001 - a mask onnxruntime cannot evaluate here keeps causal=0
                return False
            hidden, finite = _hidden(values, where, fill_if, fill)
            if not _hides_later_keys(hidden, past, new) or not _only_padded_tokens_see_nothing(
                    hidden, finite, past, new, padded):
                return False
    return True


def _hidden(values: list[np.ndarray], where: bool, fill_if: bool, fill: float
            ) -> tuple[np.ndarray, np.ndarray]:
    """(hidden, finite), boolean [..., S, T]: where the mask hides the key, and where its value is finite."""
    if where:
        cond = np.asarray(values[0]).astype(bool)
        hidden = cond if fill_if else ~cond
        return hidden, np.full(hidden.shape, np.isfinite(fill))
    total = np.asarray(values[0], np.float64)
    for v in values[1:]:
        total = total + np.asarray(v, np.float64)  # broadcast as the fused op's Add does
    return total <= HIDDEN_AT, np.isfinite(total)


def _only_padded_tokens_see_nothing(hidden: np.ndarray, finite: np.ndarray, past: int, new: int,
                                    padded: bool) -> bool:
    """No token but a padded one (absolute position < 2 in the padded probe) has every key hidden by a
    finite value: only such a token's softmax (uniform over what the kernel leaves) changes with causal=1."""
    shape = (*hidden.shape[:-2], new, past + new)
    hidden, finite = np.broadcast_to(hidden, shape), np.broadcast_to(finite, shape)
    blind = np.all(hidden, axis=-1) & np.any(finite, axis=-1)  # [..., new tokens]
    pad = (past + np.arange(new) < 2) if padded else np.zeros(new, bool)
    return not bool(np.any(blind & ~pad))


def _hides_later_keys(hidden: np.ndarray, past: int, new: int) -> bool:
    """Every key j > past + i hidden from new token i (the mask's last two axes: new tokens, keys)."""
    if hidden.ndim < 2 or hidden.shape[-1] != past + new or hidden.shape[-2] not in (1, new):
        return False
    rows = np.arange(new)[:, None]
    later = np.arange(past + new)[None, :] > past + rows  # [new, total]
    full = np.broadcast_to(hidden, (*hidden.shape[:-2], new, past + new))
    return bool(np.all(full[..., later]))
