"""Planted cases for copy detection: what `onehot2gpt_teach.similarity` scores a copy, an edited
copy and an independent solution of eight course exercises, at given copydetect settings.

For each exercise (found in the course notebooks by its ``def`` line) the course wrote, as data
below: a student solution ``a`` different from the course's, ``copy`` (``a`` with every name and
comment changed), ``edited`` (``copy`` with one line edited: ``EDITS``) and ``independent`` (a
solution written apart from ``a``). Each is compared with :func:`compare_cells` (the exercise's
student version removed as boilerplate, as the grader does) against ``a``, and ``a`` and
``independent`` against the course's own solution::

    python tools/similarity_calibration.py                           # the module's settings
    python tools/similarity_calibration.py --noise 25 --guarantee 25 # copydetect's defaults
    python tools/similarity_calibration.py --out docs/results/similarity_calibration.json

prints one line per exercise, the extremes over all of them, and one JSON object as its last line;
``--out FILE`` also keeps the run in FILE (``{"runs": [...]}``, replacing an earlier run with the
same settings), with the command and the commit it ran at. docs/grading.md ("Copies") quotes
docs/results/similarity_calibration.json; tests/test_similarity.py runs :func:`calibrate`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import nbformat
from onehot2gpt_teach.similarity import GUARANTEE, NOISE, THRESHOLD, compare_cells, reference_exercises

ROOT = Path(__file__).resolve().parents[1]

# {function: (a, copy, independent)}: a student solution, its copy with names and comments changed,
# and a solution written apart from a.
CASES = {
    "my_one_hot": (
        """def my_one_hot(ids, vocab_size):
    ids = torch.as_tensor(ids)
    # one row per id
    result = torch.zeros((ids.shape[0], vocab_size))
    for row, idx in enumerate(ids):
        result[row, idx] = 1
    return result
""",
        """def my_one_hot(ids, vocab_size):
    ids = torch.as_tensor(ids)
    # fill a matrix of zeros, then set the ones
    m = torch.zeros((ids.shape[0], vocab_size))
    for r, i in enumerate(ids):
        m[r, i] = 1
    return m
""",
        """def my_one_hot(ids, vocab_size):
    ids = torch.as_tensor(ids)
    eye = torch.eye(vocab_size)
    return eye[ids]
""",
    ),
    "my_cosine": (
        """def my_cosine(a, b):
    # dot product over the norms
    num = (a * b).sum()
    den = a.norm() * b.norm()
    return num / den
""",
        """def my_cosine(a, b):
    # cosine = <a,b> / |a||b|
    top = (a * b).sum()
    bottom = a.norm() * b.norm()
    return top / bottom
""",
        """def my_cosine(a, b):
    a_unit = a / torch.sqrt(torch.sum(a ** 2))
    b_unit = b / torch.sqrt(torch.sum(b ** 2))
    return torch.sum(a_unit * b_unit)
""",
    ),
    "my_encode": (
        """def my_encode(tokens, stoi, unk_id):
    ids = []
    for tok in tokens:
        if tok in stoi:
            ids.append(stoi[tok])
        else:
            ids.append(unk_id)
    return ids
""",
        """def my_encode(tokens, stoi, unk_id):
    out = []
    for word in tokens:  # look each word up
        if word in stoi:
            out.append(stoi[word])
        else:
            out.append(unk_id)
    return out
""",
        """def my_encode(tokens, stoi, unk_id):
    return list(map(lambda t: stoi[t] if t in stoi else unk_id, tokens))
""",
    ),
    "my_skipgram_pairs": (
        """def my_skipgram_pairs(ids, window):
    pairs = []
    n = len(ids)
    for c in range(n):
        lo = max(0, c - window)
        hi = min(n - 1, c + window)
        for o in range(lo, hi + 1):
            if o == c:
                continue
            pairs.append((ids[c], ids[o]))
    return pairs
""",
        """def my_skipgram_pairs(ids, window):
    pairs = []
    length = len(ids)
    for center in range(length):
        # window bounds, clipped
        start = max(0, center - window)
        stop = min(length - 1, center + window)
        for other in range(start, stop + 1):
            if other == center:
                continue
            pairs.append((ids[center], ids[other]))
    return pairs
""",
        """def my_skipgram_pairs(ids, window):
    pairs = []
    for i, center in enumerate(ids):
        for d in range(-window, window + 1):
            j = i + d
            if d != 0 and 0 <= j < len(ids):
                pairs.append((center, ids[j]))
    return pairs
""",
    ),
    "my_char_ngrams": (
        """def my_char_ngrams(word, min_n=3, max_n=6):
    w = f"<{word}>"
    grams = []
    for n in range(min_n, max_n + 1):
        for start in range(0, len(w) - n + 1):
            grams.append(w[start:start + n])
    return grams
""",
        """def my_char_ngrams(word, min_n=3, max_n=6):
    padded = f"<{word}>"  # boundary symbols
    result = []
    for size in range(min_n, max_n + 1):
        for s in range(0, len(padded) - size + 1):
            result.append(padded[s:s + size])
    return result
""",
        """def my_char_ngrams(word, min_n=3, max_n=6):
    s = "<%s>" % word
    out = []
    n = min_n
    while n <= max_n:
        i = 0
        while i + n <= len(s):
            out.append(s[i:i + n])
            i += 1
        n += 1
    return out
""",
    ),
    "my_layer_norm": (
        """def my_layer_norm(x, gain, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    centred = x - mu
    sigma2 = centred.pow(2).mean(-1, keepdim=True)
    return gain * centred / (sigma2 + eps).sqrt() + bias
""",
        """def my_layer_norm(x, gain, bias, eps=1e-5):
    # normalise over the last axis
    m = x.mean(-1, keepdim=True)
    d = x - m
    v = d.pow(2).mean(-1, keepdim=True)
    return gain * d / (v + eps).sqrt() + bias
""",
        """def my_layer_norm(x, gain, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    normed = (x - mean) * torch.rsqrt(var + eps)
    return normed * gain + bias
""",
    ),
    "my_reverse_padded": (
        """def my_reverse_padded(ids, lengths):
    rows = []
    for i in range(ids.shape[0]):
        n = int(lengths[i])
        rows.append(torch.cat([ids[i, :n].flip(0), ids[i, n:]]))
    return torch.stack(rows)
""",
        """def my_reverse_padded(ids, lengths):
    out_rows = []
    for b in range(ids.shape[0]):
        L = int(lengths[b])  # real length
        out_rows.append(torch.cat([ids[b, :L].flip(0), ids[b, L:]]))
    return torch.stack(out_rows)
""",
        """def my_reverse_padded(ids, lengths):
    T = ids.size(1)
    pos = torch.arange(T).unsqueeze(0)
    L = lengths.unsqueeze(1)
    src = torch.where(pos < L, L - 1 - pos, pos)
    return ids.gather(1, src)
""",
    ),
    "independent_masks": (
        """def independent_masks(joint, a, b):
    pa = 0.0
    pb = 0.0
    for (x, y), p in joint.items():
        if x == a:
            pa += p
        if y == b:
            pb += p
    return pa * pb
""",
        """def independent_masks(joint, a, b):
    first = 0.0
    second = 0.0
    # marginals
    for (u, v), q in joint.items():
        if u == a:
            first += q
        if v == b:
            second += q
    return first * second
""",
        """def independent_masks(joint, a, b):
    marg_x, marg_y = {}, {}
    for (x, y), p in joint.items():
        marg_x[x] = marg_x.get(x, 0) + p
        marg_y[y] = marg_y.get(y, 0) + p
    return marg_x.get(a, 0) * marg_y.get(b, 0)
""",
    ),
}

# {function: (old, new)}: the one-line edit that turns the copy into the edited copy (a line added,
# a line rewritten, or two lines merged into one).
EDITS = {
    "my_one_hot": (
        "    m = torch.zeros((ids.shape[0], vocab_size))\n",
        "    m = torch.zeros((ids.shape[0], vocab_size))\n    n_rows = m.shape[0]\n",
    ),
    "my_cosine": ("    top = (a * b).sum()\n", "    top = torch.sum(a * b)\n"),
    "my_encode": ("    out = []\n", "    out = list()\n"),
    "my_skipgram_pairs": (
        "            if other == center:\n                continue\n",
        "            if other != center:\n",
    ),
    "my_char_ngrams": ("    result = []\n", "    result = []\n    assert min_n <= max_n\n"),
    "my_layer_norm": ("    d = x - m\n", "    d = x - m  \n    d = d.float()\n"),
    "my_reverse_padded": ("    return torch.stack(out_rows)\n", "    out = torch.stack(out_rows)\n    return out\n"),
    "independent_masks": ("    first = 0.0\n    second = 0.0\n", "    first, second = 0.0, 0.0\n"),
}

COLUMNS = ("copy", "edited_copy", "independent", "student_vs_course", "independent_vs_course")


def edited(function: str) -> str:
    """The copy of `function`'s planted solution with its one line edited (EDITS)."""
    old, new = EDITS[function]
    copy = CASES[function][1]
    if copy.count(old) != 1:
        raise ValueError(f"EDITS[{function!r}]: {old!r} occurs {copy.count(old)} times in the copy; make it occur once")
    return copy.replace(old, new)


def course_exercises(reference_dir: str | Path) -> dict[str, tuple[str, object]]:
    """{function: (notebook file name, Exercise)} for every function of CASES, found in the course
    notebooks (``NN_*.ipynb``) of `reference_dir` by its ``def`` line."""
    folder = Path(reference_dir)
    notebooks = sorted(folder.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"reference_dir={str(reference_dir)!r}: no course notebook (NN_*.ipynb) there")
    found = {}
    for path in notebooks:
        for exercise in reference_exercises(nbformat.read(str(path), as_version=4)):
            for function in CASES:
                if function not in found and exercise.first_line.startswith(f"def {function}("):
                    found[function] = (path.name, exercise)
    missing = sorted(set(CASES) - set(found))
    if missing:
        raise LookupError(f"no exercise of the course notebooks in {folder} defines {', '.join(missing)}")
    return found


def calibrate(noise: int = NOISE, guarantee: int = GUARANTEE, reference_dir: str | Path = ROOT / "notebooks") -> dict:
    """The planted cases' scores at copydetect's `noise` and `guarantee` thresholds:
    ``{"noise", "guarantee", "threshold", "exercises": {function: {"notebook", "exercise", COLUMNS...}},
    "extremes": {"copy_min", "edited_copy_min", "independent_max", "vs_course_max"}}``.
    ``threshold`` is the module's default, given for reading the scores; nothing is filtered by it.
    Raises ValueError for a bad noise or guarantee (as compare_cells does), FileNotFoundError or
    LookupError when `reference_dir` lacks the course notebooks or one of the exercises."""
    exercises = course_exercises(reference_dir)
    rows = {}
    for function, (a, copy, independent) in CASES.items():
        notebook, exercise = exercises[function]
        cells = {
            ("a", "a"): a,
            ("copy", "copy"): copy,
            ("edited", "edited"): edited(function),
            ("independent", "independent"): independent,
            ("course", "course"): exercise.solution,
        }
        pairs = compare_cells(cells, exercise.stub, threshold=0.0, noise=noise, guarantee=guarantee)
        score = {frozenset((p.student_a, p.student_b)): p.score for p in pairs}

        def s(x: str, y: str) -> float:
            return round(score.get(frozenset((x, y)), 0.0), 4)

        rows[function] = {
            "notebook": notebook,
            "exercise": exercise.name,
            "copy": s("a", "copy"),
            "edited_copy": s("a", "edited"),
            "independent": s("a", "independent"),
            "student_vs_course": s("a", "course"),
            "independent_vs_course": s("independent", "course"),
        }
    values = rows.values()
    extremes = {
        "copy_min": min(r["copy"] for r in values),
        "edited_copy_min": min(r["edited_copy"] for r in values),
        "independent_max": max(r["independent"] for r in values),
        "vs_course_max": max(max(r["student_vs_course"], r["independent_vs_course"]) for r in values),
    }
    return {"noise": noise, "guarantee": guarantee, "threshold": THRESHOLD, "exercises": rows, "extremes": extremes}


def report(result: dict) -> str:
    """The human-readable lines of a :func:`calibrate` result (without the JSON line)."""
    header = f"{'function':22s} {'exercise':18s} " + " ".join(f"{c:>{len(c)}s}" for c in COLUMNS)
    lines = [
        f"noise {result['noise']}, guarantee {result['guarantee']} (module threshold {result['threshold']})",
        header,
    ]
    for function, row in result["exercises"].items():
        lines.append(f"{function:22s} {row['exercise']:18s} " + " ".join(f"{row[c]:{len(c)}.2f}" for c in COLUMNS))
    e = result["extremes"]
    lines.append(
        f"copies min {e['copy_min']:.2f}; edited copies min {e['edited_copy_min']:.2f}; "
        f"independent max {e['independent_max']:.2f}; against the course's solution max {e['vs_course_max']:.2f}"
    )
    return "\n".join(lines)


def _commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    except OSError:
        return None
    return out.stdout.strip() or None


def save(result: dict, path: str | Path) -> Path:
    """Keep `result` in the JSON file `path` (``{"runs": [...]}``), replacing a run with the same
    noise and guarantee; runs sorted by noise, then guarantee."""
    path = Path(path)
    runs = []
    if path.exists():
        try:
            runs = json.loads(path.read_text(encoding="utf-8"))["runs"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(
                f"--out {path}: not a file of runs ({type(exc).__name__}: {exc}); give a new file"
            ) from exc
    runs = [r for r in runs if (r.get("noise"), r.get("guarantee")) != (result["noise"], result["guarantee"])]
    runs = sorted([*runs, result], key=lambda r: (r["noise"], r["guarantee"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"runs": runs}, indent=1) + "\n", encoding="utf-8")
    return path


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give a whole number of characters, 1 or more")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tools/similarity_calibration.py",
        description="Score planted copies, edited copies and independent solutions of eight course exercises "
        "with onehot2gpt_teach.similarity; the last line printed is one JSON object.",
    )
    parser.add_argument("--noise", type=_whole, default=NOISE, help=f"copydetect's noise threshold (default {NOISE})")
    parser.add_argument(
        "--guarantee",
        type=_whole,
        default=GUARANTEE,
        help=f"copydetect's guarantee threshold, ≥ noise (default {GUARANTEE})",
    )
    parser.add_argument(
        "--reference",
        default=str(ROOT / "notebooks"),
        help="folder of the solved course notebooks (default: notebooks)",
    )
    parser.add_argument("--out", help="also keep the run in this JSON file of runs")
    args = parser.parse_args(argv)
    if args.guarantee < args.noise:
        parser.error(f"--guarantee {args.guarantee}: give a number ≥ --noise ({args.noise})")
    try:
        result = calibrate(args.noise, args.guarantee, args.reference)
    except (FileNotFoundError, LookupError, ValueError) as exc:
        parser.error(str(exc))
    command = "python tools/similarity_calibration.py " + " ".join(
        [f"--noise {args.noise}", f"--guarantee {args.guarantee}"] + ([f"--out {args.out}"] if args.out else [])
    )
    result = {"command": command, "commit": _commit(), **result}
    if args.out:
        try:
            save(result, args.out)
        except (ValueError, OSError) as exc:
            parser.error(str(exc))
    print(report(result))
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
