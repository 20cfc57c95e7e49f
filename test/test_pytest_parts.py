"""``tools/pytest_parts.sh``, the Makefile's test runner: its exit status decides CI.

Each case runs the script with one worker on a throw-away test directory (its own rootdir, so
the project's conftest and setup.cfg stay out): a failure in either part fails the run, one
part selecting nothing does not, both selecting nothing is pytest's 5.
"""

from __future__ import annotations

import os
from pathlib import Path
import subprocess
import sys

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / 'tools' / 'pytest_parts.sh'

PASSING = 'def test_ok():\n    assert True\n'
FAILING = 'def test_bad():\n    assert False\n'
TIMING_PASSING = 'import pytest\n\n\n@pytest.mark.timing\ndef test_timed():\n    assert True\n'
TIMING_FAILING = 'import pytest\n\n\n@pytest.mark.timing\ndef test_timed():\n    assert False\n'


@pytest.mark.parametrize('files, expr, code', [
    ({'test_a.py': PASSING}, 'not bench', 0),                   # no timing test: part 2 is 5
    ({'test_a.py': PASSING}, 'bench', 5),                       # nothing selected at all
    ({'test_a.py': FAILING, 'test_b.py': TIMING_PASSING}, 'not bench', 1),
    ({'test_a.py': PASSING, 'test_b.py': TIMING_FAILING}, 'not bench', 1),
], ids=['no-timing-test', 'none', 'parallel-part-fails', 'timing-part-fails'])
def test_the_exit_status_is_the_first_failing_parts(tmp_path: Path, files: dict, expr: str,
                                                    code: int) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / 'pytest.ini').write_text('[pytest]\nmarkers =\n    timing: test\n')
    # only the plugin the script needs (xdist): the others' imports took most of each case
    env = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD='1')
    r = subprocess.run(['sh', str(SCRIPT), sys.executable, '1', expr, '-p', 'xdist.plugin',
                        '-p', 'no:cacheprovider', str(tmp_path)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == code, r.stdout + r.stderr
    assert r.stdout.count('pytest: the ') == 2  # both parts ran
