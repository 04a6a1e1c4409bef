"""``mhalib release``: regenerate notebooks/ from solutions/ with nbgrader (or check drift).

``--quick-checks practice`` (the default, and what notebooks/ holds) gives instant feedback;
``--quick-checks assessed`` records answers only and puts no key in the release: write it to
another folder with ``--to`` and hand that folder out (``mhalib hub --release FOLDER``).
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
    parser.add_argument("--keys", type=Path, metavar="DIR",
                        help="folder of the quick-check keys (default: grading/quick_checks)")


def run(args) -> int:
    from mhalib import release

    names = args.assignments or release.assignments()
    target = args.to or release.REPO / "notebooks"
    if args.check and (args.to or args.quick_checks != "practice"):
        print("error: --check compares the committed practice release in notebooks/; it takes "
              "neither --to nor --quick-checks assessed")
        return 2
    if args.quick_checks == "assessed" and target.resolve() == (release.REPO / "notebooks"
                                                                ).resolve():
        print("error: notebooks/ is the committed practice release; write an assessed release "
              "elsewhere with --to DIR")
        return 2
    stale = []
    for assignment in names:
        if args.check:
            drifted = release.drift(assignment)
            stale += [f"{assignment}/{name}" for name in drifted]
        else:
            for path in release.write_release(assignment, target, args.quick_checks,
                                              args.keys):
                release.strip_outputs(path)
                print(f"wrote {path}")
            print(f"{assignment}: quick checks in {args.quick_checks} mode")
    if args.check:
        for item in stale:
            print(f"drifted: notebooks/{item} (run `mhalib release`)")
        print("release is in sync with solutions/" if not stale else f"{len(stale)} drifted")
        return 1 if stale else 0
    return 0
