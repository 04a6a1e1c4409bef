"""Each attention exercise seen as heads of weighted sums (see :mod:`mhalib.checks.weights_seen`).

A view turns one failing case (its inputs, as the learner received them, and the learner's
output) into :class:`~mhalib.checks.weights_seen.Head` s: per batch element and head, the
queries, keys and values the right answer uses, the learner's output rows for that head and
the keys each query may see. Exercises with an output projection are read through
``w_o^-1`` (and, when that does not fit, without it: the projection forgotten).
"""

from __future__ import annotations

import math

import numpy as np

from mhalib.checks.case_inputs import float64_inputs as _inputs
from mhalib.checks.case_inputs import float64_output as _array
from mhalib.checks.weights_seen import Head, Pattern, all_fit, diagnose, read_weights


def _causal(n_q: int, n_k: int) -> np.ndarray:
    return np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + (n_k - n_q)


def _split(t: np.ndarray, heads: int) -> np.ndarray:
    """(N, heads * d) -> (heads, N, d)."""
    n, width = t.shape
    return t.reshape(n, heads, width // heads).transpose(1, 0, 2)


def _strided(t: np.ndarray, heads: int) -> np.ndarray:
    """(N, heads * d) -> (heads, N, d) with head h holding columns h, h + heads, ... (a split
    by a (d, heads) reshape: the slip)."""
    n, width = t.shape
    return t.reshape(n, width // heads, heads).transpose(2, 0, 1)


STRIDED = ("head {h} averages the value columns {h}, {h} + H, {h} + 2H, ... (every H-th "
           "column): the heads were split with a (d_head, num_heads) reshape; head h owns the "
           "contiguous block h * d_head:(h + 1) * d_head, a (num_heads, d_head) reshape")


# -- exercises given q, k, v per head ---------------------------------------------------------

def online_softmax_heads(exercise, case, output) -> list[Head]:
    values = _inputs(exercise, case)
    out = _array(output)
    if values is None or out is None:
        return []
    q, k, v = values["q"], values["k"], values["v"]
    if out.shape != q.shape[:-1] + (v.shape[-1],) or q.ndim != 4:
        return []
    n_q, n_k = q.shape[-2], k.shape[-2]
    allowed = _causal(n_q, n_k) if values.get("causal") else np.ones((n_q, n_k), bool)
    heads = []
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            heads.append(Head(f"batch {b}, head {h}", q[b, h], k[b, h], v[b, h], out[b, h],
                              allowed, 1 / math.sqrt(q.shape[-1]),
                              [("the output is a weighted sum of the KEYS: k where v belongs "
                                "in the weighted sum (out = p @ v), or k and v swapped", k[b, h],
                                None)]))
    return heads


def paged_heads(exercise, case, output) -> list[Head]:
    values = _inputs(exercise, case)
    out = _array(output)
    if values is None or out is None:
        return []
    q, k_pages, v_pages = values["q"], values["k_pages"], values["v_pages"]
    table, lens = np.asarray(values["block_table"]), np.asarray(values["seq_lens"])
    if out.shape != q.shape:
        return []
    page = k_pages.shape[2]
    rep = q.shape[1] // k_pages.shape[1]
    heads = []
    for b in range(q.shape[0]):
        n = int(lens[b])
        if n == 0:
            continue
        slots = np.arange(n)
        pages = table[b, slots // page]
        for h in range(q.shape[1]):
            g = h // rep
            keys, vals = k_pages[pages, g, slots % page], v_pages[pages, g, slots % page]
            in_order = np.arange(n) // page

            def read(pool_pages, group=g, slots=slots):  # (n, d) values, keys at those slots
                return (v_pages[pool_pages % len(v_pages), group, slots % page],
                        k_pages[pool_pages % len(k_pages), group, slots % page])
            options = [("the keys were read from pages 0, 1, 2... in order: the block table, "
                        "which lists each sequence's pages, was not used", *read(in_order)),
                       ("the pages were read as consecutive pages of the pool, from the row's "
                        f"first page on (block_table[{b}, 0], + 1, + 2...): a sequence's pages can "
                        "be anywhere in the pool, so read page block_table[b, t // page_size] for "
                        "each key t", *read(table[b, 0] + in_order)),
                       (f"query head {h} read K/V head {h % k_pages.shape[1]} (h % G, tiled) "
                        f"instead of {g} (h // (H // G))", *read(pages, h % k_pages.shape[1]))]
            options += _length_options(table[b], k_pages[:, g], v_pages[:, g], n, page)
            heads.append(Head(f"sequence {b}, head {h}", q[b, h][None], keys, vals,
                              out[b, h][None], np.ones((1, n), bool),
                              1 / math.sqrt(q.shape[-1]), options))
    return heads


def _length_options(row, key_pages, value_pages, n, page):
    """``(sentence, values, keys)`` of the usual length slips: one key too many, the whole last
    page, every page of the block-table row."""
    def gathered(count):
        slots = np.arange(count)
        return (value_pages[row[slots // page], slots % page],
                key_pages[row[slots // page], slots % page])
    options = []
    if (n + 1) <= len(row) * page:
        options.append(("each sequence reads one key too many (t <= seq_len instead of "
                        "t < seq_len): only the first seq_lens[b] keys belong to it",
                        *gathered(n + 1)))
    whole = -(-n // page) * page
    if whole > n:
        options.append(("the whole last page is read, slots past the sequence's length "
                        "included: mask the keys t >= seq_lens[b]", *gathered(whole)))
    if len(row) * page > whole:
        options.append(("every page of the block-table row is read, entries past the "
                        "sequence's pages included: only ceil(seq_len / page_size) pages hold "
                        "its keys, and only seq_len of their slots", *gathered(len(row) * page)))
    return options


# -- exercises with projections ---------------------------------------------------------------

def _projected_heads(x, w_q, w_k, w_v, merged, num_heads, num_kv_heads, causal):
    """Heads of self-attention from projections; ``merged (B, N, d_model)`` is the output
    before ``w_o``."""
    d_model = w_q.shape[1]
    d_head = d_model // num_heads
    rep = max(1, num_heads // num_kv_heads)
    heads = []
    for b in range(x.shape[0]):
        q = _split(x[b] @ w_q, num_heads)
        k = _split(x[b] @ w_k, num_kv_heads)
        v = _split(x[b] @ w_v, num_kv_heads)
        strided = _strided(x[b] @ w_v, num_kv_heads)
        out = _split(merged[b], num_heads)
        n = x.shape[1]
        allowed = _causal(n, n) if causal else np.ones((n, n), bool)
        for h in range(num_heads):
            g = h // rep
            options = [(f"query head {h} averages the values of K/V head {other}, not {g}: "
                        f"query head h must read group h // (num_heads // num_kv_heads)",
                        v[other], k[other]) for other in range(num_kv_heads) if other != g]
            options.append(("the output is a weighted sum of the KEYS: the values were made "
                            "with the keys' weight or read from the keys (w_k where w_v belongs, "
                            "k where v belongs, or the two swapped)", k[g], k[g]))
            options.append((STRIDED.format(h=g), strided[g], None))
            heads.append(Head(f"batch {b}, head {h}", q[h], k[g], v[g], out[h], allowed,
                              1 / math.sqrt(d_head), options))
    return heads


def _inverse(w_o) -> np.ndarray | None:
    try:
        return np.linalg.inv(w_o)
    except np.linalg.LinAlgError:
        return None


def _names(values, num_heads) -> dict[str, int]:
    d_model = values["w_q"].shape[0]
    return {"d_head": d_model // num_heads, "d_model": d_model,
            "N": values["x"].shape[1], "num_heads": num_heads}


def _through_w_o(readings, heads_of, names, extra=None, same=None):
    """What the heads show when the output is read back through ``w_o`` (the first reading,
    ``""``); when that is not a weighted sum of each head's values but the output itself is
    (the reading ``"no_output_projection"``), the output projection is missing."""
    for reading, merged in readings:
        heads = heads_of(merged)
        reads = [read_weights(h.out, h.v) for h in heads]
        found = diagnose(heads, names, extra, same, reads=reads)
        if not reading:
            if found or all_fit(reads):
                return found  # the weighted sums are this head's: what they show, or nothing
            continue
        if all_fit(reads):
            also = f"; also, {found[1]}" if found else ""
            return ("weights:no_output_projection",
                    "your output is the merged heads themselves: the output projection (@ w_o) "
                    f"is missing{also}")
    return None


def _projected_view(exercise, case, output, causal_of, kv_heads_of, extra=None, same=None):
    values = _inputs(exercise, case)
    out = _array(output)
    if values is None or out is None or out.shape != values["x"].shape:
        return None
    inverse = _inverse(values["w_o"])
    if inverse is None:
        return None
    num_heads = int(values["num_heads"])
    kv, causal = kv_heads_of(values), causal_of(values)

    def heads_of(merged):
        return _projected_heads(values["x"], values["w_q"], values["w_k"], values["w_v"],
                                merged, num_heads, kv, causal)
    return _through_w_o([("", out @ inverse), ("no_output_projection", out)], heads_of,
                        _names(values, num_heads), extra, same)


SAME = ("every head uses the same weights: either the heads' scores were combined (averaged "
        "or summed) before one softmax, or the heads were split with the wrong width (a d_head "
        "computed from another size) so that one head spans them all; each head needs its own "
        "softmax(q_h k_h^T / sqrt(d_head)) over its own d_head columns")


def gqa_view(exercise, case, output):
    return _projected_view(exercise, case, output, lambda v: bool(v.get("causal")),
                           lambda v: int(v["num_kv_heads"]), same=SAME)


def decode_view(exercise, case, output):
    return _projected_view(exercise, case, output, lambda v: True,
                           lambda v: int(v["num_kv_heads"]), same=SAME)


def mha_view(exercise, case, output):
    return _projected_view(exercise, case, output, lambda v: False,
                           lambda v: int(v["num_heads"]), same=SAME)


def prefill_view(exercise, case, output):
    values = _inputs(exercise, case)
    if values is None:
        return None
    chunk = int(values["chunk_size"])

    def chunks(head):
        n_q, n_k = head.allowed.shape
        i = np.arange(n_q)[:, None]
        j = np.arange(n_k)[None, :]
        start = (i // chunk) * chunk
        return [Pattern("own_chunk_only", (j >= start) & (j <= i),
                        f"each query sees only the keys of its own chunk (chunk_size={chunk}): "
                        "the keys and values of the earlier chunks must stay in the cache"),
                Pattern("last_chunks_only", (j >= start - chunk) & (j <= i),
                        "each query sees only its own chunk and the one before: the cache keeps "
                        "only the previous chunk; it must keep every earlier chunk"),
                Pattern("whole_chunk_visible", j < start + chunk,
                        "each query sees its whole chunk, later queries of the chunk included: "
                        "inside a chunk the mask must still be causal")]
    return _projected_view(exercise, case, output, lambda v: True,
                           lambda v: int(v["num_heads"]), extra=chunks, same=SAME)


def mla_view(exercise, case, output):
    """mla_attention: queries x @ w_q, keys c @ w_uk and values c @ w_uv per head, c = x @ w_dkv;
    the output read through a left inverse of w_o (H * d_head <= d_model)."""
    values = _inputs(exercise, case)
    out = _array(output)
    if values is None or out is None or out.shape != values["x"].shape:
        return None
    x, w_o = values["x"], values["w_o"]
    num_heads = int(values["num_heads"])
    width, d_model = w_o.shape
    if width > d_model or width % num_heads:
        return None
    d_head = width // num_heads
    c = x @ values["w_dkv"]
    allowed_all = np.ones((x.shape[1], x.shape[1]), bool)
    allowed = _causal(x.shape[1], x.shape[1]) if values.get("causal", True) else allowed_all
    names = {"d_head": d_head, "d_model": d_model, "d_c": c.shape[-1],
             "d_model / num_heads": d_model // num_heads, "num_heads": num_heads}
    readings = [("", out @ np.linalg.pinv(w_o))]
    if width == d_model:
        readings.append(("no_output_projection", out))

    def heads_of(merged):
        heads = []
        for b in range(x.shape[0]):
            q = _split(x[b] @ values["w_q"], num_heads)  # (H, N, d_head)
            k = _split(c[b] @ values["w_uk"], num_heads)
            v = _split(c[b] @ values["w_uv"], num_heads)
            o = _split(merged[b], num_heads)
            strided = _strided(c[b] @ values["w_uv"], num_heads)
            for h in range(num_heads):
                heads.append(Head(f"batch {b}, head {h}", q[h], k[h], v[h], o[h], allowed,
                                  1 / math.sqrt(d_head),
                                  [(STRIDED.format(h=h), strided[h], None),
                                   ("the output is a weighted sum of the KEYS (c @ w_uk): the "
                                    "values must come from c @ w_uv", k[h], None)]))
        return heads
    return _through_w_o(readings, heads_of, names, same=SAME)


def _heads_view(heads_of):
    def view(exercise, case, output):
        heads = heads_of(exercise, case, output)
        if not heads:
            return None
        d = heads[0].q.shape[-1]
        return diagnose(heads, {"d": d, "d_head": d, "N_k": heads[0].k.shape[0]})
    return view


def returned_weights_view(exercise, case, output):
    """For an exercise that returns ``(out, weights)``: the weights it returned, read as they
    are (which keys each query used, whether rows sum to 1, the scores' scale)."""
    values = _inputs(exercise, case)
    if values is None or not isinstance(output, tuple) or len(output) != 2:
        return None
    out, weights = (np.asarray(part) for part in output)
    q, k, v = values["q"], values["k"], values["v"]
    n_q, n_k = q.shape[-2], k.shape[-2]
    if weights.dtype != np.float64 or weights.shape != q.shape[:-2] + (n_q, n_k) or \
            out.shape != q.shape[:-1] + v.shape[-1:]:
        return None
    mask = values.get("mask")
    allowed = np.broadcast_to(np.ones((n_q, n_k), bool) if mask is None else np.asarray(
        mask, bool), weights.shape)
    heads, reads = [], []
    for index in np.ndindex(*q.shape[:-2]):  # one "head" per leading index
        heads.append(Head(f"batch {index}" if index else "the output", q[index], k[index],
                          v[index], out[index], allowed[index], 1 / math.sqrt(q.shape[-1]), []))
        reads.append((weights[index], 0.0))
    return diagnose(heads, {"d_k": q.shape[-1], "N_k": n_k, "N_q": n_q}, reads=reads)


VIEWS = {
    "attention": returned_weights_view,
    "masked_attention": returned_weights_view,
    "online_softmax_attention": _heads_view(online_softmax_heads),
    "paged_attention": _heads_view(paged_heads),
    "grouped_query_attention": gqa_view,
    "decode_with_cache": decode_view,
    "chunked_prefill": prefill_view,
    "multi_head_attention": mha_view,
    "mla_attention": mla_view,
}
