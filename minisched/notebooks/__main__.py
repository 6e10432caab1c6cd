"""`python -m minisched.notebooks check|fix|run ...` (what `make notebooks` calls)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat

from minisched.notebooks.check import TIME_LIMIT_SECONDS, check_notebook, find_notebooks
from minisched.notebooks.execute import execute_notebook
from minisched.notebooks.normalize import normalize_file, normalized_text
from minisched.notebooks.prose import check_prose_file, judge_prose
from minisched.notebooks.rules import RULES, check_rules


def _existing(paths: list[str]) -> list[Path]:
    # `make notebooks` names both chapters and labs; a missing directory is not an error there.
    kept = [p for p in paths if Path(p).exists()]
    for p in paths:
        if not Path(p).exists():
            print(f"note: {p} does not exist, skipped")
    return find_notebooks(list(kept))


def cmd_check(args: argparse.Namespace) -> int:
    notebooks = _existing(args.paths)
    failed = 0
    total = 0.0
    for path in notebooks:
        result = check_notebook(path, time_limit=args.time_limit)
        total += result.seconds
        status = "ok  " if result.ok else "FAIL"
        print(f"{status} {result.seconds:6.1f} s  {path}", flush=True)
        for warning in result.warnings:
            print(f"     warning: {warning}")
        for problem in result.problems:
            print(f"     {problem}")
        if result.details:
            print("\n".join("     | " + line for line in result.details.splitlines()))
        failed += not result.ok
    print(f"{len(notebooks) - failed}/{len(notebooks)} notebooks passed in {total:.1f} s")
    return 1 if failed else 0


def cmd_prose(args: argparse.Namespace) -> int:
    failed = 0
    for path in _existing(args.paths):
        if args.explain:
            for judged in judge_prose(nbformat.read(path, as_version=4)):
                how = judged.shown_by or "NOT SHOWN"
                print(
                    f"{path}: cell {judged.cell}: {judged.figure.text!r} ({judged.figure.number or 'words'}): {how}"
                )
        problems = check_prose_file(path)
        print(
            f"{'FAIL' if problems else 'ok  '} {path}" + (f"  ({len(problems)} figures)" if problems else "")
        )
        for problem in problems:
            print(f"     {problem}")
        failed += bool(problems)
    return 1 if failed else 0


def cmd_rules(args: argparse.Namespace) -> int:
    failed = 0
    for path in _existing(args.paths):
        found = check_rules(path, args.rule or None)
        count = sum(len(p) for p in found.values())
        print(f"{'FAIL' if count else 'ok  '} {path}" + (f"  ({count} problems)" if count else ""))
        for rule, problems in found.items():
            for problem in problems:
                print(f"     [{rule}] {problem}")
        failed += bool(count)
    return 1 if failed else 0


def cmd_fix(args: argparse.Namespace) -> int:
    failed = 0
    for path in _existing(args.paths):
        if args.execute:
            try:
                nb, seconds = execute_notebook(path, backend="embedded")
            except Exception as error:  # the notebook's own failure: report it, keep going
                print(f"FAIL executing {path}: {str(error)[-2000:]}")
                failed += 1
                continue
            path.write_text(normalized_text(nb), encoding="utf-8")
            print(f"executed {seconds:6.1f} s  {path}")
        elif normalize_file(path):
            print(f"normalized {path}")
    return 1 if failed else 0


def cmd_run(args: argparse.Namespace) -> int:
    failed = 0
    for path in _existing(args.paths):
        try:
            _, seconds = execute_notebook(path, backend=args.backend)
        except Exception as error:
            print(f"FAIL {path} on {args.backend}: {str(error)[-2000:]}")
            failed += 1
            continue
        slow = seconds > args.time_limit
        print(f"{'SLOW' if slow else 'ok  '} {seconds:6.1f} s  {path}  (backend {args.backend})")
        failed += slow
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m minisched.notebooks", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="normalized, checked outputs reproduced, each under the time limit")
    check.add_argument("paths", nargs="+")
    check.add_argument("--time-limit", type=float, default=TIME_LIMIT_SECONDS, help="seconds per notebook")
    check.set_defaults(func=cmd_check)
    prose = sub.add_parser(
        "prose", help="every figure in markdown is in the outputs, set by code, or tagged *(quoted: ...)*"
    )
    prose.add_argument("paths", nargs="+")
    prose.add_argument(
        "--explain",
        action="store_true",
        help="list every figure found and what shows it (output, code, quoted)",
    )
    prose.set_defaults(func=cmd_prose)
    rules = sub.add_parser(
        "rules",
        help="the chapter rules, read from the files (prose, hygiene, banner, namespace, cell-length)",
    )
    rules.add_argument("paths", nargs="+")
    rules.add_argument("--rule", action="append", choices=list(RULES), help="only this rule (repeatable)")
    rules.set_defaults(func=cmd_rules)
    fix = sub.add_parser("fix", help="normalize notebooks in place")
    fix.add_argument("paths", nargs="+")
    fix.add_argument(
        "--execute", action="store_true", help="first execute on the embedded backend, storing outputs"
    )
    fix.set_defaults(func=cmd_fix)
    run = sub.add_parser("run", help="execute against a backend without comparing outputs")
    run.add_argument("paths", nargs="+")
    run.add_argument(
        "--backend", required=True, help="a MINISCHED_BACKEND setting, e.g. local or context:kind-x"
    )
    run.add_argument("--time-limit", type=float, default=TIME_LIMIT_SECONDS)
    run.set_defaults(func=cmd_run)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (FileNotFoundError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
