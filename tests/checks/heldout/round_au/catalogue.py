"""The held-out catalogue (round t): every entry of lessons 01-12, in course order.

Importable on its own (numpy, scipy, torch; no mhalib): ``from catalogue import ENTRIES``.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from entry import Entry  # noqa: E402,F401
import lesson01  # noqa: E402
import lesson02  # noqa: E402
import lesson03  # noqa: E402
import lesson04  # noqa: E402
import lesson05  # noqa: E402
import lesson06  # noqa: E402
import lesson07  # noqa: E402
import lesson08  # noqa: E402
import lesson09  # noqa: E402
import lesson10  # noqa: E402
import lesson11  # noqa: E402
import lesson12  # noqa: E402

LESSONS = (lesson01, lesson02, lesson03, lesson04, lesson05, lesson06, lesson07, lesson08,
           lesson09, lesson10, lesson11, lesson12)

ENTRIES = [entry for lesson in LESSONS for entry in lesson.ENTRIES]
