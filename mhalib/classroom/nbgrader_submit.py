"""nbgrader's submit, with the submission readable by the instructor only, not by classmates.

nbgrader's own ``submit`` leaves the copy in ``<exchange>/<course>/inbound/`` readable by every
user and relies on nobody finding it: ``inbound`` cannot be listed and the folder's name ends
in a random string. Its ``release_assignment`` makes ``inbound`` set-group-id, owned by the
instructor's group, so what a learner creates there belongs to that group. This submit makes
sure every submitted file does (``timestamp.txt`` and ``submission_secret.txt`` are written
after the copy took the set-group-id bit off the folder), then takes the *others* bits away
(files 0640, folders 0770): the instructor, through the group, still collects and removes
them; another learner cannot read them even knowing the path, nor the secret that names
the learner's feedback in the exchange.

Configured for everyone on a class hub by
:func:`mhalib.classroom.nbgrader_config.configure_exchange` (``c.ExchangeFactory.submit``); it
works with any nbgrader exchange on a shared file system.
"""

from __future__ import annotations

import os
import shutil
import tempfile

from nbgrader.exchange.default.submit import ExchangeSubmit

FILE_MODE = 0o640
FOLDER_MODE = 0o770


def regroup_through(folder: str, path: str) -> None:
    """Give file ``path`` the group of ``folder`` (set-group-id) by re-creating it there.

    A learner cannot chgrp to the instructor's group, but a file created in the set-group-id
    ``folder`` gets that group, and renaming it over ``path`` keeps it.
    """
    handle, temporary = tempfile.mkstemp(dir=folder, prefix=".mhalib-submit-")
    try:
        with os.fdopen(handle, "wb") as copy, open(path, "rb") as original:
            shutil.copyfileobj(original, copy)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def restrict_to_group(path: str, group_folder: str) -> None:
    """Under ``path``: every file in ``group_folder``'s group, files 0640, folders 0770."""
    gid = os.stat(group_folder).st_gid
    for folder, _subfolders, files in os.walk(path):
        for name in files:
            file = os.path.join(folder, name)
            if os.path.islink(file):
                continue
            if os.stat(file).st_gid != gid:
                regroup_through(group_folder, file)
            os.chmod(file, FILE_MODE)
        os.chmod(folder, FOLDER_MODE)


class GraderOnlySubmit(ExchangeSubmit):
    """Submit as nbgrader does, then close the submission to everyone but the instructor."""

    def copy_files(self):
        super().copy_files()
        restrict_to_group(os.path.join(self.inbound_path, self.assignment_filename),
                          self.inbound_path)
