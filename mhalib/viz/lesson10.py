"""Lesson 10 pictures and demonstrations: the KV cache of MHA, GQA, MQA and MLA on real models
(a table and an explorer), the rank of MLA's key matrix, what absorbed decoding trades, why RoPE
and absorption do not mix, and DeepSeek's decoupled RoPE computed naively and decoded from a
cache of latents and shared rotated keys.

Nothing here calls the answer key (the notebook also runs in the grader's answer-free copy of
mhalib): cache functions take the learner's ``mla_kv_cache_bytes`` as an argument, and the RoPE
decoder takes the absorbed weights the learner's ``absorb_mla_weights`` produced.
"""

from __future__ import annotations

import math

import numpy as np

from mhalib.viz.explorer import figure_explorer

GIB = 2**30
CACHE_MODELS = ("DeepSeek-V3", "DeepSeek-V2", "DeepSeek-V2-Lite", "Llama-3.1 8B", "Llama-3.1 70B",
                "Llama-3.1 405B", "Mistral 7B", "Qwen2 7B")
KIND_COLOURS = {"MHA": "#b3261e", "GQA": "#1f5fa8", "MQA": "#2e7d32", "MLA": "#7b3fa0"}
GQA_GROUPS = 8  # the GQA variant drawn for every model (Llama 3, Mistral: 8 K/V heads)
# models whose released weights are FP8, not bf16: DeepSeek-V3 ("we only provide FP8 weights",
# README of github.com/deepseek-ai/DeepSeek-V3; e4m3 with a float32 scale per 128 x 128 block,
# README_WEIGHTS.md)
RELEASED_IN_FP8 = ("DeepSeek-V3",)


def cache_variants(mla_kv_cache_bytes, config, bytes_per_element: int = 2) -> list[dict]:
    """Bytes per token of the cache of ``config`` (a ModelConfig) under each attention kind, at
    the model's own layers, heads and head_dim.

    MHA: K and V of every head; GQA: of ``GQA_GROUPS`` groups (or the model's own K/V heads);
    MQA: of one head; MLA: the model's own latent and RoPE key, or for a non-MLA model DeepSeek's
    proportions (latent 4 * head_dim, RoPE key head_dim / 2). ``published`` marks the model's own.
    """
    layers, dim = config.num_layers, config.head_dim
    groups = config.num_kv_heads if config.attention_kind == "GQA" else GQA_GROUPS

    def kv_cache_bytes(kv_heads):  # lesson 06: a key and a value per K/V head, every layer
        return 2 * layers * kv_heads * dim * bytes_per_element

    if config.is_mla:
        rank, rope = config.kv_lora_rank, config.qk_rope_head_dim
    else:
        rank, rope = 4 * dim, dim // 2
    rows = [("MHA", f"{config.num_heads} K/V heads", kv_cache_bytes(config.num_heads)),
            ("GQA", f"{groups} K/V heads", kv_cache_bytes(groups)),
            ("MQA", "1 K/V head", kv_cache_bytes(1)),
            ("MLA", f"latent {rank} + RoPE key {rope}",
             mla_kv_cache_bytes(layers, rank, rope, 1, 1, bytes_per_element))]
    return [{"kind": kind, "shape": shape, "bytes_per_token": size,
             "published": kind == config.cache_kind} for kind, shape, size in rows]


def cache_table_rows(mla_kv_cache_bytes, models: dict, names=CACHE_MODELS,
                     bytes_per_element: int = 2) -> list[dict]:
    """One row per model: bytes per token under MHA, GQA, MQA and MLA (its own marked with *)."""
    rows = []
    for name in names:
        config = models[name]
        row = {"model": name, "layers": config.num_layers, "heads": config.num_heads,
               "d_head": config.head_dim}
        for variant in cache_variants(mla_kv_cache_bytes, config, bytes_per_element):
            mark = " *" if variant["published"] else ""
            row[f"{variant['kind']} bytes/token"] = f"{variant['bytes_per_token']:,}{mark}"
        rows.append(row)
    return rows


def cache_figure(mla_kv_cache_bytes, config, seq_len: int = 131072, batch_size: int = 1):
    """Horizontal bars: the cache of ``config`` for ``batch_size`` sequences of ``seq_len``
    tokens in GiB (bf16) under each attention kind, its own drawn solid, the weights dotted."""
    import matplotlib.pyplot as plt

    variants = cache_variants(mla_kv_cache_bytes, config)
    sizes = [v["bytes_per_token"] * seq_len * batch_size / GIB for v in variants]
    fig, ax = plt.subplots(figsize=(8, 3.2), layout="constrained")
    for i, (variant, size) in enumerate(zip(variants, sizes)):
        colour = KIND_COLOURS[variant["kind"]]
        ax.barh(i, size, color=colour if variant["published"] else "white", edgecolor=colour,
                hatch=None if variant["published"] else "//", lw=1.5)
        label = f"{size:,.1f} GiB" + ("  (as published)" if variant["published"] else "")
        ax.annotate(label, (size, i), xytext=(4, 0), textcoords="offset points", va="center",
                    fontsize=9)
    ax.set_yticks(range(len(variants)),
                  [f"{v['kind']}: {v['shape']}" for v in variants], fontsize=9)
    ax.invert_yaxis()
    weights = config.published_params * 2 / GIB
    ax.axvline(weights, color="black", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_xlim(min(sizes) / 2, max(max(sizes), weights) * 8)
    released = " (released in FP8: about half)" if config.name in RELEASED_IN_FP8 else ""
    ax.set_xlabel(f"KV cache (GiB, bf16, log scale); dotted: the weights in bf16, "
                  f"{weights:,.0f} GiB{released}")
    ax.set_title(f"{config.name}: {config.num_layers} layers, {config.num_heads} heads of "
                 f"{config.head_dim}, {seq_len:,} tokens x batch {batch_size}", fontsize=10)
    return fig


def cache_explorer(mla_kv_cache_bytes, models: dict, model: str = "DeepSeek-V3"):
    """A "model" dropdown, a "tokens" selector and a "batch" slider that redraw
    :func:`cache_figure`. ``box.model``, ``box.tokens``, ``box.batch``, ``box.output`` and
    ``box.redraws`` are there for tests."""
    import ipywidgets as widgets

    names = [name for name in CACHE_MODELS if name in models] or sorted(models)
    choose = widgets.Dropdown(options=names, value=model if model in names else names[0],
                              description="model")
    tokens = widgets.SelectionSlider(options=[2**k for k in range(10, 18)], value=2**17,
                                     description="tokens", continuous_update=False)
    batch = widgets.IntSlider(value=1, min=1, max=64, description="batch",
                              continuous_update=False)
    return figure_explorer(
        lambda: cache_figure(mla_kv_cache_bytes, models[choose.value], tokens.value, batch.value),
        model=choose, tokens=tokens, batch=batch)


def singular_values_figure(w_k_mha, w_k_mla, d_c: int):
    """Singular values (log scale) of an ordinary key matrix and of MLA's w_dkv @ w_uk: the
    latter has only d_c non-zero ones, whatever the number of heads."""
    import matplotlib.pyplot as plt
    import torch

    fig, ax = plt.subplots(figsize=(7, 3.4), layout="constrained")
    for w, label, colour in ((w_k_mha, "MHA: W_k", KIND_COLOURS["MHA"]),
                             (w_k_mla, "MLA: W_dkv @ W_uk", KIND_COLOURS["MLA"])):
        values = torch.linalg.svdvals(w.double()).numpy()
        ax.semilogy(np.arange(1, len(values) + 1), np.maximum(values, 1e-18), "o-", ms=3,
                    color=colour, label=label)
    ax.axvline(d_c + 0.5, color="grey", ls="--", lw=1)
    ax.annotate(f"d_c = {d_c}", (d_c + 0.5, 1e-10), xytext=(4, 0), textcoords="offset points",
                fontsize=9)
    ax.set_xlabel("singular value index")
    ax.set_ylabel("singular value")
    ax.set_title("The key matrix of every head together, d_model x (num_heads * d_head)",
                 fontsize=10)
    ax.legend(fontsize=9)
    return fig


def decode_trade(config) -> list[dict]:
    """Per layer and per cached token, for one decoded query of ``config`` (an MLA ModelConfig):
    numbers read from the cache and multiply-adds spent, with keys and values expanded per head
    and cached (DeepSeek's reference code in its "naive" mode) against absorbed (the latent and
    the shared RoPE key cached)."""
    heads, nope, rope = config.num_heads, config.head_dim, config.qk_rope_head_dim
    rank, v = config.kv_lora_rank, config.v_head_dim
    return [
        {"form": "expanded K and V cached", "read": heads * (nope + rope + v),
         "mults": heads * (nope + rope + v)},
        {"form": "absorbed, latent + RoPE key cached", "read": rank + rope,
         "mults": heads * (rank + rope + rank)},
    ]


def decode_trade_figure(config):
    """Two bar panels from :func:`decode_trade`: cache numbers read and multiply-adds, per
    layer and cached token, for one new token."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows = decode_trade(config)
    fig, axes = plt.subplots(1, 2, figsize=(10, 2.4), layout="constrained", sharey=True)
    colours = [KIND_COLOURS["MHA"], KIND_COLOURS["MLA"]]
    for ax, key, title in ((axes[0], "read", "numbers read from the cache"),
                           (axes[1], "mults", "multiply-adds (scores and values)")):
        values = [row[key] for row in rows]
        ax.barh([0, 1], values, color=colours)
        for i, value in enumerate(values):
            ax.annotate(f"{value:,}", (value, i), xytext=(3, 0), textcoords="offset points",
                        va="center", fontsize=9)
        ax.set_xlim(0, max(values) * 1.3)
        ax.xaxis.set_major_locator(MaxNLocator(4))
        ax.set_title(title, fontsize=10)
    axes[0].set_yticks([0, 1], [row["form"] for row in rows], fontsize=9)
    axes[0].invert_yaxis()
    fig.suptitle(f"{config.name}, one new token: per layer and per cached token", fontsize=10)
    return fig


def rope_coupling(w_q_h, w_uk_h, offsets) -> np.ndarray:
    """Relative distance between the matrix that links x_t to c_s under RoPE,
    W_q_h R(s - t) W_uk_h^T, and the position-free W_q_h W_uk_h^T, for each offset s - t."""
    still = w_q_h @ w_uk_h.T  # (d_model, d_c)
    result = []
    for offset in offsets:
        # keys are rows here: a key k rotated by m positions is k @ R(m).T
        turned = w_uk_h @ rotation_matrix(w_uk_h.shape[1], int(offset), dtype=w_uk_h.dtype).T
        linked = w_q_h @ turned.T  # (d_model, d_c)
        result.append(float((linked - still).norm() / still.norm()))
    return np.array(result)


def rope_coupling_figure(w_q_h, w_uk_h, max_offset: int = 64):
    """:func:`rope_coupling` against the offset: zero only at s = t."""
    import matplotlib.pyplot as plt

    offsets = np.arange(0, max_offset + 1)
    distance = rope_coupling(w_q_h, w_uk_h, offsets)
    fig, ax = plt.subplots(figsize=(7, 3), layout="constrained")
    ax.plot(offsets, distance, "o-", ms=3, color=KIND_COLOURS["MLA"])
    ax.set_xlabel("offset s - t between the key's and the query's positions")
    ax.set_ylabel("relative change")
    ax.set_title("With RoPE on the keys, the matrix between x_t and c_s changes with s - t",
                 fontsize=10)
    return fig


def random_mla_weights(d_model: int, num_heads: int, d_head: int, d_c: int, d_rope: int = 0,
                       seed: int = 0, dtype=None):
    """Random MLA weights ``(w_dkv, w_uk, w_uv, w_q, w_o)`` in the course's ``x @ W`` layout,
    scaled so that every projection is about unit size; with ``d_rope`` also ``w_qr (d_model,
    num_heads * d_rope)`` and ``w_kr (d_model, d_rope)`` for the decoupled RoPE part."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    width = num_heads * d_head
    shapes = [(d_model, d_c), (d_c, width), (d_c, width), (d_model, width), (width, d_model)]
    if d_rope:
        shapes += [(d_model, num_heads * d_rope), (d_model, d_rope)]
    dtype = dtype or torch.get_default_dtype()
    return tuple((torch.randn(shape, generator=generator) / shape[0] ** 0.5).to(dtype)
                 for shape in shapes)


# -- DeepSeek's decoupled RoPE (DeepSeek-V2 section 2.1.3) ---------------------------------------

def rotation_matrix(d: int, position: int, base: float = 10000.0, dtype=None):
    """The (d, d) rotary rotation R(position) for column vectors, rotate-half pairing: feature i
    turns with feature i + d/2 by the angle position * base^(-2i/d). R(t).T @ R(s) == R(s - t)."""
    import torch

    if d % 2:
        raise ValueError(f"d={d} must be even: RoPE turns pairs of features")
    half = d // 2
    angles = position * base ** (-torch.arange(half, dtype=torch.float64) * 2 / d)  # (d/2,)
    cos, sin = torch.diag(angles.cos()), torch.diag(angles.sin())
    rotation = torch.cat([torch.cat([cos, -sin], dim=1), torch.cat([sin, cos], dim=1)])
    return rotation.to(dtype or torch.get_default_dtype())


def _rope_rows(t, first_position: int = 0):
    """Rotate each row vector t[..., n, :] by R(first_position + n): row @ R.T."""
    import torch

    d, n = t.shape[-1], t.shape[-2]
    rotations = torch.stack([rotation_matrix(d, first_position + i, dtype=t.dtype)
                             for i in range(n)])  # (N, d, d)
    return (t.unsqueeze(-2) @ rotations.transpose(-2, -1)).squeeze(-2)


def rope_mla_attention(x, w_dkv, w_uk, w_uv, w_q, w_o, w_qr, w_kr, num_heads):
    """Causal MLA with decoupled RoPE, the naive way: head h's query is [x @ w_q_h ;
    RoPE(x @ w_qr_h)], its key [c @ w_uk_h ; RoPE(x @ w_kr)] (the rotated part shared by all
    heads), scores scaled by 1/sqrt(d_head + d_rope). ``w_qr (d_model, H * d_rope)``,
    ``w_kr (d_model, d_rope)`` with d_rope even and at least 2. Returns (B, N, d_model)."""
    import torch

    batch, n, _ = x.shape
    d_head, d_rope = w_q.shape[1] // num_heads, w_kr.shape[1]
    if d_rope < 2:
        raise ValueError(f"w_kr.shape[1]={d_rope}: the RoPE part needs at least 2 features")

    def split(t):  # (B, N, H * d) -> (B, H, N, d)
        return t.reshape(batch, n, num_heads, -1).transpose(1, 2)

    c = x @ w_dkv  # (B, N, d_c)
    k_rope = _rope_rows(x @ w_kr)[:, None].expand(batch, num_heads, n, d_rope)  # shared
    q = torch.cat([split(x @ w_q), _rope_rows(split(x @ w_qr))], dim=-1)  # (B, H, N, dh + dr)
    k = torch.cat([split(c @ w_uk), k_rope], dim=-1)  # (B, H, N, dh + dr)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head + d_rope)  # (B, H, N, N)
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    ctx = weights @ split(c @ w_uv)  # (B, H, N, d_head)
    return ctx.transpose(1, 2).reshape(batch, n, -1) @ w_o


def rope_mla_decode(x, w_dkv, w_qr, w_kr, w_q_latent, w_o_latent, d_head: int):
    """:func:`rope_mla_attention`, one token at a time, from a cache that holds per token only
    the latent (d_c numbers) and the shared rotated key (d_rope numbers).

    ``w_q_latent (H, d_model, d_c)`` and ``w_o_latent (H, d_c, d_model)`` are the absorbed
    weights (the learner's ``absorb_mla_weights``). Returns ``(output (B, N, d_model),
    numbers cached per token)``.
    """
    import torch

    batch, n, _ = x.shape
    num_heads, d_rope = w_q_latent.shape[0], w_kr.shape[1]
    latents, rope_keys, outputs = [], [], []
    for t in range(n):
        x_t = x[:, t:t + 1]  # (B, 1, d_model): only the new token is projected
        latents.append(x_t @ w_dkv)  # (B, 1, d_c)
        rope_keys.append(_rope_rows(x_t @ w_kr, first_position=t))  # (B, 1, d_rope)
        c, k_rope = torch.cat(latents, dim=1), torch.cat(rope_keys, dim=1)  # (B, t + 1, .)
        q_latent = x_t[:, None] @ w_q_latent  # (B, H, 1, d_c)
        q_rope = _rope_rows((x_t @ w_qr).reshape(batch, 1, num_heads, d_rope).transpose(1, 2),
                            first_position=t)  # (B, H, 1, d_rope)
        scores = (q_latent @ c[:, None].transpose(-2, -1)
                  + q_rope @ k_rope[:, None].transpose(-2, -1)) / math.sqrt(d_head + d_rope)
        mixed = torch.softmax(scores, dim=-1) @ c[:, None]  # (B, H, 1, d_c)
        outputs.append((mixed @ w_o_latent).sum(dim=1))  # (B, 1, d_model)
    return torch.cat(outputs, dim=1), latents[0].shape[-1] + d_rope
