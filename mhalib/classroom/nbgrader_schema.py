"""The gradebook schema version nbgrader stamps into a new database, read in this process.

nbgrader asks a separate ``alembic heads`` process for it (an interpreter start and alembic's
import: seconds on a busy machine); reading nbgrader's own migration scripts here gives the same
answer at once. Without alembic's script module nbgrader is left to ask as it always does.
"""

from __future__ import annotations

import os


def stamp_schema_in_process() -> None:
    """Make nbgrader read its gradebook schema head in this process from now on."""
    try:
        from alembic.script import ScriptDirectory
    except ImportError:
        return
    import nbgrader
    import nbgrader.api

    folder = os.path.join(os.path.dirname(nbgrader.__file__), "alembic")
    nbgrader.api.get_alembic_version = lambda: ScriptDirectory(folder).get_current_head()
