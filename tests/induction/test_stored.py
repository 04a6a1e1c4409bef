"""Lesson 08's trained model on disk: loaded only when everything that decides it is the same."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from mhalib.induction import stored, train
from mhalib.induction.train import TrainConfig, build_model, trained_model

SHORT = TrainConfig(d_model=16, num_heads=2, seq_len=16, max_period=6, batch_size=8, steps=5)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(stored.CACHE_VARIABLE, str(tmp_path / "cache"))
    monkeypatch.setattr(train, "_TRAINED", {})  # as a fresh kernel: nothing in memory
    return tmp_path / "cache"


def _same(model_a, model_b) -> bool:
    a, b = model_a.state_dict(), model_b.state_dict()
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_a_second_kernel_loads_what_the_first_trained(cache, monkeypatch, capsys):
    model, history = trained_model(SHORT, progress=False)
    files = list(cache.glob("induction-*.pt"))
    assert len(files) == 1 and not list(cache.glob(".induction-*"))  # no partial file left
    monkeypatch.setattr(train, "_TRAINED", {})

    def no_training(*args, **kwargs):
        raise AssertionError("trained again although a stored model fits")

    monkeypatch.setattr(train, "train", no_training)
    again, history_again = trained_model(SHORT)
    assert _same(model, again) and history_again == history
    assert not again.training
    said = capsys.readouterr().out
    assert "loaded the model" in said and str(files[0]) in said


def test_another_config_or_other_code_is_another_key(cache, monkeypatch):
    assert stored.model_key(SHORT) == stored.model_key(replace(SHORT))
    assert stored.model_key(SHORT) != stored.model_key(replace(SHORT, seed=1))
    key = stored.model_key(SHORT)
    monkeypatch.setattr(torch, "__version__", "0.0.0")
    assert stored.model_key(SHORT) != key


def test_a_damaged_file_is_trained_again_and_replaced(cache):
    path = stored.stored_path(SHORT)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a torch file")
    assert stored.load(SHORT, build_model) is None
    model, _ = trained_model(SHORT, progress=False)
    loaded, _ = stored.load(SHORT, build_model)
    assert _same(model, loaded)


def test_off_keeps_nothing_and_an_unwritable_folder_only_costs_the_training(
        tmp_path, monkeypatch):
    monkeypatch.setattr(train, "_TRAINED", {})
    monkeypatch.setenv(stored.CACHE_VARIABLE, "off")
    assert stored.cache_dir() is None and stored.store(SHORT, *train.train(SHORT, False)) is None
    blocked = tmp_path / "a file, not a folder"
    blocked.write_text("")
    monkeypatch.setenv(stored.CACHE_VARIABLE, str(blocked / "cache"))
    model, history = trained_model(SHORT, progress=False)  # trains; storing fails quietly
    assert history["step"] and stored.load(SHORT, build_model) is None


def test_the_default_folder_follows_xdg_then_home(monkeypatch, tmp_path):
    monkeypatch.delenv(stored.CACHE_VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert stored.cache_dir() == tmp_path / "xdg" / "mhalib"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert stored.cache_dir() == tmp_path / "home" / ".cache" / "mhalib"
