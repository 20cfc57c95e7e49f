"""Every benchmark of bench/ has its quick form run as a test (`make bench-quick`, in CI).

A benchmark nothing runs rots: `simreal bench bus` failed for days after the plan of
``backend:=real`` gained a node. This test runs in `make test` and names a benchmark that has
no ``simreal bench NAME --quick`` test marked ``bench``.
"""

from pathlib import Path
import re

REPO = Path(__file__).resolve().parents[1]
QUICK_RUN = re.compile(r"'bench', '(\w+)', '--quick'")


def test_every_benchmark_has_a_quick_test_marked_bench():
    benchmarks = {p.stem for p in (REPO / 'bench').glob('*.py') if not p.stem.startswith('_')}
    tested = set()
    for path in (REPO / 'test').rglob('test_*.py'):
        text = path.read_text()
        if 'pytest.mark.bench' in text:
            tested |= set(QUICK_RUN.findall(text))
    assert sorted(benchmarks - tested) == []
