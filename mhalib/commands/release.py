"""``mhalib release``: regenerate notebooks/ from solutions/ with nbgrader (or check drift).

``--quick-checks practice`` (the default, and what notebooks/ holds) gives instant feedback;
``--quick-checks assessed`` records answers only and puts no key in the release: write it to
another folder with ``--to`` and hand that folder out (``mhalib hub --notebooks FOLDER``). The
course is the one in ``--root``, else ``MHALIB_COURSE_ROOT``, else the working directory
(:mod:`mhalib.classroom.course_folder`).
"""

from __future__ import annotations

from pathlib import Path

HELP = "regenerate the learner release notebooks/ from solutions/ (nbgrader generate_assignment)"


def add_arguments(parser) -> None:
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    parser.add_argument("--check", action="store_true",
                        help="only report notebooks whose release drifted; exit 1 if any")
    parser.add_argument("--quick-checks", choices=("practice", "assessed"), default="practice",
                        help="practice: instant right/wrong and explanations (keys ship in the "
                             "release); assessed: answers are only recorded, keys stay with "
                             "the instructor (default: practice)")
    parser.add_argument("--to", type=Path, metavar="DIR",
                        help="write the release here instead of notebooks/")
    parser.add_argument("--root", type=Path,
                        help="the course's top folder (default: MHALIB_COURSE_ROOT, else the "
                             "working directory)")
    parser.add_argument("--keys", type=Path, metavar="DIR",
                        help="folder of the quick-check keys (default: MHALIB_QUICK_CHECK_KEYS, "
                             "else grading/quick_checks of the course)")


def run(args) -> int:
    from mhalib.classroom import release
    from mhalib.classroom.course_folder import locate

    files = locate(args.root, keys=args.keys)
    if not files.solutions.is_dir():
        print(f"error: no solutions/ in {files.root}; run in the course's top folder or name "
              "it with --root")
        return 2
    names = args.assignments or release.assignments(files.solutions)
    target = args.to or files.notebooks
    if args.check and (args.to or args.quick_checks != "practice"):
        print("error: --check compares the committed practice release in notebooks/; it takes "
              "neither --to nor --quick-checks assessed")
        return 2
    if args.quick_checks == "assessed" and target.resolve() == files.notebooks:
        print("error: notebooks/ is the committed practice release; write an assessed release "
              "elsewhere with --to DIR")
        return 2
    stale = []
    # one nbgrader process for every assignment named (release.generate_many)
    if args.check:
        for assignment, drifted in release.drifts(names, files.solutions, files.notebooks,
                                                  files.keys).items():
            stale += [f"{assignment}/{name}" for name in drifted]
    else:
        written = release.write_releases(names, files.solutions, target, files.keys,
                                         args.quick_checks)
        for assignment, paths in written.items():
            for path in paths:
                release.strip_outputs(path)
                print(f"wrote {path}")
            print(f"{assignment}: quick checks in {args.quick_checks} mode")
    if args.check:
        for item in stale:
            print(f"drifted: notebooks/{item} (run `mhalib release`)")
        print("release is in sync with solutions/" if not stale else f"{len(stale)} drifted")
        return 1 if stale else 0
    return 0
