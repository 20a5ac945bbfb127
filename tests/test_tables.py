"""The tables of measured numbers in README.md and docs/ are what tools/tables.py writes from the results files."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("tables", ROOT / "tools" / "tables.py")
tables = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tables)


@pytest.mark.parametrize("path", tables.documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_committed_tables_are_what_the_generator_writes(path):
    text = path.read_text()
    assert tables.render(text, path.name) == text, f"{path.name}: run `python tools/tables.py` and commit"


def test_every_table_appears_in_a_document():
    used = {m.group(2) for p in tables.documents() for m in tables.MARKER.finditer(p.read_text())}
    assert set(tables.TABLES) <= used, f"tables no document shows: {set(tables.TABLES) - used}"
    assert "<!-- table:notebooks -->" in (ROOT / "README.md").read_text()


def test_a_changed_results_file_changes_the_table(tmp_path, monkeypatch):
    for name in ("notebooks.json",):
        shutil.copy(tables.RESULTS / name, tmp_path / name)
    record = json.loads((tmp_path / "notebooks.json").read_text())
    record["seconds"]["05_attention.ipynb"] = 61.4
    record["commit"] = "abc1234"
    (tmp_path / "notebooks.json").write_text(json.dumps(record))
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    text = "intro\n<!-- table:notebooks -->\nold\n<!-- /table -->\nend\n"
    new = tables.render(text)
    assert new.startswith("intro\n<!-- table:notebooks -->\n| # |") and new.endswith("<!-- /table -->\nend\n")
    row = next(line for line in new.splitlines() if line.startswith("| 05 |"))
    assert "| 61 s |" in row
    assert "commit abc1234" in new
    assert tables.render(new) == new  # rendering twice changes nothing


def test_an_unknown_table_or_a_missing_results_file_is_named(tmp_path, monkeypatch):
    with pytest.raises(KeyError, match="no table named 'nonsense'"):
        tables.render("<!-- table:nonsense -->\n<!-- /table -->", "X.md")
    monkeypatch.setattr(tables, "RESULTS", tmp_path)
    with pytest.raises(FileNotFoundError, match="python bench/fasttext.py"):
        tables.render("<!-- table:fasttext -->\n<!-- /table -->")


def test_check_mode_reports_a_stale_table(tmp_path, monkeypatch, capsys):
    doc = tmp_path / "README.md"
    doc.write_text("<!-- table:notebook-times -->\n| stale |\n<!-- /table -->\n")
    monkeypatch.setattr(tables, "ROOT", tmp_path)
    monkeypatch.setattr(tables, "documents", lambda: [doc])
    assert tables.main(["--check"]) == 1
    assert "README.md" in capsys.readouterr().err
    assert doc.read_text().endswith("| stale |\n<!-- /table -->\n")  # --check writes nothing
    assert tables.main([]) == 0
    assert tables.main(["--check"]) == 0
