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


CODE_PATH = re.compile(r'\b(?:simreal_ros|test|tools|bench)/[\w./-]*\.py\b')
DOTTED = re.compile(r'\bsimreal_ros(?:\.[A-Za-z_]\w*)+')


def _module_file(parts: list[str]) -> Path | None:
    base = REPO.joinpath(*parts)
    for f in (base.with_suffix('.py'), base / '__init__.py'):
        if f.exists():
            return f
    return None


def dotted_name_error(name: str) -> str:
    """'' when ``simreal_ros.a.b[.Attr[.member]]`` names a module (and what it defines)."""
    parts = name.split('.')
    for k in range(len(parts), 0, -1):
        module = _module_file(parts[:k])
        if module is not None:
            break
    else:
        return 'no such module'
    rest = parts[k:]
    if len(rest) > 2:
        return f'no module {".".join(parts[:k + 1])}'
    if rest and not re.search(rf'^\s*(?:def|class)\s+{rest[0]}\b|^{rest[0]}\s*[:=]',
                              module.read_text(encoding='utf-8'), re.M):
        return f'{module.relative_to(REPO)} defines no {rest[0]}'
    return ''


@pytest.mark.parametrize('page', PAGES, ids=lambda p: p.name)
def test_every_code_path_a_page_names_exists(page: Path):
    """A module moved or renamed (as in a re-cut of the packages) must take its docs along."""
    text = page.read_text(encoding='utf-8')
    missing = sorted({p for p in CODE_PATH.findall(text) if not (REPO / p).exists()})
    wrong = sorted({f'{n}: {e}' for n in DOTTED.findall(text) if (e := dotted_name_error(n))})
    assert missing == [] and wrong == []


def test_the_code_path_check_can_fail():
    assert CODE_PATH.findall('see `simreal_ros/core/policy_spec.py`.') == \
        ['simreal_ros/core/policy_spec.py']
    assert not (REPO / 'simreal_ros/core/policy_spec.py').exists()
    assert dotted_name_error('simreal_ros.policy.spec') == ''
    assert dotted_name_error('simreal_ros.policy.spec.load_policy_spec') == ''
    assert dotted_name_error('simreal_ros.policy.train.World') == \
        'simreal_ros/policy/train.py defines no World'
    assert dotted_name_error('simreal_ros.core.policy_spec.x') == \
        'simreal_ros/core/__init__.py defines no policy_spec'


@pytest.mark.parametrize('page', [p for p in PAGES if p.parent.name == 'docs'],
                         ids=lambda p: p.name)
def test_every_feature_page_names_its_modules(page: Path):
    """Each docs/ page says where its feature is implemented (a line starting 'Implemented in')."""
    lines = [ln for ln in page.read_text(encoding='utf-8').splitlines()
             if ln.startswith('Implemented in')]
    assert len(lines) == 1 and CODE_PATH.search(lines[0]), lines


def _setup_requirements() -> tuple[list[str], list[str]]:
    """(install_requires, extras_require['test']) of setup.py, read without running it."""
    import ast
    call = next(n for n in ast.walk(ast.parse((REPO / 'setup.py').read_text(encoding='utf-8')))
                if isinstance(n, ast.Call) and getattr(n.func, 'id', '') == 'setup')
    kw = {k.arg: k.value for k in call.keywords}
    install = ast.literal_eval(kw['install_requires'])
    extras = kw['extras_require']
    assert isinstance(extras, ast.Dict)
    test = next(ast.literal_eval(v) for k, v in zip(extras.keys, extras.values, strict=True)
                if isinstance(k, ast.Constant) and k.value == 'test')
    return install, test


def _pip_keys(tag: str) -> set[str]:
    """Names of package.xml's ``python3-<name>-pip`` keys of one dependency kind."""
    text = (REPO / 'package.xml').read_text(encoding='utf-8')
    return set(re.findall(rf'<{tag}>python3-([\w-]+)-pip</{tag}>', text))


def _name(requirement: str) -> str:
    match = re.match(r'[A-Za-z0-9_.-]+', requirement)
    assert match, requirement
    return match.group(0).lower().replace('_', '-')


def test_system_install_pip_lines_match_setup_py():
    """The pip-only packages of a system install (package.xml's -pip keys, which rosdep may
    skip) are shown with setup.py's version requirements, in the README and the distro page."""
    install, test = _setup_requirements()
    expected = [sorted(r for r in reqs if _name(r) in _pip_keys(tag))
                for reqs, tag in ((install, 'exec_depend'), (test, 'test_depend'))]
    assert len(expected[0]) == len(_pip_keys('exec_depend'))  # each key has a setup.py pin
    assert len(expected[1]) == len(_pip_keys('test_depend'))
    for page, want in ((REPO / 'README.md', [expected[0]]),
                       (REPO / 'docs' / 'ros_distributions.md', expected)):
        lines = [ln.split('#')[0].split() for ln in page.read_text(encoding='utf-8').splitlines()
                 if ln.strip().startswith('pip install --user ')]
        shown = [sorted(t.strip("'\"") for t in ln[3:]) for ln in lines]
        assert shown == want, page.name


def _commands() -> dict[str, set[str]]:
    """{command: its sub-commands} of the ``simreal`` parser."""
    import argparse

    from simreal_ros.cli import build_parser

    def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        return next((dict(a.choices) for a in parser._actions
                     if isinstance(a, argparse._SubParsersAction)), {})

    return {name: set(subparsers(p)) for name, p in subparsers(build_parser()).items()}


def _typed_commands(text: str) -> list[tuple[str, str]]:
    """(command, next word) of every ``simreal ...`` a code block line or a code span starts
    (or runs after ``&&``, ``|``, ``$(``)."""
    code = [ln.strip() for ln in text.splitlines() if ln.startswith('    ')]
    code += re.findall(r'`([^`\n]+)`', text)
    return [(m.group(1), m.group(2) or '') for snippet in code
            for m in re.finditer(r'(?:^|&& |\| |\$\()simreal ([a-z][\w-]*)'
                                 r'(?: ([a-z][\w-]*))?', snippet)]


@pytest.mark.parametrize('page', PAGES, ids=lambda p: p.name)
def test_every_simreal_command_a_page_shows_exists(page: Path):
    commands = _commands()
    wrong = sorted({f'simreal {c} {s}'.strip() for c, s in
                    _typed_commands(page.read_text(encoding='utf-8'))
                    if c not in commands or commands[c] and s not in commands[c]})
    assert wrong == []


def test_the_command_check_can_fail():
    typed = _typed_commands('    simreal policy enable\n    cd x && simreal policy start\n'
                            'run `simreal topic lst` or `simreal nope`, not `a simreal b`')
    assert typed == [('policy', 'enable'), ('policy', 'start'), ('topic', 'lst'),
                     ('nope', '')]
    commands = _commands()
    assert commands['policy'] == {'enable', 'disable'} and 'nope' not in commands
    assert commands['topic'] == {'list', 'echo'}


@pytest.mark.parametrize('page', PAGES, ids=lambda p: p.name)
def test_every_node_command_a_page_shows_is_installed(page: Path):
    """``simreal_<node> --ros-args ...`` (pip) and ``ros2 run simreal_ros simreal_<node>``
    (system install) name console scripts of setup.py (generated from the node registry)."""
    from simreal_ros.bringup.registry import console_scripts
    scripts = {entry.split(' = ')[0] for entry in console_scripts()}
    assert {'simreal', 'simreal_policy', 'simreal_injector'} <= scripts
    text = page.read_text(encoding='utf-8')
    shown = set(re.findall(r'^ {4}(simreal_\w+) ', text, re.M))
    shown |= set(re.findall(r'ros2 run simreal_ros (\w+)', text))
    assert sorted(shown - scripts) == []
