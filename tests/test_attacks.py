"""A determined student against the whole grader (issue 46): one class, graded by the grader's
command in a process of its own, holds one submission per kind of attack next to honest
classmates graded before and after them. Each attack is graded as it deserves (an unsolved
notebook stays at 0 whatever it tries; a solved one keeps its points), the run finishes, the
classmates' grades, files and the library are unchanged, and no process of a submission
outlives the run. Each attack is real: it names the paths and processes it goes for, as a
student who read the grader's source would (the sandbox, not secrecy, must stop it).

Needs bubblewrap (``.ci/run`` installs it): without it the module is skipped, except under
CI=true, where it fails."""

from __future__ import annotations

import copy
import csv
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from onehot2gpt_teach import grading, sandbox
from test_grading import cell, code, student_version, tiny_course_notebook
from test_sandbox import host_pids_with

OK, WHY = sandbox.available()
if not OK:
    if os.environ.get("CI", "").strip().lower() in ("1", "true", "yes"):
        raise RuntimeError(f"tests/test_attacks.py needs bubblewrap under CI: {WHY}")
    pytest.skip(f"no sandbox here: {WHY}", allow_module_level=True)

SEED = 424242  # the hidden seed: ≥ 1000, so feedback redacts it
MARKER = "lecturer_secret_marker"  # in the grader's environment (TZ, which the sandbox passes on)
TOKEN = f"attack{os.getpid()}x"  # in the command line of every process an attack leaves running
EXERCISES = ["one_hot", "causal_mask", "encode"]
LIBRARY = [Path(m.__file__).resolve().parent for m in (__import__("onehot2gpt"), __import__("onehot2gpt_exercises"))]
LIBRARY.append(Path(grading.__file__).resolve().parent)
SITE = next(Path(sys.prefix).glob("lib/python3*/site-packages"))

# Each attack: code run in a cell of its own after the imports. {paths} are filled in below.
PROC_SCAN = """
import glob, json, os, signal
def processes(word):
    found = []
    for path in glob.glob('/proc/[0-9]*/cmdline'):
        try:
            argv = open(path, 'rb').read().split(b'\\0')
        except OSError:
            continue
        if any(word in a for a in argv):
            found.append((int(path.split('/')[2]), argv))
    return found
"""

FORGED_RESULT = (
    PROC_SCAN
    + """
passes = [{{"student": "b_forged", "notebook": "01_tiny.ipynb", "file": "b_forged/01_tiny.ipynb",
           "exercise": e, "result": "pass", "check_cell": "ok", "message": "", "points": "9", "max_points": "9"}}
          for e in ("one_hot", "causal_mask", "encode")]
for pid, argv in processes(b'--worker'):
    try:
        spec_path = argv[argv.index(b'--worker') + 1].decode()
        spec = json.load(open(spec_path))
        for target in (spec.get('result'), spec_path):
            if target:
                open(target, 'w').write(json.dumps(passes))
    except Exception as exc:
        print('spec:', exc)
    try:  # the grader's channel: the worker's standard output
        with open('/proc/%d/fd/1' % pid, 'w') as channel:
            for k in range(3):
                channel.write(json.dumps({{"check": k, "result": "pass", "message": ""}}) + '\\n')
            channel.write('{{"done": true}}\\n')
    except Exception as exc:
        print('channel:', exc)
    os.kill(pid, signal.SIGKILL)
os.kill(os.getppid(), signal.SIGKILL)
"""
)

ON_DISK = """
import onehot2gpt_exercises.checking as checking
for target, text in [
    (checking.__file__, '\\nassert_same = lambda *args, **kwargs: None\\n'),
    ({site!r} + '/zz_attack.pth', 'import onehot2gpt_exercises.checking as c; c.assert_same = print\\n'),
    ({reference!r}, ' '),
]:
    try:
        with open(target, 'a') as f:
            f.write(text)
        print('wrote', target)
    except OSError as exc:
        print(exc)
"""

JOURNAL_AND_GRADER = (
    PROC_SCAN
    + """
import hashlib
rows = [{{"student": s, "notebook": "01_tiny.ipynb", "file": s + "/01_tiny.ipynb", "exercise": e,
         "result": "pass", "check_cell": "ok", "message": "", "points": "1", "max_points": "1"}}
        for s in ("d_journal", "zz_unsolved") for e in ("one_hot", "causal_mask", "encode")]
for student in ("d_journal", "zz_unsolved"):
    try:
        sha = hashlib.sha256(open({subs!r} + '/' + student + '/01_tiny.ipynb', 'rb').read()).hexdigest()
        with open({out!r} + '/results.jsonl', 'a') as journal:
            journal.write(json.dumps({{"file": student + "/01_tiny.ipynb", "sha256": sha,
                                      "rows": [r for r in rows if r["student"] == student]}}) + '\\n')
    except OSError as exc:
        print(exc)
for pid, argv in processes(b'onehot2gpt_teach.grading'):
    os.kill(pid, signal.SIGKILL)
"""
)

ESCAPE = """
import subprocess, sys
escapee = '''
import glob, sys, time
end = time.time() + 40
while time.time() < end:
    for path in glob.glob({out!r} + '/*') + glob.glob({out!r} + '/feedback/*'):
        try:
            open(path, 'w').write('forged by an escaped process')
        except OSError:
            pass
    time.sleep(0.2)
'''
subprocess.Popen([sys.executable, '-c', escapee, {token!r}], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""

CLASSMATE = """
import json
try:
    solved = json.load(open({solved!r}))
    for c in solved['cells']:
        if c['cell_type'] == 'code' and 'check' not in c['metadata'].get('tags', []):
            exec(''.join(c['source']))
    print('read the classmate')
except OSError as exc:
    print(exc)
try:
    open({solved!r}, 'w').write('overwritten')
except OSError as exc:
    print(exc)
"""

FORK_BOMB = """
import subprocess, sys
bomb = '''
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
'''
subprocess.Popen([sys.executable, '-c', bomb, {token!r}], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
"""

MEMORY = """
import subprocess, sys, time
hog = 'import time\\nblock = b"x" * (700 * 2**20)\\ntime.sleep(60)'
for _ in range(4):  # 2.8 GB together, each under the per-process limit of 2 GB
    subprocess.Popen([sys.executable, '-c', hog, {token!r}], start_new_session=True)
time.sleep(30)
"""

SOCKET = """
import socket
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect({sock!r})
    s.sendall(b'forged')
    print('connected')
except OSError as exc:
    print(exc)
"""

STACK = (
    "def my_one_hot(ids, vocab_size):\n"
    "    import sys\n"
    "    frame = sys._getframe(1)\n"
    "    while frame is not None:\n"
    "        if 'reference_fn' in frame.f_locals:\n"
    "            return frame.f_locals['reference_fn'](ids, vocab_size)\n"
    "        frame = frame.f_back\n"
    "    return torch.zeros(len(ids), vocab_size)"
)
ALIAS = "import onehot2gpt\nmy_one_hot = onehot2gpt.vocab.one_hot"
LEAK = (  # the seeds from the kernel's input history (the grader's prelude), the environment, paths
    "def my_one_hot(ids, vocab_size):\n"
    "    import os, re\n"
    "    seeds = re.findall(r'start_recording\\([^)]*\\)', ''.join(In))[-1:]\n"
    "    raise ValueError(f'{seeds} TZ={os.environ.get(\"TZ\")} cwd={os.getcwd()} '\n"
    "                     f'mirror={os.environ.get(\"ONEHOT2GPT_DATA_MIRROR\")}')"
)


def _tree_hash(folders) -> dict[str, str]:
    out = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                out[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _class(root: Path) -> dict[str, object]:
    solved = tiny_course_notebook()
    unsolved = student_version(solved)
    subs, out, reference = root / "subs", root / "out", root / "reference" / "01_tiny.ipynb"
    paths = dict(
        site=str(SITE),
        reference=str(reference),
        subs=str(subs),
        out=str(out),
        token=TOKEN,
        solved=str(subs / "zz_solved" / "01_tiny.ipynb"),
        sock=str(root / "lecturer.sock"),
    )

    def attacked(base, source, cell_id="attack"):
        nb = copy.deepcopy(base)
        nb.cells.insert(2, code(source.format(**paths), cell_id))
        return nb

    def answered(base, exercise_cell, source):
        nb = copy.deepcopy(base)
        cell(nb, exercise_cell).source = source
        return nb

    return {
        "a_solved": solved,
        "b_forged": attacked(unsolved, FORGED_RESULT),
        "c_on_disk": attacked(unsolved, ON_DISK),
        "d_journal": attacked(unsolved, JOURNAL_AND_GRADER),
        "e_escape": attacked(unsolved, ESCAPE),
        "f_classmate": attacked(unsolved, CLASSMATE),
        "g_fork_bomb": attacked(solved, FORK_BOMB),
        "h_memory": answered(solved, "ex-one-hot", MEMORY.format(**paths) + "\n" + cell(solved, "ex-one-hot").source),
        "i_socket": attacked(unsolved, SOCKET),
        "j_stack": answered(unsolved, "ex-one-hot", STACK),
        "k_alias": answered(unsolved, "ex-one-hot", ALIAS),
        "l_leak": answered(unsolved, "ex-one-hot", LEAK),
        "zz_solved": solved,
        "zz_unsolved": unsolved,
    }


def _grader(root: Path) -> subprocess.Popen:
    env = dict(os.environ, TZ=MARKER)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "onehot2gpt_teach.grading",
            str(root / "subs"),
            "--reference",
            str(root / "reference"),
            "--out",
            str(root / "out"),
            "--cell-timeout",
            "40",
            "--timeout",
            "300",
            "--jobs",
            "2",
            "--memory-gb",
            "2",
            "--hidden-seed",
            str(SEED),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    root = tmp_path_factory.mktemp("attacks")
    (root / "reference").mkdir()
    nbformat.write(tiny_course_notebook(), root / "reference" / "01_tiny.ipynb")
    for student, nb in _class(root).items():
        (root / "subs" / student).mkdir(parents=True)
        nbformat.write(nb, root / "subs" / student / "01_tiny.ipynb")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "lecturer.sock"))
    server.listen(8)
    server.setblocking(False)
    files_before = _tree_hash([root / "subs", root / "reference"])
    library_before = _tree_hash(LIBRARY)
    proc = _grader(root)
    try:
        log, _ = proc.communicate(timeout=1200)
    finally:
        proc.kill()
    left = [pid for pid in host_pids_with(TOKEN) if pid != os.getpid()]  # at once: nothing may outlive the run
    out = root / "out"
    reports = _tree_hash([out])
    time.sleep(3)  # an escaped writer would have struck by now
    try:
        server.accept()
        connected = True
    except BlockingIOError:
        connected = False
    server.close()
    with open(out / "grades.csv", newline="", encoding="utf-8") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    return {
        "root": root,
        "code": proc.returncode,
        "log": log,
        "rows": rows,
        "left": left,
        "connected": connected,
        "files_changed": [
            p for p, h in _tree_hash([root / "subs", root / "reference"]).items() if files_before[p] != h
        ],
        "library_changed": [p for p, h in _tree_hash(LIBRARY).items() if library_before.get(p) != h]
        + [p for p in library_before if not Path(p).exists()],
        "reports_changed": [p for p, h in _tree_hash([out]).items() if reports.get(p) != h],
    }


def results(attacked, student):
    return [attacked["rows"][(student, e)]["result"] for e in EXERCISES]


def points(attacked, student):
    return sum(float(attacked["rows"][(student, e)]["points"]) for e in EXERCISES)


def test_the_run_finishes_and_the_honest_classmates_are_graded_right(attacked):
    assert attacked["code"] == 0, attacked["log"][-3000:]
    for student in ("a_solved", "zz_solved"):
        assert results(attacked, student) == ["pass"] * 3 and points(attacked, student) == 4
    assert results(attacked, "zz_unsolved") == ["fail"] * 3 and points(attacked, "zz_unsolved") == 0


def test_nothing_on_disk_changed_but_the_reports(attacked):
    assert attacked["files_changed"] == []  # submissions (the classmate's included), the reference
    assert attacked["library_changed"] == []
    assert not (SITE / "zz_attack.pth").exists()
    assert attacked["reports_changed"] == []  # after the run: no process still writing


@pytest.mark.parametrize(
    "student",
    ["b_forged", "c_on_disk", "d_journal", "e_escape", "f_classmate", "i_socket", "j_stack", "k_alias", "l_leak"],
)
def test_an_unsolved_attacker_gets_nothing(attacked, student):
    assert points(attacked, student) == 0, [attacked["rows"][(student, e)] for e in EXERCISES]
    assert "pass" not in results(attacked, student)


def test_the_forged_result_and_the_killed_worker_change_nothing(attacked):
    # the kernel saw no grading process to forge or kill: graded as the unsolved notebook it is
    assert results(attacked, "b_forged") == ["fail"] * 3
    assert all("not written yet" in attacked["rows"][("b_forged", e)]["message"] for e in EXERCISES)


def test_a_journal_forgery_and_a_grader_kill_change_nothing_on_resume(attacked):
    root = attacked["root"]
    journal = [json.loads(line) for line in (root / "out" / grading.JOURNAL).read_text().splitlines()]
    finished = [e["file"] for e in journal if "rows" in e]
    assert sorted(finished) == sorted(set(finished))  # each once: no forged second line
    proc = _grader(root)  # the same command again: everything comes from the journal
    log, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, log[-3000:]
    assert log.count("graded before") == len(finished)
    with open(root / "out" / "grades.csv", newline="", encoding="utf-8") as f:
        again = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert again == attacked["rows"]


def test_the_reference_from_the_stack_or_the_library_scores_zero_with_the_reason(attacked):
    assert "_getframe" in attacked["rows"][("j_stack", "one_hot")]["message"]
    assert "uses the library's own `one_hot`" in attacked["rows"][("k_alias", "one_hot")]["message"]


def test_no_process_outlives_the_run(attacked):
    assert attacked["left"] == []  # the escaped writer, the fork bomb, the memory hogs


def test_a_fork_bomb_costs_its_author_at_most_its_own_grade(attacked):
    assert [r for r in results(attacked, "g_fork_bomb")] != []  # graded, the run went on
    assert results(attacked, "zz_solved") == ["pass"] * 3


def test_memory_spread_over_processes_is_stopped_for_the_whole_tree(attacked):
    one_hot = attacked["rows"][("h_memory", "one_hot")]
    assert one_hot["result"] == "crash", one_hot  # the cell that defined it was stopped
    assert "held" in one_hot["message"] and "over the limit of 2 GB" in one_hot["message"], one_hot
    print(one_hot["message"])
    assert results(attacked, "h_memory")[1:] == ["pass", "pass"]  # the rest graded as it deserves


def test_no_lecturer_socket_is_reachable(attacked):
    assert not attacked["connected"]


def test_no_seed_environment_or_path_reaches_the_students_feedback(attacked):
    feedback = (attacked["root"] / "out" / "feedback" / "l_leak.md").read_text(encoding="utf-8")
    assert "raised ValueError" in feedback  # the leak was attempted and reported
    assert str(SEED) not in feedback
    assert MARKER not in feedback
    assert str(attacked["root"]) not in feedback and str(Path.home()) + "/" not in feedback
