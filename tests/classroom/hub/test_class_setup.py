"""Setting up a class: settings, roster, configuration files, and the Kubernetes values that
carry the same design to a cluster (checked without a cluster: they parse and agree)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from mhalib.classroom.hub.class_setup import (
    INSTRUCTOR_ONLY_PLUGINS,
    KEYS_FOLDER,
    QUIET_PLUGINS,
    ClassSettings,
    check_roster,
    write_config_dirs,
)
from tests.checkout import REPO

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
    assert here.Exchange.root == str(tmp_path / "exchange")
    assert on_k8s.ExchangeFactory.submit == here.ExchangeFactory.submit
    assert on_k8s.CourseDirectory.course_id == here.CourseDirectory.course_id
    learner = json.loads(files["learner-page-config"]["stringData"])["disabledExtensions"]
    assert set(learner) == set(INSTRUCTOR_ONLY_PLUGINS + QUIET_PLUGINS)
    manifests = list(yaml.safe_load_all((HUB / "k8s-class.yaml").read_text()))
    claim = next(m for m in manifests if m["kind"] == "PersistentVolumeClaim")
    assert values["singleuser"]["storage"]["extraVolumes"][0]["persistentVolumeClaim"][
        "claimName"] == claim["metadata"]["name"]
    assert "ReadWriteMany" in claim["spec"]["accessModes"]


def _settings(tmp_path) -> ClassSettings:
    return ClassSettings(class_dir=str(tmp_path), instructor="teach", learners=["ada"],
                         ip="127.0.0.1", port=8000, hub_port=8081, proxy_api_port=8001,
                         proxy_command="chp", python="/x/python", env_bin="/x",
                         config_dirs={"common": "/c", "learner": "/l", "instructor": "/i"},
                         instructor_keys=f"/home/teach/mha-course/{KEYS_FOLDER}")


def test_settings_round_trip(tmp_path):
    settings = _settings(tmp_path)
    (tmp_path / "hub").mkdir()
    assert ClassSettings.read(settings.write()) == settings
    assert stat.S_IMODE((tmp_path / "hub" / "class.json").stat().st_mode) == 0o600


def test_only_the_instructor_is_given_the_keys_of_the_course(tmp_path):
    settings = _settings(tmp_path)
    learner, instructor = settings.environment("learner"), settings.environment("instructor")
    assert learner["PATH"].split(":")[0] == "/x" and learner["JUPYTER_CONFIG_PATH"] == "/l:/c"
    assert "MHALIB_QUICK_CHECK_KEYS" not in learner
    assert instructor["MHALIB_QUICK_CHECK_KEYS"] == settings.instructor_keys
    with pytest.raises(ValueError, match="role='admin'"):
        settings.environment("admin")


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
