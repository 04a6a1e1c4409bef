"""Readings added after round AC (issue 22), each with a slip written here, apart from the
catalogue that found its kind: a library function taken for its look-alike (log1p for log), an
unpacking mended by making one name hold what another holds (the use offered instead), a size
one short of a square's side (an off-diagonal), and a tuple read at the part that is wrong
beyond the case's tolerance, not at a part only rounded otherwise."""

from __future__ import annotations

import ast
import math

import numpy as np
import pytest
import torch

from mhalib.checks import get_exercise, judge_record
from mhalib.checks.explain_forms import _first_difference
from mhalib.checks.explain_shapes import shape_reading
from mhalib.checks.mutant_schema import build_schema
from mhalib.checks.probe import probe
from tests.checks.repair_harness import repaired, searching  # noqa: F401 (fixture)


def judged(exercise: str, func, seed: int = 1):
    checker = get_exercise(exercise)
    return judge_record(exercise, probe(checker, func, seed, "grading"), seed)


def merge_states_with_log1p(out_a, lse_a, out_b, lse_b):
    ct = torch.promote_types(out_a.dtype, torch.float32)
    a, b = lse_a.to(ct), lse_b.to(ct)
    top = torch.maximum(a, b)
    top = torch.where(torch.isinf(top), torch.zeros_like(top), top)
    wa, wb = torch.exp(a - top), torch.exp(b - top)
    total = wa + wb
    safe = torch.where(total > 0, total, torch.ones_like(total))
    out = (wa[..., None] * out_a.to(ct) + wb[..., None] * out_b.to(ct)) / safe[..., None]
    lse = torch.where(total > 0, top + torch.log1p(total), torch.full_like(total, -math.inf))
    return out.to(out_a.dtype), lse.to(lse_a.dtype)  # log1p(t) is log(1 + t), not log(t)


@pytest.mark.usefixtures("searching")
def test_a_look_alike_library_function_is_named():
    repair, verdict = repaired("merge_attention_states", merge_states_with_log1p)
    assert not verdict.passed
    assert repair is not None and "torch.log(" in repair["new"], (repair, verdict.diagnosis)
    assert "log1p" in repair["old"], repair


def rope_angles_over_the_tokens(x, positions, base=10000.0):
    tokens, width = x.shape[-2], x.shape[-1]
    if width % 2:
        raise ValueError(f"head_dim={width} must be even")
    half = width // 2
    inv = base ** (-torch.arange(0, half, dtype=torch.float64) * 2 / tokens)  # width belongs
    angles = positions.double()[:, None] * inv[None, :]  # (N, d/2)
    cos, sin = angles.cos().float(), angles.sin().float()
    first, second = x[..., :half].float(), x[..., half:].float()
    return torch.cat([first * cos - second * sin, first * sin + second * cos], -1).to(x.dtype)


@pytest.mark.usefixtures("searching")
def test_an_unpacking_mended_into_twins_offers_the_use_instead():
    repair, verdict = repaired("apply_rope", rope_angles_over_the_tokens)
    assert not verdict.passed
    assert repair is not None, verdict.diagnosis
    assert "read `width` where `tokens` is used" in verdict.diagnosis, verdict.diagnosis


def test_a_size_one_short_of_a_side_names_an_off_diagonal():
    named = {"weights.shape[0]": 5, "weights.shape[1]": 12, "weights.shape[2]": 12}
    found = shape_reading((5,), (11,), "the output", named)
    assert found is not None and "a diagonal just off the main one" in found[1], found
    assert "11 = weights.shape[1] - 1" in found[1], found


def test_a_tuple_is_read_where_it_is_wrong_beyond_the_tolerance():
    right = (np.ones((2, 3)), np.zeros(2))
    rounded = (np.ones((2, 3)) * (1 + 2e-3), np.full(2, 0.5))  # output[0] only rounded
    path, _, _ = _first_difference(right, rounded, "the output", (1e-2, 1e-3))
    assert path == "the output[1]", path
    path, _, _ = _first_difference(right, rounded, "the output")  # (the tight default)
    assert path == "the output[0]", path


def backward_with_keys_for_queries(q, k, v, grad_out, causal=False):
    ct = torch.promote_types(q.dtype, torch.float32)
    qq, kk, vv, gg = (t.to(ct) for t in (q, k, v, grad_out))
    n_q, n_k, d = q.shape[-2], k.shape[-2], q.shape[-1]
    s = qq @ kk.mT / math.sqrt(d)
    if causal:
        s = s.masked_fill(~torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q), -math.inf)
    top = s.amax(-1, keepdim=True)
    e = torch.exp(s - torch.where(torch.isinf(top), torch.zeros_like(top), top))
    total = e.sum(-1, keepdim=True)
    p = e / torch.where(total > 0, total, torch.ones_like(total))
    grad_p = gg @ vv.mT
    grad_s = p * (grad_p - (grad_p * p).sum(-1, keepdim=True))
    grad_q = grad_s @ kk / math.sqrt(d)
    grad_k = grad_s.mT @ kk / math.sqrt(d)  # the keys again, where the queries belong
    return grad_q.to(q.dtype), grad_k.to(k.dtype), (p.mT @ gg).to(v.dtype)


def test_a_sibling_read_for_another_in_one_place_is_found_and_tried_early():
    verdict = judged("attention_backward", backward_with_keys_for_queries)
    assert not verdict.passed
    assert "mutant:" in " ".join(verdict.flags), (verdict.flags, verdict.diagnosis)
    assert "computed as" in verdict.diagnosis, verdict.diagnosis
    schema = build_schema(backward_with_keys_for_queries, repairing=True)
    order = [m.swap for m in schema.mutants]
    sibling = order.index(("kk", "qq"))  # (one unpacking made both)
    stranger = order.index(("kk", "grad_p"))
    assert sibling < stranger, (sibling, stranger)
    assert sibling < len(order) // 2, (sibling, len(order))


def gqa_with_the_triangle_dropped(x, w_q, w_k, w_v, w_o, num_heads, num_kv_heads,
                                  causal=False):
    b, n, d_model = x.shape
    if d_model % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"d_model={d_model}, num_heads={num_heads} and "
                         f"num_kv_heads={num_kv_heads} do not divide")
    d = d_model // num_heads
    ct = torch.promote_types(x.dtype, torch.float32)
    xs = x.to(ct)
    q = (xs @ w_q.to(ct)).view(b, n, num_heads, d).transpose(1, 2)
    k = (xs @ w_k.to(ct)).view(b, n, num_kv_heads, d).transpose(1, 2)
    v = (xs @ w_v.to(ct)).view(b, n, num_kv_heads, d).transpose(1, 2)
    rep = num_heads // num_kv_heads
    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    if causal:
        keep = torch.ones(n, n, dtype=torch.bool)
        keep.tril()  # a new tensor, dropped: keep stays all True
        s = s.masked_fill(~keep, float("-inf"))
    out = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, n, d_model)
    return (out @ w_o.to(ct)).to(x.dtype)


@pytest.mark.usefixtures("searching")
def test_a_method_result_dropped_is_kept_by_the_repair():
    repair, verdict = repaired("grouped_query_attention", gqa_with_the_triangle_dropped)
    assert not verdict.passed
    assert repair is not None and repair["new"] == "keep = keep.tril()", \
        (repair, verdict.diagnosis)
    assert "changes nothing in place" in verdict.diagnosis, verdict.diagnosis


def test_a_regrouping_that_turns_a_sign_says_so():
    from mhalib.checks.edit_nodes import HINT
    from mhalib.checks.edit_regroupings import REGROUPED, REGROUPED_SIGN, _regroupings

    node = ast.parse("(-b - r) // (2 * a)", mode="eval").body
    said = {ast.unparse(new): getattr(new, HINT, "") for new in _regroupings(node)}
    assert said.get("-(b - r) // (2 * a)") == REGROUPED_SIGN, said
    plain = ast.parse("8 * d ** 2 // 4 * d", mode="eval").body
    assert {getattr(new, HINT, "") for new in _regroupings(plain)} == {REGROUPED}


def test_the_visible_search_of_the_key_does_not_watch_its_locals(monkeypatch):
    import mhalib.checks.mutants as mutants
    from mhalib.checks.encoding import decode

    def attention_unscaled(q, k, v):
        s = q @ np.swapaxes(k, -1, -2)
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        w = e / e.sum(axis=-1, keepdims=True)
        return w @ v, w

    checker = get_exercise("attention")
    cases = checker.cases(1, "grading")
    record = probe(checker, attention_unscaled, 1, "grading")
    recorded = [(case, {"status": "ok", "output": decode(entry["output"])})
                for case, entry in zip(cases, record["cases"]) if entry["status"] == "ok"]
    watched = []
    real = mutants._locals_seen
    monkeypatch.setattr(mutants, "_locals_seen",
                        lambda *args: watched.append(1) or real(*args))
    mutants.mutant_diagnosis(checker, recorded, budget_s=30.0)
    assert watched, "the grader's search watches the key's locals (for mix-ups of variables)"
    watched.clear()
    mutants.mutant_diagnosis(checker, recorded, budget_s=mutants.QUICK_BUDGET_S)
    assert not watched, "the visible search must not pay for watching every call"
