"""The docs stand alone: every relative link resolves inside the repository, none cites a file
users do not have."""

from __future__ import annotations

from pathlib import Path
import re

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = sorted([REPO / 'README.md', *(REPO / 'docs').glob('*.md')])
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')


def anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings."""
    out = set()
    for line in page.read_text(encoding='utf-8').splitlines():
        if line.startswith('#'):
            text = line.lstrip('#').strip().lower()
            out.add(re.sub(r'[^\w\- ]', '', text).replace(' ', '-'))
    return out


@pytest.mark.parametrize('page', PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path):
    broken = []
    prose = re.sub(r'`[^`\n]*`', '', page.read_text(encoding='utf-8'))  # code is no link
    for target in LINK.findall(prose):
        if re.match(r'[a-z]+:', target):
            continue  # http(s), mailto: not checked offline
        path, _, anchor = target.partition('#')
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or REPO not in dest.parents and dest != REPO:
            broken.append(target)
        elif anchor and dest.suffix == '.md' and anchor not in anchors(dest):
            broken.append(target)
    assert broken == [], broken


@pytest.mark.parametrize('page', PAGES, ids=lambda p: p.name)
def test_no_page_cites_a_file_outside_the_repository(page: Path):
    text = page.read_text(encoding='utf-8')
    assert 'ARCHITECTURE.md' not in text and 'shared/' not in text


def test_no_module_cites_a_file_outside_the_repository():
    cited = [str(p.relative_to(REPO)) for p in sorted((REPO / 'simreal_ros').rglob('*.py'))
             if re.search(r'ARCHITECTURE(\.md| section)|shared/', p.read_text(encoding='utf-8'))]
    assert cited == []
