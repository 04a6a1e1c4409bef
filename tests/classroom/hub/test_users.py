"""System users of a class: names every distribution accepts (creating them: test_class_on_hub)."""

from __future__ import annotations

import pytest

from mhalib.classroom.hub.users import check_user_name


def test_user_names_are_portable():
    assert check_user_name("ada_1") == "ada_1"
    with pytest.raises(ValueError, match="'-x'"):
        check_user_name("-x")
