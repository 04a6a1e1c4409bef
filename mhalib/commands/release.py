"""``mhalib release``: regenerate notebooks/ from solutions/ with nbgrader (or check drift)."""

from __future__ import annotations

HELP = "regenerate the learner release notebooks/ from solutions/ (nbgrader generate_assignment)"


def add_arguments(parser) -> None:
    parser.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    parser.add_argument("--check", action="store_true",
                        help="only report notebooks whose release drifted; exit 1 if any")


def run(args) -> int:
    from mhalib import release

    names = args.assignments or release.assignments()
    stale = []
    for assignment in names:
        if args.check:
            drifted = release.drift(assignment)
            stale += [f"{assignment}/{name}" for name in drifted]
        else:
            for path in release.write_release(assignment):
                release.strip_outputs(path)
                print(f"wrote {path}")
    if args.check:
        for item in stale:
            print(f"drifted: notebooks/{item} (run `mhalib release`)")
        print("release is in sync with solutions/" if not stale else f"{len(stale)} drifted")
        return 1 if stale else 0
    return 0
