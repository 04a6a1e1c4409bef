"""Lesson 09 pictures: q.k against the distance m - n under RoPE (and its widget), the
wavelength of every rotating pair for the bases of real models, and the two pair layouts.

The rotations here use :func:`mhalib.nn.rope.apply_rotary` (the modules' own RoPE), never the
learner's functions, so the pictures are right whatever the exercises hold.
"""

from __future__ import annotations

import math

import numpy as np

from mhalib.viz.explorer import figure_explorer

# Published context lengths and RoPE settings (Hugging Face config.json of each model):
# meta-llama/Llama-2-7b-hf: max_position_embeddings 4096 and no rope_theta entry, so
# LlamaConfig's default 10000.0 applies (the theta=10000.0 of Meta's own Llama code);
# meta-llama/Llama-3.1-8B: hidden_size 4096 over 32 heads (head_dim 128), rope_theta 500000.0,
# max_position_embeddings 131072, rope_scaling {rope_type "llama3", factor 8.0,
# low_freq_factor 1.0, high_freq_factor 4.0, original_max_position_embeddings 8192}.
LLAMA2_CONTEXT = 4096
LLAMA3_ORIGINAL_CONTEXT = 8192
LLAMA31_CONTEXT = 131072
LLAMA31_ROPE_SCALING = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                        "original_max_position_embeddings": 8192}

BASES = (100.0, 10000.0, 500000.0)


# -- q.k against the distance --------------------------------------------------------------------

def query_key_pair(head_dim: int = 64, seed: int = 0):
    """A float64 query and a key that resembles it (k = q + noise), shape (head_dim,) each."""
    rng = np.random.default_rng(seed)
    q = rng.normal(size=head_dim)
    return q, q + 0.5 * rng.normal(size=head_dim)


def scores_by_distance(q, k, distances, base: float, shift: int = 0) -> np.ndarray:
    """q rotated at position shift + delta, dotted with k rotated at position shift, for each
    delta = m - n in ``distances``."""
    import torch

    from mhalib.nn.rope import apply_rotary

    distances = np.asarray(distances, dtype=np.int64)
    n = len(distances)
    q_rows = torch.tensor(np.tile(q, (n, 1)))  # (D, d)
    k_rows = torch.tensor(np.tile(k, (n, 1)))  # (D, d)
    q_rot = apply_rotary(q_rows, torch.from_numpy(shift + distances), base)
    k_rot = apply_rotary(k_rows, torch.full((n,), shift, dtype=torch.int64), base)
    return (q_rot * k_rot).sum(-1).numpy()


def relative_score_figure(base: float = 10000.0, shift: int = 0, head_dim: int = 64,
                          max_distance: int = 256, seed: int = 0):
    """q.k against m - n with the pair at positions (shift + delta, shift), over the same curve
    at (delta, 0): the two coincide, whatever the shift."""
    import matplotlib.pyplot as plt

    q, k = query_key_pair(head_dim, seed)
    distances = np.arange(max_distance + 1)
    at_zero = scores_by_distance(q, k, distances, base, 0)
    shifted = scores_by_distance(q, k, distances, base, shift)
    fig, ax = plt.subplots(figsize=(8, 3.4), layout="constrained")
    ax.plot(distances, at_zero, color="#bbbbbb", lw=4, label="key at position 0")
    ax.plot(distances, shifted, color="#1f5fa8", lw=1.2, label=f"key at position {shift}")
    ax.axhline(float(q @ k), color="#e08a00", ls="--", lw=1, label="q . k without RoPE")
    ax.set_xlabel("distance m - n (query at m, key at n)")
    ax.set_ylabel("rotated q . k")
    ax.set_title(f"head_dim {head_dim}, base {base:g}: largest gap between the curves "
                 f"{np.abs(at_zero - shifted).max():.1e}", fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    return fig


def relative_score_explorer(head_dim: int = 64, max_distance: int = 256):
    """A base ``Dropdown`` and a shift ``IntSlider`` that redraw :func:`relative_score_figure`.

    ``box.base``, ``box.shift``, ``box.output`` and ``box.redraws`` are there for tests.
    """
    import ipywidgets as widgets

    base = widgets.Dropdown(options=[(f"{b:g}", b) for b in BASES], value=10000.0,
                            description="base")
    shift = widgets.IntSlider(value=0, min=0, max=100_000, step=500, description="shift",
                              continuous_update=False)
    return figure_explorer(
        lambda: relative_score_figure(base.value, shift.value, head_dim, max_distance),
        base=base, shift=shift)


# -- wavelengths ---------------------------------------------------------------------------------

def inv_frequencies(head_dim: int, base: float) -> np.ndarray:
    """Radians per position of each pair i = 0 .. head_dim/2 - 1: base ** (-2 i / head_dim)."""
    return base ** (-2.0 * np.arange(head_dim // 2) / head_dim)


def llama3_inv_frequencies(head_dim: int = 128, base: float = 500000.0,
                           factor: float = 8.0, low_freq_factor: float = 1.0,
                           high_freq_factor: float = 4.0,
                           original_max_position_embeddings: int = 8192) -> np.ndarray:
    """Llama 3.1's ``rope_type="llama3"`` frequencies: pairs whose wavelength is longer than
    original / low_freq_factor tokens turn ``factor`` times slower, pairs shorter than
    original / high_freq_factor are kept, and the ones between are blended."""
    inv = inv_frequencies(head_dim, base)
    wavelength = 2 * math.pi / inv
    low_wavelength = original_max_position_embeddings / low_freq_factor  # 8192 for Llama 3.1
    high_wavelength = original_max_position_embeddings / high_freq_factor  # 2048
    smooth = ((original_max_position_embeddings / wavelength - low_freq_factor)
              / (high_freq_factor - low_freq_factor))
    blended = (1 - smooth) * inv / factor + smooth * inv
    return np.where(wavelength > low_wavelength, inv / factor,
                    np.where(wavelength < high_wavelength, inv, blended))


def wavelength_figure(head_dim: int = 128):
    """Tokens per full turn of every pair (log scale) for base 10000, base 500000, and base
    500000 with Llama 3.1's scaling, against the context lengths of Llama 2 and Llama 3.1."""
    import matplotlib.pyplot as plt

    pairs = np.arange(head_dim // 2)
    fig, ax = plt.subplots(figsize=(8, 3.8), layout="constrained")
    curves = [("base 10000 (Llama 2)", 2 * math.pi / inv_frequencies(head_dim, 1e4), "#b3261e",
               "-"),
              ("base 500000 (Llama 3)", 2 * math.pi / inv_frequencies(head_dim, 5e5), "#1f5fa8",
               "-"),
              ("base 500000 + llama3 scaling (Llama 3.1)",
               2 * math.pi / llama3_inv_frequencies(head_dim, 5e5, **LLAMA31_ROPE_SCALING),
               "#2e7d32", "--")]
    for label, wavelengths, colour, style in curves:
        ax.semilogy(pairs, wavelengths, style, color=colour, label=label)
    for tokens, label in ((LLAMA2_CONTEXT, "Llama 2 context 4096"),
                          (LLAMA3_ORIGINAL_CONTEXT, "Llama 3 context 8192"),
                          (LLAMA31_CONTEXT, "Llama 3.1 context 131072")):
        ax.axhline(tokens, color="grey", lw=0.8, ls=":")
        ax.annotate(label, (0, tokens), va="bottom", fontsize=8, color="dimgrey")
    ax.set_xlabel(f"pair i (head_dim {head_dim})")
    ax.set_ylabel("wavelength: tokens per full turn")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("Fast pairs tell neighbours apart; slow pairs tell far tokens apart",
                 fontsize=10)
    return fig


# -- the two layouts -----------------------------------------------------------------------------

def pair_layout_figure(head_dim: int = 8):
    """Features 0 .. head_dim - 1 with an arc for each rotating pair: rotate-half (i, i + d/2)
    above, adjacent (2i, 2i + 1) below."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Arc

    half = head_dim // 2
    layouts = [("rotate-half (GPT-NeoX, Hugging Face Llama)", [(i, i + half) for i in range(half)]),
               ("adjacent pairs (RoFormer, Meta's Llama code)",
                [(2 * i, 2 * i + 1) for i in range(half)])]
    colours = plt.get_cmap("tab10")
    fig, axes = plt.subplots(2, 1, figsize=(7, 3.6), layout="constrained")
    for ax, (title, pairs) in zip(axes, layouts):
        for pair_index, (a, b) in enumerate(pairs):
            colour = colours(pair_index % 10)
            for feature in (a, b):
                ax.add_patch(plt.Rectangle((feature - 0.4, 0), 0.8, 0.8, color=colour,
                                           alpha=0.35))
            ax.add_patch(Arc(((a + b) / 2, 0.8), b - a, 0.4 + 0.25 * (b - a), theta1=0,
                             theta2=180, color=colour, lw=1.5))
            ax.annotate(f"θ{pair_index}", ((a + b) / 2, 1.0 + 0.125 * (b - a)), ha="center",
                        fontsize=8, color=colour)
        for feature in range(head_dim):
            ax.annotate(str(feature), (feature, 0.4), ha="center", va="center", fontsize=9)
        ax.set_xlim(-0.7, head_dim - 0.3)
        ax.set_ylim(-0.1, 1.4 + 0.125 * half)
        ax.set_title(title, fontsize=10)
        ax.axis("off")
    return fig
