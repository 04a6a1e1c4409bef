"""What a physical check runs again of the notebook: its definitions only."""

from __future__ import annotations

from mhalib.grading.sandbox.replay import definitions, imported_modules, replay_sources


def test_definitions_keep_imports_functions_classes_and_constants_only():
    source = ("import math\nfrom torch import nn\nEPS = 1e-9\nF = math.sqrt\n"
              "buffer = torch.empty(8192, 8192)\nprint('hello')\nplt.show()\n"
              "def attention(q, k):\n    return q @ k\nclass Cache:\n    pass\n"
              "with needs(attention):\n    attention(1, 2)\n")
    kept = definitions(source)
    assert "import math" in kept and "from torch import nn" in kept
    assert "EPS = 1e-09" in kept and "F = math.sqrt" in kept
    assert "def attention" in kept and "class Cache" in kept
    assert "torch.empty" not in kept and "print" not in kept and "needs" not in kept
    assert definitions("def broken(:\n") == ""


def test_replay_stops_at_the_exercises_test_and_keeps_the_set_up_cell_whole():
    steps = [{"kind": "cell", "source": "import torch\ntorch.manual_seed(0)", "setup": True},
             {"kind": "cell", "source": "def softmax(x):\n    return x\nprint(softmax(1))"},
             {"kind": "record", "exercises": ["softmax"]},
             {"kind": "cell", "source": "def attention(q):\n    return q"},
             {"kind": "record", "exercises": ["attention"]},
             {"kind": "cell", "source": "def later():\n    pass"}]
    assert replay_sources(steps, "softmax") == ["import torch\ntorch.manual_seed(0)",
                                                "def softmax(x):\n    return x"]
    assert replay_sources(steps, "attention")[-1] == "def attention(q):\n    return q"
    assert len(replay_sources(steps, "attention")) == 3


def test_only_installed_modules_are_imported_before_the_lock_down(tmp_path, monkeypatch):
    (tmp_path / "learners_helper.py").write_text("raise SystemExit('learner code')")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = imported_modules(["import math, learners_helper\nfrom torch import nn"])
    assert "math" in found and "torch" in found and "learners_helper" not in found
