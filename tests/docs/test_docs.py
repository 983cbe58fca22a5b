"""The repository documents itself (issue 22, defect 4): docs/ is current, its links resolve, and
no project file points at documents outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from pocketmq.deploy import config_docs

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

# spelled in pieces so that this file does not match itself
OUTSIDE = re.compile("|".join([r"\.\./" + "shared", "DESIGN" + r"\.md", "STYLE" + r"\.md", "reference" + " §",
                               "SPARK_" + "SOURCE", "ROCKETMQ_" + "REFERENCE", "/work/" + "shared"]))  # fmt: skip


def project_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    files = [ROOT / f for f in out if not f.startswith(".pkg/")]
    return [f for f in files if f.is_file() and not f.is_symlink()]


def test_configuration_page_matches_the_models() -> None:
    page = (DOCS / "configuration.md").read_text()
    assert page == config_docs.render(), (
        "docs/configuration.md is stale: run `python -m pocketmq.deploy.config_docs --write`"
    )


def test_no_project_file_refers_outside_the_repository() -> None:
    hits = []
    for path in project_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not hits, "\n".join(hits)


def test_relative_links_in_docs_resolve() -> None:
    pages = [*DOCS.glob("*.md"), ROOT / "README.md", ROOT / "spark" / "README.md"]
    broken = []
    for page in pages:
        targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text())
        broken += [f"{page.relative_to(ROOT)} -> {t}" for t in targets if not (page.parent / t).exists()]
    assert not broken, broken


def test_keys_named_in_the_prose_pages_exist() -> None:
    known = set(re.findall(r"^\| `([^`]+)` \|", (DOCS / "configuration.md").read_text(), flags=re.M))
    pattern = re.compile(r"`([a-z][A-Za-z0-9]*(?:Enable|Interval|Time|Ratio|Period|When|Path|Type))`")
    missing = []
    for name in ("differences.md", "operations.md", "development.md"):
        missing += [f"{name}: {k}" for k in pattern.findall((DOCS / name).read_text()) if k not in known]
    assert not missing, missing
