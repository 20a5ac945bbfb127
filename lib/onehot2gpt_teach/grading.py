"""Grade submitted student notebooks: run each in a fresh kernel and report which checked
exercises pass.

The exercises and their check cells are described in :mod:`onehot2gpt_exercises`. This module is
for instructors::

    onehot2gpt-grade submissions/ --reference notebooks --out grades

Submissions are the ``*.ipynb`` files anywhere under ``submissions/`` (hidden folders and
``.ipynb_checkpoints`` are skipped). A submission is matched to its course notebook by file name:
``10_zero_shot.ipynb`` is graded against ``notebooks/10_zero_shot.ipynb``; so is
``alice_10_zero_shot.ipynb`` and its resubmission ``alice_10_zero_shot-1.ipynb`` (the suffix
Canvas adds to a file handed in again under the same name). The *student* is the first folder
under ``submissions/`` (``alice/10_zero_shot.ipynb`` → ``alice``); for a file directly in
``submissions/`` it is the file name without the course notebook's name and any resubmission
suffix (``alice_10_zero_shot-1.ipynb`` → ``alice``), or the file stem when nothing is left.

Each submission runs cell by cell in its own kernel (the current Python environment), in an
empty temporary working folder, so one failing cell does not stop the rest and no state is
shared between students. The exercises are the reference notebook's check cells, named after
the check they call (``check_qa_prompt(qa_prompt)`` → ``qa_prompt``) and worth the points of the
cell's metadata ``{"onehot2gpt": {"points": 2}}`` (1 by default). The grader always runs the
*reference* check cell, at the place of the submission's own check cell (found by cell id, else
by identical source) or, where it was deleted, right after the exercise cell; a deleted or edited
check cell is reported. Before every check, ``onehot2gpt_exercises`` is reloaded in the kernel and
the ``check_*`` names are bound again.

The verdict is reached here, not in the kernel: there the check only records the answers of the
student's function, on the check's own inputs and on those of hidden seeds
(:func:`onehot2gpt_exercises.checking.start_recording`), and :func:`replay_check` judges them in
the grading process with the library's reference and comparison. Patching anything in the kernel
can only spoil the recorded answers. An answer that uses the library function it was asked to write
(or the checking code, or the grader's frames) is found in the submission's source and scores 0,
the reason in its message (:mod:`onehot2gpt_teach.reference_use`).

Robustness: each submission is graded by a process of its own (``--jobs`` at a time), in a session
of its own, with a private HOME and a memory limit; a cell that runs longer than
``--cell-timeout`` is interrupted (and, when it ignores the interrupt, the kernel is restarted and
the cells that had run are run again); a kernel that dies is restarted the same way; when the
whole notebook passes ``--timeout`` the checks left are reported as not run; a submission that
kills its grading process is reported as a crash. Each graded submission goes to the journal
``results.jsonl`` at once, and a run that finds the journal grades only what is left. A file that
is not a notebook, or whose name matches no course notebook, is reported. Each kernel runs in a
bubblewrap sandbox of its own (:mod:`onehot2gpt_teach.sandbox`; what it does and does not protect:
docs/grading.md); where none can be built the grader refuses, unless ``--no-sandbox``, which runs
student code with your permissions and is named in ``grades.md``.

Output, in ``--out`` (default: the submissions folder):

* ``grades.csv``: one row per (submission, exercise) with the columns ``student, notebook, file,
  exercise, result, check_cell, message, points, max_points``. ``result`` is ``pass``, ``fail``,
  ``timeout``, ``crash`` (the kernel or the grading process died), ``not run`` or ``error`` (the
  submission could not be graded); ``check_cell`` is ``ok``, ``modified`` or ``missing``;
  ``message`` is one line: the check's whole diagnosis (its lines joined by ``;``).
* ``grades.md``: a summary table (passed and points per submission), the duplicates (a student
  with several files for one notebook: the newest resubmission counts, else the best-graded
  file), then one table per submission.
* ``grades_wide.csv``: one row per student for an LMS: total, maximum, one column per exercise.
* ``feedback/<student>.md``: one file per student.
* ``similarity.md`` and ``similarity.csv``: pairs of students whose solution cells of one exercise
  share code (:mod:`onehot2gpt_teach.similarity`, ``--copy-threshold``).

The code is in four modules, all of whose public names this module exports: ``grading_checks``
(results, check cells, submissions, the verdict), ``grading_kernel`` (one submission in a kernel),
``grading_workers`` (a class, one process per submission, the journal) and ``grading_reports``.
"""

from __future__ import annotations

import argparse
import sys

if __name__ == "__main__":
    # As a command (the grader, and each of its workers: one fresh process per submission), skip
    # jsonschema's optional "iri" format checker: importing it loads rfc3987_syntax, which compiles
    # a grammar at import, most of the time each process spends on imports. The notebook schema
    # nbformat validates against checks no IRI, so no check is lost. Importers of this module keep it.
    sys.modules.setdefault("rfc3987_syntax", None)

from ._cli import output_folder
from .grading_checks import (
    CSV_COLUMNS,
    MESSAGE_CHARS,
    RESULTS,
    ExerciseResult,
    ReferenceCheck,
    Submission,
    check_calls,
    check_points,
    exercise_name,
    find_submissions,
    match_reference,
    one_line,
    plan_cells,
    reference_checks,
    replay_check,
    resubmission,
)
from .grading_kernel import MAX_RESTARTS, PROBE_SECONDS, grade_submission, network_isolation_available
from .grading_reports import (
    duplicates,
    markdown_report,
    redact,
    write_csv,
    write_feedback,
    write_reports,
    write_wide_csv,
)
from .grading_workers import JOURNAL, MEMORY_GB, WORKER_GRACE, grade, read_journal, run_worker
from .sandbox import SandboxUnavailable
from .similarity import THRESHOLD as COPY_THRESHOLD
from .similarity import report_copies, threshold_argument

__all__ = [
    "CSV_COLUMNS",
    "JOURNAL",
    "MAX_RESTARTS",
    "MEMORY_GB",
    "MESSAGE_CHARS",
    "PROBE_SECONDS",
    "RESULTS",
    "WORKER_GRACE",
    "ExerciseResult",
    "ReferenceCheck",
    "Submission",
    "check_calls",
    "check_points",
    "duplicates",
    "exercise_name",
    "find_submissions",
    "grade",
    "grade_submission",
    "main",
    "markdown_report",
    "match_reference",
    "network_isolation_available",
    "one_line",
    "plan_cells",
    "read_journal",
    "redact",
    "reference_checks",
    "replay_check",
    "resubmission",
    "write_csv",
    "write_feedback",
    "write_reports",
    "write_wide_csv",
]


def main(argv: list[str] | None = None) -> int:
    """Command line: grade a folder of submissions, write the reports."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == "--worker":
        return run_worker(argv[1])
    parser = argparse.ArgumentParser(
        prog="onehot2gpt-grade",
        description="Run submitted student notebooks in fresh kernels, one process each, and grade "
        "their checked exercises (grades.csv, grades.md, grades_wide.csv, feedback/).",
    )
    parser.add_argument(
        "submissions",
        help="folder of submitted .ipynb files, searched recursively; the first subfolder names the student",
    )
    parser.add_argument(
        "--reference", default="notebooks", help="folder of the solved course notebooks (default: notebooks)"
    )
    parser.add_argument("--out", help="where to write the reports and the journal (default: the submissions folder)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds for a whole notebook (default: 1800)")
    parser.add_argument(
        "--cell-timeout", type=float, default=300, help="seconds for one cell before it is interrupted (default: 300)"
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="submissions graded at the same time (default: 1); each gets the machine's cores divided by this",
    )
    parser.add_argument(
        "--hidden-seed",
        type=int,
        action="append",
        help="seed of hidden test inputs, never in the student notebooks (repeat for "
        "more; default: one random seed, kept in the journal so a resumed run "
        "uses it again)",
    )
    parser.add_argument(
        "--memory-gb",
        type=float,
        default=MEMORY_GB,
        help=f"memory for each submission: its sandbox's processes together, and each process's address space "
        f"(default: {MEMORY_GB:g}; 0 for no limit)",
    )
    parser.add_argument(
        "--network",
        action="store_true",
        help="let submissions reach the network (by default their kernels get none "
        "where the OS allows: Linux user namespaces)",
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="grade without the bubblewrap sandbox, student code running with your permissions "
        "(by default the grader refuses where no sandbox can be built); grades.md says so",
    )
    parser.add_argument(
        "--assignment",
        metavar="NAME",
        help="grade only this assignment's exercises (named in the course notebooks' metadata "
        "onehot2gpt.assignments; the handout from onehot2gpt-student --assignment NAME)",
    )
    parser.add_argument(
        "--fresh",
        action="store_true",
        help=f"grade everything again, ignoring the journal ({JOURNAL}) of an earlier run",
    )
    parser.add_argument(
        "--copy-threshold",
        type=threshold_argument,
        default=COPY_THRESHOLD,
        help="similarity.md and .csv list the pairs of students whose solution cells of one exercise each have "
        f"at least this share of their code in the other, 0 to 1 (default: {COPY_THRESHOLD}; docs/grading.md, Copies)",
    )
    args = parser.parse_args(argv)
    if args.timeout <= 0 or args.cell_timeout <= 0:
        parser.error("--timeout and --cell-timeout must be positive numbers of seconds")
    if args.jobs < 1:
        parser.error("--jobs must be 1 or more")
    if args.memory_gb < 0:
        parser.error("--memory-gb must be 0 (no limit) or a positive number")
    out = output_folder(parser, "--out", args.out or args.submissions)
    journal = out / JOURNAL
    if args.fresh and journal.exists():
        journal.unlink()
    log = lambda text: print(text, file=sys.stderr, flush=True)  # noqa: E731
    # the hidden seeds, kept out of the feedback: the given ones, else the one the journal recorded
    seeds = lambda: args.hidden_seed or (read_journal(journal)[0] if journal.exists() else None) or ()  # noqa: E731
    settings = (
        f"Graded against `{args.reference}`{f' (assignment `{args.assignment}`)' if args.assignment else ''}; limits: {args.cell_timeout:g} s a cell, "
        f"{args.timeout:g} s a notebook, {args.memory_gb:g} GB a submission "
        f"({'no limit' if not args.memory_gb else 'its processes together' if not args.no_sandbox else 'address space'}); "
        f"{args.jobs} at a time; network: "
        f"{'allowed' if args.network else 'cut' if not args.no_sandbox or network_isolation_available() else 'not isolated (no user namespaces here)'}; "
        f"sandbox: {'NONE (--no-sandbox), student code ran with your permissions' if args.no_sandbox else 'bubblewrap'}."
    )
    try:
        results = grade(
            args.submissions,
            args.reference,
            cell_timeout=args.cell_timeout,
            timeout=args.timeout,
            log=log,
            jobs=args.jobs,
            hidden_seeds=args.hidden_seed,
            journal=journal,
            memory_gb=args.memory_gb or None,
            network=args.network,
            sandbox=not args.no_sandbox,
            assignment=args.assignment,
            on_result=lambda so_far: write_reports(so_far, out, settings + " (in progress)", seeds()),
        )
    except (FileNotFoundError, ValueError, SandboxUnavailable) as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: every grading process was stopped on the way out
        print(
            f"interrupted: the submissions graded so far are in {journal}; run the same command "
            "again to grade the rest (the ones stopped mid-way included)",
            file=sys.stderr,
        )
        return 130
    for path in write_reports(results, out, settings, seeds()):
        print(path)
    try:  # copies across the class (onehot2gpt_teach.similarity), once the grades are written
        for path in report_copies(args.submissions, args.reference, out, args.copy_threshold):
            print(path)
    except (ValueError, ImportError) as exc:
        log(f"similarity.md not written: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
