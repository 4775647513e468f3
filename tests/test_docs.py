"""Documentation checks (fast, no subprocess): index, links, no outside documents."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _pages():
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def test_index_lists_every_page():
    index = (DOCS / "index.md").read_text()
    names = [p.name for p in DOCS.glob("*.md") if p.name != "index.md"]
    missing = [name for name in names if f"({name})" not in index]
    assert not missing, missing


def test_relative_links_resolve():
    broken = []
    for page in _pages():
        for target in LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            path = target.split("#", 1)[0]
            if path and not (page.parent / path).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, broken


def test_no_design_md_reference():
    hits = []
    for page in [*_pages(), *ROOT.glob("tests/*.py"), *ROOT.glob("eatt/**/*.py")]:
        if page.name != "test_docs.py" and "DESIGN" + ".md" in page.read_text(errors="ignore"):
            hits.append(str(page.relative_to(ROOT)))
    assert not hits, hits


def test_readme_at_most_300_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
