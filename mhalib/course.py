"""The course manifest: every lesson described once, and everything that lists lessons reads it.

A lesson is an nbgrader assignment (one notebook) with graded exercise functions, and its own
modules: the checker (``mhalib.checks.lessonNN``: probe, judge, mistake models), the quick-check
bank (``mhalib.quiz.lessonNN``), the plots and widgets (``mhalib.viz.lessonNN``), the hint
ladders (``mhalib.hints.lessonNN``) and the answer key (the module that defines each exercise
function, re-exported by :mod:`mhalib.reference`).
The checker registry, the quiz lookup, the answer-key table, the grader's answer-free package,
the integrity scanner, ``mhalib release`` and the nbgrader configuration all read
:data:`LESSONS`; ``tests/test_course.py`` holds it to ``../shared/curriculum.md`` and to the
grade_ids of ``solutions/``. Adding a lesson is one :class:`Lesson` entry plus its modules and
notebook (``docs/adding_a_lesson.md``). It also names the folders of a course checkout
(:data:`SOURCE_DIR`...), which :mod:`mhalib.classroom.course_folder` finds.

This module imports nothing heavy: nbgrader's config file and the sandbox read it.
"""

from __future__ import annotations

from dataclasses import dataclass

# Sub-packages of mhalib whose functions compute answers: a learner's function that reaches one
# of an exercise's ``answer_key_names`` defined there scores 0 (mhalib.checks.integrity).
ANSWER_KEY_PACKAGES = ("reference", "accounting", "kernels", "nn")

# Seconds a lesson's solutions notebook may take top to bottom on a 2-core CPU, by default.
DEFAULT_RUN_BUDGET_S = 30.0

# The parts of a course checkout, relative to its top folder.
SOURCE_DIR = "solutions"  # the instructor master: nbgrader's source, hidden tests included
RELEASE_DIR = "notebooks"  # the learner release
KEYS_DIR = "grading/quick_checks"  # the quick-check keys: instructor data, not in the package
GRADING_DIR = "grading/course"  # what a class produces: submissions, gradebook, feedback


@dataclass(frozen=True)
class Lesson:
    """One lesson of the course.

    ``exercises`` maps each graded exercise function, in notebook order, to the module that
    defines its answer key. ``number`` is the two-digit prefix of the assignment id; the
    lesson's own modules are named after it.
    """

    assignment: str  # nbgrader assignment id, e.g. "01-single-head"
    notebook: str  # the one notebook of the assignment
    title: str
    exercises: dict[str, str]  # exercise function -> module of its answer key
    framework: str  # "numpy" or "torch": what the exercises take and return
    run_budget_s: float = DEFAULT_RUN_BUDGET_S

    def __post_init__(self):
        if self.framework not in ("numpy", "torch"):
            raise ValueError(f"framework={self.framework!r} must be 'numpy' or 'torch' "
                             f"(lesson {self.assignment})")

    @property
    def number(self) -> str:
        return self.assignment[:2]

    @property
    def exercise_names(self) -> tuple[str, ...]:
        return tuple(self.exercises)

    @property
    def checker(self) -> str:
        """Module of the checkers: ``EXERCISES`` maps each exercise name to its checker."""
        return f"mhalib.checks.lesson{self.number}"

    @property
    def quiz(self) -> str:
        """Module of the quick-check bank: ``QUESTIONS`` maps each ``qc_`` id to its question."""
        return f"mhalib.quiz.lesson{self.number}"

    @property
    def quick_check_keys(self) -> str:
        """File of the quick-check keys, relative to the instructor's keys folder
        (:data:`KEYS_DIR`): instructor data, never part of the installed package."""
        return f"lesson{self.number}.py"

    @property
    def viz(self) -> str:
        """Module of the lesson's plots and widgets."""
        return f"mhalib.viz.lesson{self.number}"

    @property
    def hints(self) -> str:
        """Module of the hint ladders: ``HINTS`` maps each exercise name to its 2 to 4 hints."""
        return f"mhalib.hints.lesson{self.number}"


_REF = "mhalib.reference."
_ACC = "mhalib.accounting."

LESSONS: tuple[Lesson, ...] = (
    Lesson("01-single-head", "single_head_attention.ipynb", "Single-head attention",
           {"softmax": _REF + "single_head", "attention": _REF + "single_head"}, "numpy"),
    Lesson("02-multi-head", "multi_head_attention.ipynb", "Multi-head attention",
           {"split_heads": _REF + "multi_head", "merge_heads": _REF + "multi_head",
            "multi_head_attention": _REF + "multi_head"}, "numpy"),
    Lesson("03-scaling", "scaling.ipynb", "Why divide by sqrt(d_k)",
           {"dot_product_variance": _REF + "scaling", "softmax_entropy": _REF + "scaling",
            "softmax_jacobian": _REF + "scaling"}, "numpy"),
    Lesson("04-masks", "masks.ipynb", "Causal and padding masks",
           {"causal_mask": _REF + "masks", "padding_mask": _REF + "masks",
            "masked_attention": _REF + "masks"}, "numpy"),
    Lesson("05-flops", "flops.ipynb", "Where the FLOPs go",
           {"mha_flops": _ACC + "flops", "crossover_seq_len": _ACC + "flops",
            "mha_param_count": _ACC + "params"}, "numpy"),
    Lesson("06-gqa", "gqa_kv_cache.ipynb", "GQA, MQA and the KV cache",
           {"repeat_kv": _REF + "gqa", "grouped_query_attention": _REF + "gqa",
            "kv_cache_bytes": _ACC + "kv_cache", "decode_with_cache": _REF + "gqa"}, "torch"),
    Lesson("07-flash", "flash_attention.ipynb", "Online softmax and flash attention",
           {"merge_attention_states": _REF + "flash",
            "online_softmax_attention": _REF + "flash"}, "torch"),
    # 08 trains a small model in the notebook: two minutes instead of the default 30 s
    Lesson("08-heads", "what_heads_learn.ipynb", "What heads learn",
           {"previous_token_score": _REF + "heads", "induction_score": _REF + "heads"}, "torch",
           run_budget_s=120.0),
    Lesson("09-rope", "rope.ipynb", "Positions: rotary embeddings",
           {"rope_angles": _REF + "rope", "apply_rope": _REF + "rope"}, "torch"),
    Lesson("10-mla", "mla.ipynb", "Multi-head latent attention",
           {"mla_kv_cache_bytes": _ACC + "kv_cache", "mla_attention": _REF + "mla",
            "absorb_mla_weights": _REF + "mla"}, "torch"),
    Lesson("11-serving", "serving.ipynb", "Serving: decode, paged KV cache, chunked prefill",
           {"decode_attention_intensity": _REF + "serving", "paged_attention": _REF + "serving",
            "chunked_prefill": _REF + "serving"}, "torch"),
    Lesson("12-backward", "backward.ipynb", "The backward pass of attention",
           {"softmax_backward": _REF + "backward", "attention_backward": _REF + "backward",
            "attention_backward_flops": _ACC + "backward",
            "flash_attention_backward": _REF + "backward"}, "torch"),
)


def assignments() -> list[str]:
    """Assignment ids in course order."""
    return [lesson.assignment for lesson in LESSONS]


def lesson(assignment: str) -> Lesson:
    """The lesson with assignment id ``assignment``."""
    for candidate in LESSONS:
        if candidate.assignment == assignment:
            return candidate
    raise ValueError(f"assignment={assignment!r} is not one of {assignments()}")


def lesson_of_exercise(name: str) -> Lesson:
    """The lesson that grades exercise function ``name``."""
    for candidate in LESSONS:
        if name in candidate.exercises:
            return candidate
    raise ValueError(f"exercise={name!r} is not a contract exercise; known: "
                     f"{sorted(exercise_names())}")


def exercise_names() -> list[str]:
    """Every graded exercise function of the course, in course order."""
    return [name for lesson in LESSONS for name in lesson.exercises]


def answer_key_modules() -> dict[str, str]:
    """Exercise function -> the module that defines its answer key."""
    return {name: module for lesson in LESSONS for name, module in lesson.exercises.items()}
