"""Checkers for lesson 11: ``decode_attention_intensity`` (plain Python), ``paged_attention`` and
``chunked_prefill`` (torch).

``paged_attention`` cases fill every slot a sequence does not own (the rest of its last page,
pages of other sequences, free pages, table entries past its length) with large stale values,
so reading one key too many changes the output by far more than the tolerance.

``chunked_prefill`` is judged on its output and on its work: the probe runs it with tensors
kept inside torch (:func:`mhalib.checks.work.torch_only`, so the scores cannot be built in numpy
where no measurement sees them), records the largest tensor any op allocated (one with N x N
entries, one head's whole score matrix or a full N x N mask, fails) and the most queries one
fused SDPA call took (more than ``chunk_size``: the prompt was not chunked).

The mistake models below are written here, independently of the answer key.
"""

from __future__ import annotations

import math

import numpy as np

from mhalib.checks.attention_variants import softmax_rows
from mhalib.checks.exercise import Case, Exercise, Symptom, WrongAnswer
from mhalib.checks.physical import PhysicalCheck, attention_rows
from mhalib.checks.search_spaces import CountSearch
from mhalib.checks.slips import NO_HEAD_SCALE, WrongAnswers
from mhalib.checks.torch_exercise import (
    MeasuredExercise,
    TorchCase,
    TorchExercise,
    output_kind,
    torch_model,
)
from mhalib.checks.work import largest_new_tensor, watch_attention_calls

ATTENTION_KEYS = ("attend", "tiled_attention", "flash_attention", "grouped_query_attention",
                  "decode_with_cache", "online_softmax_attention")


# -- decode_attention_intensity ----------------------------------------------------------------

_INTENSITY_ARGS = ("num_heads", "num_kv_heads", "head_dim", "seq_len", "batch_size",
                   "bytes_per_element")
_INTENSITY_DEFAULTS = {"batch_size": 1, "bytes_per_element": 2}


def _intensity_args(case) -> dict:
    """The case's arguments by name, defaults filled in."""
    return case.arguments(_INTENSITY_ARGS, _INTENSITY_DEFAULTS)


def _intensity(num_heads, num_kv_heads, head_dim, seq_len, batch_size, bytes_per_element, *,
               products=2, read_heads=None, tensors=2, bits=1):
    """FLOPs / bytes of one decode step, with knobs: ``products`` (2 = scores and weighted
    sum), ``read_heads`` (heads whose K/V are counted; default the K/V heads), ``tensors``
    (2 = K and V), ``bits`` (8 counts bits instead of bytes)."""
    flops = products * 2 * batch_size * num_heads * seq_len * head_dim
    read_heads = num_kv_heads if read_heads is None else read_heads
    return flops / (tensors * batch_size * read_heads * seq_len * head_dim * bytes_per_element
                    * bits)


class DecodeAttentionIntensity(CountSearch, Exercise):
    search_cap = 240  # single-factor changes of the count (mhalib.checks.search_spaces)

    name = "decode_attention_intensity"
    assignment = "11-serving"
    rtol, atol = 1e-9, 0.0
    answer_key_names = ("mla_decode_intensity", "prefill_attention_intensity",
                        "kv_cache_bytes", "decode_flops")

    def visible_cases(self, rng):
        n = int(rng.integers(500, 9000))
        return [
            Case("32 query heads over 8 K/V heads of 128, 4096 cached tokens, bf16",
                 (32, 8, 128, 4096)),
            Case(f"MHA (12 heads, 12 K/V heads), batch 8, float32 cache, {n} tokens",
                 (12, 12, 64, n), {"batch_size": 8, "bytes_per_element": 4}),
        ]

    def hidden_cases(self, rng):
        return [
            Case("MQA: 16 heads share 1 K/V head", (16, 1, 64, 2048)),
            Case("64 heads over 8, an 8-bit cache, batch given positionally",
                 (64, 8, 128, int(rng.integers(100, 5000)), 3, 1)),
            Case("128 heads over 8 K/V heads, 131072 tokens", (128, 8, 128, 131072)),
            Case("40 heads over 5, float32, batch 2", (40, 5, 128, 1000),
                 {"batch_size": 2, "bytes_per_element": 4}),
            Case("a single cached token", (4, 2, 16, 1)),
            Case("12 heads over 4, float32 cache (a fractional intensity)",
                 (12, 4, 64, int(rng.integers(100, 3000)), 1, 4)),
        ]

    def mistakes(self):
        def wrong(**change):
            return lambda case: _intensity(**{**_intensity_args(case), **change})

        def per_query_head(case):
            values = _intensity_args(case)
            return _intensity(**values, read_heads=values["num_heads"])

        return [
            WrongAnswer("keys_only", "the intensity is twice the right one: most likely the "
                        "bytes count only the cached keys (the step reads the values too, so the "
                        "cache traffic is 2 * B * G * N * d * bytes_per_element), or the FLOPs "
                        "were counted twice.", wrong(tensors=1)),
            WrongAnswer("per_query_head", "the intensity is num_kv_heads / num_heads (G/H) of "
                        "the right one: either the bytes count every query head (H), though "
                        "the query heads of a group share one K/V head, read once (count G "
                        "heads of K and V), or the FLOPs count only the G K/V heads, though "
                        "every query head (H) computes its own scores and weighted sum.",
                        per_query_head),
            WrongAnswer("bits_not_bytes", "the traffic was counted in bits (8 times the "
                        "bytes): intensity is FLOPs per byte.", wrong(bits=8)),
            WrongAnswer("scores_flops_only", "the intensity is half the right one: most likely "
                        "the FLOPs are half their count (only the scores q . k counted, though "
                        "the weighted sum of the values costs as much again, 2 * N * d per query "
                        "head; or a multiply-add counted as one FLOP instead of two; 4 * B * H * "
                        "N * d in all), or the bytes were counted twice (2 * B * G * N * d * "
                        "bytes_per_element in all).", wrong(products=1)),
            WrongAnswer("fixed_bytes_per_element", "bytes_per_element was ignored (a fixed 2 "
                        "bytes per element was used).",
                        wrong(bytes_per_element=2)),
            WrongAnswer("integer_division", "the FLOPs were divided by the bytes with //, which "
                        "rounds down: an intensity can be fractional (MHA with a float32 cache "
                        "does 0.5 FLOPs per byte), so divide with /.",
                        lambda case: float(math.floor(_intensity(**_intensity_args(case))))),
        ]


# -- paged_attention -----------------------------------------------------------------------------

STALE = 40.0  # magnitude of the garbage in slots and pages a sequence does not own


def paged_inputs(rng, seq_lens, *, heads, groups, d, page_size, max_pages, free_pages=3):
    """q (B, H, d), k_pages / v_pages (num_pages, G, page_size, d), block_table (B, max_pages)
    and seq_lens (B,): each sequence's pages are scattered over a shuffled pool and listed in
    an order that is not sorted; every slot no sequence owns holds large stale values."""
    seq_lens = [int(n) for n in seq_lens]
    owned = [math.ceil(n / page_size) for n in seq_lens]
    num_pages = sum(owned) + free_pages
    k_pages = rng.uniform(-STALE, STALE, size=(num_pages, groups, page_size, d))
    v_pages = rng.uniform(-STALE, STALE, size=(num_pages, groups, page_size, d))
    order = rng.permutation(num_pages)
    table = rng.integers(0, num_pages, size=(len(seq_lens), max_pages))  # stale entries
    used = 0
    for b, (n, count) in enumerate(zip(seq_lens, owned)):
        pages = order[used:used + count]
        used += count
        if count >= 2 and np.all(np.diff(pages) > 0):
            pages = pages[::-1]  # block-table order must differ from sorted order
        table[b, :count] = pages
        for t in range(n):
            page, slot = pages[t // page_size], t % page_size
            k_pages[page, :, slot] = rng.normal(size=(groups, d))
            v_pages[page, :, slot] = rng.normal(size=(groups, d))
    q = rng.normal(size=(len(seq_lens), heads, d))
    return (q, k_pages, v_pages, table.astype(np.int64), np.asarray(seq_lens, dtype=np.int64))


def _louder(args, factor: float):
    """Paged inputs whose queries are ``factor`` times larger (scores past exp's range)."""
    q, *rest = args
    return (q * factor, *rest)


def paged_variant(q, k_pages, v_pages, block_table, seq_lens, *, tiled=False,
                  sorted_pages=False, swap_page_slot=False, length="exact", scale=None,
                  nan_empty=False):
    """Paged decode attention with knobs (torch, float64 inputs).

    ``tiled``: head h reads K/V head h % G; ``sorted_pages``: the sequence's pages are used in
    sorted order; ``swap_page_slot``: page t % page_size, slot t // page_size; ``length``:
    "exact" (n keys), "page" (the whole last page), "short" (n - 1), "long" (n + 1);
    ``nan_empty``: a length-0 sequence gives NaN.
    """
    import torch

    batch, heads, d = q.shape
    groups, page_size = k_pages.shape[1], k_pages.shape[2]
    scale = 1 / math.sqrt(d) if scale is None else scale
    if tiled:
        kv_of_head = torch.arange(heads) % groups
    else:
        kv_of_head = torch.arange(heads) // (heads // groups)
    out = torch.zeros(q.shape, dtype=q.dtype)
    for b in range(batch):
        n = int(seq_lens[b])
        used = {"exact": n, "page": math.ceil(n / page_size) * page_size,
                "short": max(n - 1, 0), "long": n + 1}[length]
        if n == 0 or used == 0:
            if nan_empty:
                out[b] = torch.nan
            continue
        row = block_table[b].clone()
        owned = math.ceil(n / page_size)
        if sorted_pages:
            row[:owned] = torch.sort(row[:owned]).values
        t = torch.arange(used)
        which, slot = (t % page_size, t // page_size) if swap_page_slot else (
            t // page_size, t % page_size)
        pages = row[which]  # raises IndexError past the table, as the learner's code would
        k = k_pages[pages, :, slot].transpose(0, 1)[kv_of_head]  # (H, used, d)
        v = v_pages[pages, :, slot].transpose(0, 1)[kv_of_head]  # (H, used, d)
        scores = (k @ q[b][:, :, None])[..., 0] * scale  # (H, used)
        out[b] = (softmax_rows(scores)[:, None, :] @ v)[:, 0]  # (H, d)
    return out


class PagedAttention(TorchExercise):
    name = "paged_attention"
    assignment = "11-serving"
    answer_key_names = ATTENTION_KEYS

    def visible_cases(self, rng):
        return [
            TorchCase("3 sequences (13, 6, 16 tokens) in pages of 4; 4 query heads over 2 K/V "
                      "heads", paged_inputs(rng, [13, 6, 16], heads=4, groups=2, d=8,
                                            page_size=4, max_pages=6)),
            TorchCase("MHA, pages of 8, lengths 21 and 8",
                      paged_inputs(rng, [21, 8], heads=2, groups=2, d=16, page_size=8,
                                   max_pages=4)),
        ]

    def spare_cases(self, seed, suite):
        """Another seed's cases whose table entries past each sequence's pages name no page at
        all (the contract leaves them arbitrary): a repair that reads them (``block_table[b,
        :]`` for ``[:n // P]``) raises here and is not said (round V)."""
        cases = super().spare_cases(seed, suite)
        for case in cases:
            q, k_pages, v_pages, table, seq_lens = case.args
            page_size, table = k_pages.shape[2], table.copy()
            for b, n in enumerate(seq_lens):
                owned = math.ceil(int(n) / page_size)
                table[b, owned:] = len(k_pages) + np.arange(table.shape[1] - owned)
            case.args = (q, k_pages, v_pages, table, seq_lens)
        return cases

    def hidden_cases(self, rng):
        return [
            TorchCase("MQA (8 heads over 1), pages of 16, 4 sequences",
                      paged_inputs(rng, [40, 17, 3, 33], heads=8, groups=1, d=16,
                                   page_size=16, max_pages=4)),
            TorchCase("a sequence of length 0 gives zeros",
                      paged_inputs(rng, [0, 9, 4], heads=4, groups=2, d=8, page_size=4,
                                   max_pages=4)),
            TorchCase("float64, one token per page", paged_inputs(
                rng, [7, 5], heads=2, groups=1, d=4, page_size=1, max_pages=8),
                dtype="float64"),
            TorchCase("float16, 6 heads over 3, pages of 4", paged_inputs(
                rng, [11, 16, 2], heads=6, groups=3, d=16, page_size=4, max_pages=5),
                dtype="float16"),
            TorchCase("bfloat16, pages of 8", paged_inputs(
                rng, [19, 30], heads=4, groups=2, d=8, page_size=8, max_pages=5),
                dtype="bfloat16"),
            TorchCase("120 tokens over 8 scattered pages of 16", paged_inputs(
                rng, [120, 64, 97], heads=8, groups=4, d=8, page_size=16, max_pages=9,
                free_pages=6)),
            TorchCase("every sequence fits in one page", paged_inputs(
                rng, [5, 32, 20], heads=4, groups=4, d=8, page_size=32, max_pages=2),
                degenerate=True),
            # no more keys than features: the weights can be read back from the output
            TorchCase("float64, lengths 5 and 2 in pages of 4", paged_inputs(
                rng, [5, 2], heads=4, groups=2, d=16, page_size=4, max_pages=3),
                dtype="float64"),
            # (a pool with room past each sequence's first page: round AG's pages counted on
            # from the first one ran past the small pool above, and no output was read back)
            TorchCase("float64, lengths 7 and 3 in pages of 2, a large pool", paged_inputs(
                rng, [7, 3], heads=2, groups=1, d=16, page_size=2, max_pages=4,
                free_pages=24), dtype="float64"),
            TorchCase("a sequence of one token sees only that token", paged_inputs(
                rng, [1, 6], heads=2, groups=1, d=8, page_size=4, max_pages=2),
                degenerate=True),
            # (scores near 100: exp overflows float32 unless the row maximum is subtracted;
            # round AP's repair that dropped the shift passed every case above)
            TorchCase("queries 60 times larger: scores past exp's float32 range",
                      _louder(paged_inputs(rng, [13, 9], heads=4, groups=2, d=16, page_size=4,
                                           max_pages=4), 60.0)),
        ]

    def mistakes(self):
        def variant(**change):
            return torch_model(lambda *args: paged_variant(*args, **change))

        return [
            WrongAnswer("tiled_groups", "query head h read K/V head h % G (the K/V heads tiled) "
                        "instead of h // (H // G): heads of one group are neighbours (an index "
                        "h // (H // G), not h % G; repeat_interleave, not repeat or tile).",
                        variant(tiled=True)),
            WrongAnswer("pages_sorted", "the sequence's pages were read in sorted page-number "
                        "order; a sequence's pages are scattered over the pool in any order, and "
                        "only the block table says which comes first: key t is in page "
                        "block_table[b, t // page_size].", variant(sorted_pages=True)),
            WrongAnswer("page_slot_swapped", "page and slot are swapped: key t lives in page "
                        "block_table[b, t // page_size] at slot t % page_size.",
                        variant(swap_page_slot=True)),
            WrongAnswer("reads_whole_last_page", "every slot of the sequence's last page was "
                        "attended to, but the sequence owns only its keys t < seq_lens[b]; the "
                        "slots after them hold stale keys of an earlier sequence. Mask (or slice "
                        "away) the keys t >= seq_lens[b].", variant(length="page")),
            WrongAnswer("drops_last_key", "one key too few: a sequence of length n has keys "
                        "t = 0 .. n - 1, all of which (the newest included) the query sees.",
                        variant(length="short")),
            WrongAnswer("one_key_too_many", "one key too many: keys t = 0 .. seq_lens[b] - 1 "
                        "belong to the sequence; key seq_lens[b] is a stale slot (use t < "
                        "seq_len, not t <= seq_len).", variant(length="long")),
            WrongAnswer("no_scale", "the scores were not multiplied by 1/sqrt(d).",
                        variant(scale=1.0)),
            WrongAnswer("nan_for_empty_sequence", "a sequence of length 0 gives NaN (a softmax "
                        "over no keys); the contract wants a row of zeros.",
                        variant(nan_empty=True)),
        ]


# -- chunked_prefill -----------------------------------------------------------------------------

def prefill_inputs(rng, batch, n, d_model, num_heads, chunk_size):
    """x (B, N, d_model), four (d_model, d_model) weights scaled to unit-size projections."""
    scale = 1 / np.sqrt(d_model)
    x = rng.normal(size=(batch, n, d_model))
    weights = [rng.normal(size=(d_model, d_model)) * scale for _ in range(4)]
    return (x, *weights, num_heads, chunk_size)


def n_by_n_limit(case) -> int | None:
    """N * N (entries of one head's score matrix) when every tensor a chunked answer needs is
    smaller than that: the chunk's scores (B, H, C, N) and the (B, N, d_model) projections;
    None when the case is too small to tell."""
    x, num_heads, chunk = case.args[0], case.args[5], case.args[6]
    batch, n, d_model = x.shape
    if batch * num_heads * min(chunk, n) >= n or batch * d_model >= n:
        return None
    return n * n


def builds_n_by_n(case, meta: dict) -> bool:
    limit, numel = n_by_n_limit(case), meta.get("largest_numel")
    return limit is not None and isinstance(numel, int) and numel >= limit


def not_chunked(case, meta: dict) -> bool:
    """A fused attention call (SDPA) took more queries at once than one chunk holds: the
    prompt was attended to whole (a fused kernel never shows its N x N scores)."""
    queries, chunk = meta.get("fused_queries"), case.args[6]
    return isinstance(queries, int) and queries > chunk


def chunked_variant(x, w_q, w_k, w_v, w_o, num_heads, chunk_size, *, mask="bottom_right",
                    drop_partial=False, scale=None, output_projection=True, transpose=True):
    """Chunked causal self-attention with knobs (torch, float64 inputs).

    ``mask``: "bottom_right" (right), "top_left" (query i of a chunk sees keys 0..i: SDPA's
    is_causal on a (C, stop) block), "own_chunk" (a chunk sees only its own keys, causally),
    "none_in_chunk" (a chunk sees all its own keys, future included), "excludes_self"
    (j < position), "cache_only" (a chunk sees the earlier chunks' keys, none of its own: it
    attended before appending them; the first chunk's rows are zeros),
    "cache_only_bottom_right" (the same, with the bottom-right mask of (C, cache) applied to
    the cache alone: key j visible to position p when j <= p - C); ``drop_partial``: the last
    partial chunk gives zero rows; ``transpose=False``: each chunk's (B, C, d_model) split into
    (B, H, C, d_head) and merged back by plain reshapes.
    """
    import torch

    batch, n, d_model = x.shape
    d_head = d_model // num_heads
    scale = 1 / math.sqrt(d_head) if scale is None else scale

    def split(t):  # (B, T, d_model) -> (B, H, T, d_head), one chunk at a time
        bounds = range(0, n, chunk_size)
        if transpose:
            return t.reshape(batch, -1, num_heads, d_head).transpose(1, 2)
        return torch.cat([t[:, s:s + chunk_size].reshape(batch, num_heads, -1, d_head)
                          for s in bounds], dim=2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)  # (B, H, N, d_head)
    out = torch.zeros((batch, num_heads, n, d_head), dtype=x.dtype)
    last = n - n % chunk_size if drop_partial else n
    for start in range(0, last, chunk_size):
        stop = min(start + chunk_size, n)
        first_key = start if mask == "own_chunk" else 0
        scores = q[:, :, start:stop] @ k[:, :, first_key:stop].transpose(-2, -1) * scale
        rows = torch.arange(start, stop)[:, None]  # absolute query positions
        keys = torch.arange(first_key, stop)[None, :]  # absolute key positions
        if mask == "top_left":
            allowed = keys <= rows - start
        elif mask == "none_in_chunk":
            allowed = keys < stop
        elif mask == "excludes_self":
            allowed = keys < rows
        elif mask == "cache_only":
            allowed = (keys < start).expand(len(rows), -1)
        elif mask == "cache_only_bottom_right":  # (the mask of the chunk over the cache alone)
            allowed = keys <= rows - (stop - start)
        else:  # bottom_right and own_chunk
            allowed = keys <= rows
        scores = scores.masked_fill(~allowed, -torch.inf)
        out[:, :, start:stop] = softmax_rows(scores) @ v[:, :, first_key:stop]
    if transpose:
        merged = out.transpose(1, 2).reshape(batch, n, d_model)
    else:
        merged = torch.cat([out[:, :, s:s + chunk_size].reshape(batch, -1, d_model)
                            for s in range(0, n, chunk_size)], dim=1)
    return merged @ w_o if output_projection else merged


def _physical_prefill(rng):
    return TorchCase(PHYSICAL_LABEL, prefill_inputs(rng, 1, PHYSICAL_N, 4, 1, 64),
                     dtype="float64")


def _physical_prefill_rows(case, rows):
    """Causal attention of the chosen token positions, from the projections of every token."""
    x, w_q, w_k, w_v, w_o = (np.asarray(a, dtype=np.float64) for a in case.args[:5])
    heads = case.args[5]
    batch, n, d_model = x.shape
    d_head = d_model // heads

    def split(t):  # (B, T, d_model) -> (B, H, T, d_head)
        return t.reshape(batch, t.shape[1], heads, d_head).transpose(0, 2, 1, 3)

    q, k, v = split(x[:, rows] @ w_q), split(x @ w_k), split(x @ w_v)
    out = attention_rows(q, k, v, query_positions=rows)  # (B, H, R, d_head)
    return out.transpose(0, 2, 1, 3).reshape(batch, len(rows), d_model) @ w_o


# The large case: one head's (N, N) float64 scores take 128 MiB (float32: 64 MiB), and the
# kernel refuses the process more than twice PHYSICAL_MB of new address space; a chunk of 64
# queries against every key needs about 2 MiB (honest answers peak at 6 to 12 MiB). The limit is
# half the float32 scores, so most of them in float32 do not pass either.
PHYSICAL_N = 4096
PHYSICAL_MB = 32
PHYSICAL_LABEL = f"N = {PHYSICAL_N} tokens, d_model = 4, one head, chunks of 64, float64"


class ChunkedPrefill(MeasuredExercise):
    name = "chunked_prefill"
    axes = {"x": "B N d_model"}  # the case's sizes by name (diagnoses)
    assignment = "11-serving"
    answer_key_names = ATTENTION_KEYS
    left_torch_problem = ("the tensors left torch while it ran (.numpy(), np.asarray, .tolist() "
                          "or .item()), so its memory could not be measured")
    physical = PhysicalCheck(
        PHYSICAL_LABEL, _physical_prefill, lambda case: case.args[0].shape,
        _physical_prefill_rows, memory_mb=PHYSICAL_MB, cpu_seconds=20.0,
        memory_mistake="builds_n_by_n", row_axis=1)

    @staticmethod
    def derived_sizes(found: dict[str, int]) -> dict[str, int]:
        """The last chunk's queries, when it is short: a size a shape error may show (a mask
        made for a whole chunk), which must not be read as another size that equals it."""
        last = found["N"] % found["chunk_size"] if found.get("chunk_size") else 0
        return {"N % chunk_size": last} if last else {}

    def visible_cases(self, rng):
        return [
            TorchCase("N=96 in chunks of 16 (memory measured)",
                      prefill_inputs(rng, 1, 96, 16, 2, 16)),
            TorchCase("batch 2, N=50 in chunks of 12 (the last chunk has 2 queries)",
                      prefill_inputs(rng, 2, 50, 16, 4, 12)),
        ]

    def hidden_cases(self, rng):
        return [
            TorchCase("N=130 in chunks of 20 (last chunk partial, memory measured)",
                      prefill_inputs(rng, 1, 130, 24, 3, 20)),
            TorchCase("N=64 in chunks of 16 (memory measured)",
                      prefill_inputs(rng, 1, 64, 16, 2, 16)),
            TorchCase("float64, chunks of 1 (token by token)",
                      prefill_inputs(rng, 1, 12, 8, 2, 1), dtype="float64"),
            TorchCase("float16, N=40 in chunks of 16", prefill_inputs(rng, 1, 40, 32, 4, 16),
                      dtype="float16"),
            TorchCase("bfloat16, N=33 in chunks of 8", prefill_inputs(rng, 2, 33, 16, 2, 8),
                      dtype="bfloat16"),
            TorchCase("chunk_size larger than N (one chunk)",
                      prefill_inputs(rng, 2, 10, 16, 4, 32), degenerate=True),
            # as many tokens as a head is wide: the weights can be read back from the output
            TorchCase("float64, N=7 in chunks of 3", prefill_inputs(rng, 1, 7, 16, 2, 3),
                      dtype="float64"),
        ]

    def measure(self, func, case, args, kwargs):
        (output, calls), numel, shape = largest_new_tensor(watch_attention_calls, func, *args,
                                                           **kwargs)
        return output, {"output_kind": output_kind(output), "largest_numel": numel,
                        "largest_shape": shape, "fused_queries": max(calls.queries, default=0)}

    def work_problem(self, case, received, meta):
        if builds_n_by_n(case, meta):
            return (f"right output, but it allocated a tensor of shape "
                    f"{tuple(meta.get('largest_shape') or ())} ({meta['largest_numel']:,} "
                    f"entries), at least N x N = {n_by_n_limit(case):,}")
        if not_chunked(case, meta):
            return (f"right output, but one scaled_dot_product_attention call took "
                    f"{meta['fused_queries']} queries at once (chunk_size is {case.args[6]})")
        return None

    def reproduces(self, case, compute, received):
        """The last partial chunk dropped may come back as zero rows or as a shorter output."""
        shape = getattr(received, "shape", None)
        n = case.args[0].shape[1]
        if shape is not None and len(shape) == 3 and shape[1] < n:
            try:
                wrong = compute(case)
            except Exception:
                return False
            if shape[1] != n - n % case.args[6] or wrong.shape[1] != n:
                return False
            return super().reproduces(case, lambda _: wrong[:, :shape[1]], received)
        return super().reproduces(case, compute, received)

    def mistakes(self):
        def variant(**change):
            return torch_model(lambda *args: chunked_variant(*args, **change))

        return [
            Symptom("builds_n_by_n", "the result is right, but somewhere a tensor with N x N "
                    "entries was built (the whole score matrix, its weights, or a full N x N "
                    "mask). Chunked prefill exists to avoid that: give each chunk a score block "
                    "of (chunk, keys so far) and a mask of the same shape.",
                    lambda case, received, meta: builds_n_by_n(case, meta)),
            Symptom("not_chunked", "the result is right, but F.scaled_dot_product_attention "
                    "attended to more queries at once than one chunk holds (the whole prompt): "
                    "a fused kernel hides the N x N scores, but the point of chunked prefill is "
                    "to process chunk_size queries per step, against the cache of earlier "
                    "chunks. Call it once per chunk, with a (chunk, keys so far) mask.",
                    lambda case, received, meta: not_chunked(case, meta)),
            self.leaves_torch("the tensors left torch while it ran (.numpy(), np.asarray, "
                              ".tolist() or .item()): the check measures the memory your "
                              "function uses in torch, so keep the whole computation in torch."),
            WrongAnswer("top_left_mask", "the causal mask inside a chunk is aligned top-left: "
                        "with C queries over `stop` keys (F.scaled_dot_product_attention's "
                        "is_causal does this), query i sees keys 0..i only. Query i of the chunk "
                        "sits at position start + i: use the bottom-right mask causal_mask(C, "
                        "stop) from lesson 04.", variant(mask="top_left")),
            WrongAnswer("chunk_ignores_cache", "each chunk attends only to its own keys: the "
                        "keys and values of earlier chunks must stay in the cache and be "
                        "attended to as well.", variant(mask="own_chunk")),
            WrongAnswer("no_mask_in_chunk", "inside a chunk every query sees all the chunk's "
                        "keys, later ones included: earlier chunks are fully visible, but the "
                        "chunk's own keys need the causal mask.", variant(mask="none_in_chunk")),
            WrongAnswer("causal_excludes_self", "the causal mask is off by one: each token must "
                        "see itself too (key j <= query position, not j <).",
                        variant(mask="excludes_self")),
            WrongAnswers("attends_before_append", "each chunk attended to the cache before its "
                        "own keys and values were added to it: a query sees only keys of earlier "
                        "chunks (all of them, or, with the chunk's causal mask laid over the "
                        "cache alone, those up to its own position minus the chunk's length) "
                        "and none of its own chunk's tokens, itself included (the first chunk "
                        "sees no key at all). Append the chunk's keys and values first, then "
                        "attend over the cache with the bottom-right causal mask.",
                        variant(mask="cache_only"),
                        lambda case: [variant(mask="cache_only_bottom_right")(case)]),
            WrongAnswer("drops_last_partial_chunk", "the last, shorter chunk is skipped when N "
                        "is not a multiple of chunk_size: loop over range(0, N, chunk_size) and "
                        "clip the chunk's end at N.", variant(drop_partial=True)),
            WrongAnswer("no_scale", NO_HEAD_SCALE,
                        variant(scale=1.0)),
            WrongAnswer("no_output_projection", "the merged heads were returned without the "
                        "output projection w_o.", variant(output_projection=False)),
            WrongAnswer("heads_without_transpose", "each chunk's heads were split by a plain "
                        "reshape of (B, C, d_model) to (B, H, C, d_head) and merged back the "
                        "same way, so heads and tokens are mixed: reshape to (B, C, H, "
                        "d_head), then .transpose(1, 2) (and transpose back before the merge).",
                        variant(transpose=False)),
        ]


EXERCISES = {e.name: e for e in (DecodeAttentionIntensity(), PagedAttention(), ChunkedPrefill())}
