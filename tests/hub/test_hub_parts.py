"""The parts of the class hub that need no running hub: settings, permissions, feedback, YAML."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from mhalib.cli import main as mhalib_main
from mhalib.hub_class import (
    INSTRUCTOR_ONLY_PLUGINS,
    QUIET_PLUGINS,
    ClassSettings,
    check_roster,
    write_config_dirs,
)
from mhalib.hub_env import others_can_reach
from mhalib.hub_exchange import restrict_to_group
from mhalib.hub_feedback import pair_feedback_with_submissions
from mhalib.hub_users import check_user_name
from tests.browser.lab_server import REPO

HUB = REPO / "grading" / "hub"


def _exec_config(text: str):
    from traitlets.config import Config

    config = Config()
    exec(compile(text, "nbgrader_config.py", "exec"), {"get_config": lambda: config})
    return config


def test_the_kubernetes_values_configure_what_the_one_machine_hub_does(tmp_path):
    values = yaml.safe_load((HUB / "z2jh-values.yaml").read_text())
    files = values["singleuser"]["extraFiles"]
    on_k8s = _exec_config(files["nbgrader-common"]["stringData"])
    here = _exec_config(Path(write_config_dirs(tmp_path)["common"], "nbgrader_config.py")
                        .read_text())
    mounts = {m["name"]: m["mountPath"] for m in values["singleuser"]["storage"]
              ["extraVolumeMounts"]}
    assert on_k8s.Exchange.root == mounts["exchange"]
    assert on_k8s.ExchangeFactory.submit == here.ExchangeFactory.submit
    assert on_k8s.CourseDirectory.course_id == here.CourseDirectory.course_id
    learner = json.loads(files["learner-page-config"]["stringData"])["disabledExtensions"]
    assert set(learner) == set(INSTRUCTOR_ONLY_PLUGINS + QUIET_PLUGINS)
    manifests = list(yaml.safe_load_all((HUB / "k8s-class.yaml").read_text()))
    claim = next(m for m in manifests if m["kind"] == "PersistentVolumeClaim")
    assert values["singleuser"]["storage"]["extraVolumes"][0]["persistentVolumeClaim"][
        "claimName"] == claim["metadata"]["name"]
    assert "ReadWriteMany" in claim["spec"]["accessModes"]


def test_settings_round_trip(tmp_path):
    settings = ClassSettings(class_dir=str(tmp_path), instructor="teach", learners=["ada"],
                             ip="127.0.0.1", port=8000, hub_port=8081, proxy_api_port=8001,
                             proxy_command="chp", python="/x/python", env_bin="/x")
    (tmp_path / "hub").mkdir()
    assert ClassSettings.read(settings.write()) == settings
    assert stat.S_IMODE((tmp_path / "hub" / "class.json").stat().st_mode) == 0o600


@pytest.mark.parametrize("instructor, learners, complaint", [
    ("nobody", [], "--learners is empty"),
    ("nobody", ["nobody"], "also in --learners"),
    ("no-such-user-mhalib", ["nobody"], "does not exist"),
    ("Bad Name", ["nobody"], "not a portable system user name"),
    ("root", ["nobody"], "uid 0"),
])
def test_the_roster_is_checked(instructor, learners, complaint):
    with pytest.raises(ValueError, match=complaint):
        check_roster(instructor, learners)


def test_user_names_are_portable():
    assert check_user_name("ada_1") == "ada_1"
    with pytest.raises(ValueError, match="'-x'"):
        check_user_name("-x")


def test_mhalib_hub_names_what_is_missing(capsys):
    assert mhalib_main(["hub", "setup"]) == 2
    assert "--instructor is required" in capsys.readouterr().err
    assert mhalib_main(["hub", "feedback"]) == 2
    assert "assignment id" in capsys.readouterr().err


def test_others_can_reach_follows_every_parent(tmp_path):
    assert others_can_reach("/usr/bin/env", execute=True)
    inside = tmp_path / "file"
    inside.write_text("x")
    inside.chmod(0o644)
    tmp_path.chmod(0o700)
    assert not others_can_reach(inside)
    tmp_path.chmod(0o755)
    assert others_can_reach(inside) == all(
        p.stat().st_mode & stat.S_IXOTH for p in tmp_path.parents)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="changing a file's group to another group needs root")
def test_a_submission_is_closed_to_all_but_the_instructors_group(tmp_path):
    inbound = tmp_path / "inbound"
    inbound.mkdir()
    os.chown(inbound, 0, 100)
    inbound.chmod(0o2733)
    submission = inbound / "ada+01+stamp+random"
    submission.mkdir()
    (submission / "nb.ipynb").write_text("{}")
    os.chown(submission / "nb.ipynb", 0, 0)  # as if written after the set-gid bit was lost
    restrict_to_group(str(submission), str(inbound))
    notebook = (submission / "nb.ipynb").stat()
    assert (notebook.st_gid, stat.S_IMODE(notebook.st_mode)) == (100, 0o640)
    assert stat.S_IMODE(submission.stat().st_mode) == 0o770
    assert (submission / "nb.ipynb").read_text() == "{}"
    assert not list(inbound.glob(".mhalib-submit-*"))


def test_feedback_is_paired_with_its_submission(tmp_path):
    for student in ("ada", "bert"):
        (tmp_path / "feedback" / student / "01").mkdir(parents=True)
    (tmp_path / "submitted" / "ada" / "01").mkdir(parents=True)
    for name in ("timestamp.txt", "submission_secret.txt"):
        (tmp_path / "submitted" / "ada" / "01" / name).write_text(name)
    assert pair_feedback_with_submissions(tmp_path, "01") == ["ada"]
    assert (tmp_path / "feedback" / "ada" / "01" / "submission_secret.txt").read_text() == \
        "submission_secret.txt"
    with pytest.raises(ValueError, match="matches a collected submission"):
        pair_feedback_with_submissions(tmp_path, "02")


def test_the_instructors_nbgrader_config_scores_quick_checks(tmp_path, monkeypatch):
    """The formgrader's autograde on the hub stashes and scores quick checks with the keys that
    mhalib hub copied into the instructor's private course folder."""
    from nbgrader.preprocessors import ClearOutput, Execute

    from mhalib.grading.nbgrader_quick_checks import ScoreQuickChecks, StashQuickCheckAnswers
    from mhalib.hub_class import KEYS_FOLDER, _instructor_nbgrader

    monkeypatch.setenv("MHALIB_QUICK_CHECK_KEYS", "unchanged-by-the-test")
    config = _exec_config(_instructor_nbgrader(tmp_path))
    sanitize = config.Autograde.sanitize_preprocessors
    steps = config.Autograde.autograde_preprocessors
    assert sanitize.index(StashQuickCheckAnswers) < sanitize.index(ClearOutput)
    assert steps.index(ScoreQuickChecks) == steps.index(Execute) + 1
    assert os.environ["MHALIB_QUICK_CHECK_KEYS"] == str(tmp_path / KEYS_FOLDER)
