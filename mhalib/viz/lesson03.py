"""Lesson 03 pictures: how q . k spreads with d_k, and what that does to the softmax.

The pictures draw their own random queries and keys; the quantities the lesson asks for
(variance, entropy, Jacobian) come from the learner's functions in the notebook, except in the
slider, which must work before the exercises do and therefore shows only the weights and the
size of the softmax's gradient (a closed form for the Frobenius norm of the Jacobian).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from mhalib.viz.explorer import figure_explorer

D_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)


def _rows_softmax(scores: np.ndarray) -> np.ndarray:
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def dot_products(d_k: int, n: int = 20_000, seed: int = 0) -> np.ndarray:
    """``n`` samples of q . k with q, k ~ N(0, I_{d_k}): shape (n,)."""
    rng = np.random.default_rng([seed, d_k])
    return np.einsum("sd,sd->s", rng.standard_normal((n, d_k)), rng.standard_normal((n, d_k)))


def attention_rows(d_k: int, n_rows: int = 256, n_keys: int = 16, scaled: bool = True,
                   seed: int = 0) -> np.ndarray:
    """Softmax weights of ``n_rows`` random queries over ``n_keys`` random keys: (n_rows, n_keys).

    Entries of q and k are N(0, 1) in d_k dimensions; ``scaled`` divides scores by sqrt(d_k).
    """
    rng = np.random.default_rng([seed, d_k, n_keys])
    q = rng.standard_normal((n_rows, 1, d_k))  # (rows, 1, d_k)
    k = rng.standard_normal((n_rows, n_keys, d_k))  # (rows, keys, d_k)
    scores = np.einsum("rqd,rkd->rk", q, k)  # (rows, keys)
    return _rows_softmax(scores / np.sqrt(d_k) if scaled else scores)


def gradient_size(weights: np.ndarray) -> np.ndarray:
    """Frobenius norm of the softmax Jacobian diag(p) - p p^T for each row p: shape (rows,).

    ||diag(p) - p p^T||^2 = sum p^2 - 2 sum p^3 + (sum p^2)^2.
    """
    p2 = np.sum(weights**2, axis=-1)
    p3 = np.sum(weights**3, axis=-1)
    return np.sqrt(np.maximum(p2 - 2 * p3 + p2**2, 0.0))


@lru_cache(maxsize=1024)
def _mean_gradient_size(d_k: int, n_keys: int, scaled: bool, seed: int) -> float:
    return float(gradient_size(attention_rows(d_k, 128, n_keys, scaled, seed)).mean())


def score_histograms(d_ks=(4, 64, 512), n: int = 10_000, seed: int = 0):
    """Histograms of q . k (left) and q . k / sqrt(d_k) (right) for several d_k."""
    import matplotlib.pyplot as plt

    fig, (raw, scaled) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    for d_k in d_ks:
        dots = dot_products(d_k, n, seed)
        raw.hist(dots, bins=80, histtype="step", density=True,
                 label=f"d_k = {d_k}: std {dots.std():.1f}")
        scaled.hist(dots / np.sqrt(d_k), bins=80, histtype="step", density=True,
                    label=f"d_k = {d_k}: std {(dots / np.sqrt(d_k)).std():.2f}")
    raw.set_title("q . k")
    scaled.set_title("q . k / sqrt(d_k)")
    for ax in (raw, scaled):
        ax.set_yticks([])
        ax.legend(fontsize=8)
    return fig


def plot_variance(d_ks, measured, ax=None):
    """Measured Var(q . k) against d_k on log-log axes, with the line Var = d_k."""
    import matplotlib.pyplot as plt

    d_ks = np.asarray(d_ks, dtype=float)
    measured = np.asarray(measured, dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
    ax.loglog(d_ks, d_ks, color="0.6", label="Var = d_k")
    ax.loglog(d_ks, measured, "o", color="#b3261e", label="measured Var(q . k)")
    ax.loglog(d_ks, measured / d_ks, "s", color="#1f5fa8",
              label="measured / d_k = Var(q . k / sqrt(d_k))")
    ax.set_xlabel("d_k")
    ax.set_ylabel("variance")
    ax.legend(fontsize=8)
    return ax


def plot_curves(d_ks, unscaled, scaled, ylabel: str, ceiling=None, ax=None):
    """One quantity against d_k, with and without the 1/sqrt(d_k) scale."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.8), layout="constrained")
    ax.semilogx(d_ks, unscaled, "o-", color="#b3261e", label="softmax(q . k)")
    ax.semilogx(d_ks, scaled, "s-", color="#1f5fa8", label="softmax(q . k / sqrt(d_k))")
    if ceiling is not None:
        ax.axhline(ceiling, color="0.6", linestyle="--", label=f"maximum {ceiling:.2f}")
    ax.set_xlabel("d_k")
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    return ax


def saturation_figure(d_k: int, n_keys: int = 16, seed: int = 0):
    """One query's weights with and without the scale, and the gradient size against d_k."""
    import matplotlib.pyplot as plt

    fig, (bars, curve) = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    raw = attention_rows(d_k, 1, n_keys, scaled=False, seed=seed)[0]
    scaled = attention_rows(d_k, 1, n_keys, scaled=True, seed=seed)[0]
    width = 0.4
    bars.bar(np.arange(n_keys) - width / 2, raw, width, color="#b3261e", label="unscaled")
    bars.bar(np.arange(n_keys) + width / 2, scaled, width, color="#1f5fa8", label="scaled")
    bars.set_ylim(0, 1.05)
    bars.set_xlabel("key j")
    bars.set_title(f"one query's weights at d_k = {d_k}")
    bars.legend(fontsize=8)
    sizes = {scaled_: [_mean_gradient_size(d, n_keys, scaled_, seed) for d in D_KS]
             for scaled_ in (False, True)}
    plot_curves(D_KS, sizes[False], sizes[True], "mean ||diag(p) - p p^T||", ax=curve)
    here = [_mean_gradient_size(d_k, n_keys, s, seed) for s in (False, True)]
    curve.plot([d_k, d_k], here, "k*", markersize=12, label=f"d_k = {d_k}")
    curve.set_title("how much gradient passes through the softmax")
    return fig


def saturation_explorer(d_k: int = 16, max_d_k: int = 512, seed: int = 0):
    """An ``IntSlider`` labelled "d_k" that redraws :func:`saturation_figure`.

    Returns the widget box with ``box.slider``, ``box.output`` and ``box.redraws``.
    """
    import ipywidgets as widgets

    slider = widgets.IntSlider(value=d_k, min=1, max=max_d_k, description="d_k",
                               continuous_update=False)
    slider.add_class("mhalib-dk-slider")
    return figure_explorer(lambda: saturation_figure(slider.value, seed=seed), slider=slider)
