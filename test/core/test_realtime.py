"""core.realtime: parameters, per-thread application read back, the permission fallback, the
bounded spin and the heartbeat; a wedged SCHED_FIFO loop in a child process."""

from __future__ import annotations

import json
import os
from pathlib import Path
import shutil
import subprocess
import sys
import threading

import pytest

from simreal_ros.core import realtime as rt
from simreal_ros.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
SETPRIV = shutil.which('setpriv')
DROP_NICE = [SETPRIV or 'setpriv', '--inh-caps=-sys_nice', '--bounding-set=-sys_nice']


needs_rt = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (CAP_SYS_NICE) here')


@pytest.mark.parametrize('text, cpus', [('', ()), ('0', (0,)), ('1,0', (0, 1)), ('0-1', (0, 1)),
                                         (' 1 ', (1,))])
def test_parse_cpus(text, cpus):
    assert rt.parse_cpus(text, 'src', cpu_count=2) == cpus


@pytest.mark.parametrize('text', ['2', 'a', '1-0', '-1', '0,,1', 3])
def test_parse_cpus_rejects(text):
    with pytest.raises(ConfigError) as e:
        rt.parse_cpus(text, 'node params', cpu_count=2)
    assert e.value.key == 'cpu_affinity'
    assert e.value.source == 'node params'


@pytest.mark.parametrize('value', [-1, 99, 1.5, True, '80'])
def test_priority_rejects(value):
    with pytest.raises(ConfigError, match=r'rt_priority: expected an integer in \[0, 98\]'):
        rt.check_priority(value, 'src')


def test_settings_from_prefix_names_the_key():
    with pytest.raises(ConfigError) as e:
        rt.settings_from(120, '', 'injector params', prefix='delivery_')
    assert e.value.key == 'delivery_rt_priority'
    s = rt.settings_from(60, '0', 'src')
    assert (s.priority, s.cpus, s.lock_memory, s.enabled) == (60, (0,), False, True)
    assert not rt.RtSettings().enabled


def _in_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault('r', fn()))
    t.start()
    t.join()
    return box['r']


@needs_rt
def test_applied_to_the_calling_thread_only_and_read_back():
    main_policy = os.sched_getscheduler(0)
    got = _in_thread(lambda: (rt.apply_to_current_thread(rt.RtSettings(61, (0,)), 'loop'),
                              rt.read_thread(threading.get_native_id())))
    applied, readback = got
    assert applied.applied, applied.errors
    assert (applied.policy, applied.priority, applied.cpus) == ('SCHED_FIFO', 61, (0,))
    assert readback == ('SCHED_FIFO', 61, (0,))
    assert applied.warning == ''
    assert os.sched_getscheduler(0) == main_policy  # the test's own thread is untouched
    values = applied.values()
    assert values['rt.loop.policy'] == 'SCHED_FIFO' and values['rt.loop.priority'] == 61


FALLBACK = r"""
import json, threading
from simreal_ros.core import realtime as rt
out = []
def work(name):
    out.append(rt.apply_to_current_thread(rt.RtSettings(70), name))
for name in ('a', 'b'):
    t = threading.Thread(target=work, args=(name,)); t.start(); t.join()
print(json.dumps([[r.policy, r.priority, r.errors, r.warning] for r in out]))
"""


@needs_rt
@pytest.mark.skipif(SETPRIV is None, reason='setpriv (util-linux) not installed')
def test_without_cap_sys_nice_falls_back_with_one_warning():
    env = {**os.environ, 'PYTHONPATH': str(REPO)}
    r = subprocess.run([*DROP_NICE, sys.executable, '-c', FALLBACK], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    (a, b) = json.loads(r.stdout)
    assert a[:2] == ['SCHED_OTHER', 0] and b[:2] == ['SCHED_OTHER', 0]
    assert a[2] == ['rt_priority 70: Operation not permitted']
    assert 'limits.d' in a[3] and 'setcap cap_sys_nice' in a[3] and '--cap-add=SYS_NICE' in a[3]
    assert b[3] == ''  # one warning per process


def test_sleep_until_spins_at_most_the_bound():
    t = [0]
    sleeps = []

    def clock():
        t[0] += 1000  # every clock read advances 1 us
        return t[0]

    orig = rt.time.sleep
    rt.time.sleep = lambda s: (sleeps.append(s), t.__setitem__(0, t[0] + int(s * 1e9)))
    try:
        end = rt.sleep_until_ns(10_000_000, spin_ns=50_000_000, clock=clock)
    finally:
        rt.time.sleep = orig
    assert end >= 10_000_000
    # the 50 ms asked for is capped at MAX_SPIN_NS: the first 9 ms are slept, not spun
    assert sleeps and sleeps[0] == pytest.approx((10_000_000 - 1000 - rt.MAX_SPIN_NS) / 1e9)
    assert end - 10_000_000 < 2000


def test_heartbeat():
    t = [0]
    hb = rt.Heartbeat(100, clock=lambda: t[0])
    t[0] = 100
    assert hb.stalled_ns() == 0
    t[0] = 101
    assert hb.stalled_ns() == 101   # silent since creation: the loop never started
    hb.beat()                       # the first beat: the start-up gap is not a stall
    assert hb.stalled_ns() == 0 and hb.beats == 1 and hb.stalls == 0
    t[0] = 302
    hb.beat()                       # a gap of 201 > 100 between beats: latched, reported once
    assert hb.stalls == 1
    assert hb.stalled_ns() == 201
    assert hb.stalled_ns() == 0
    t[0] = 350
    hb.beat()
    assert hb.stalled_ns() == 0 and hb.stalls == 1
    with pytest.raises(ValueError):
        rt.Heartbeat(0)


WEDGE = r"""
import json, os, threading, time
from simreal_ros.core import realtime as rt
hb = rt.Heartbeat(200_000_000)
got = {}
def wedged():
    got['rt'] = rt.apply_to_current_thread(rt.RtSettings(80, (0,)), 'wedged')
    hb.beat()
    got['end'] = end = time.monotonic() + 3.0   # bounded: a broken throttle still ends the test
    while time.monotonic() < end:               # the bug: a loop that never beats again
        pass
os.sched_setaffinity(0, {0})  # the watcher: default scheduler, the same CPU as the wedged loop
t = threading.Thread(target=wedged, daemon=True); t.start()
while 'end' not in got:
    time.sleep(0.001)
seen = 0
while time.monotonic() < got['end'] and not seen:
    time.sleep(0.05)
    seen = hb.stalled_ns()
print(json.dumps({'policy': got['rt'].policy, 'cpus': got['rt'].cpus, 'stalled_ns': seen,
                  'seen_before_the_loop_ended': time.monotonic() < got['end']}), flush=True)
t.join()
"""


@pytest.mark.timing  # a SCHED_FIFO spinner holds CPU 0 for up to 3 s
@needs_rt
def test_wedged_fifo_loop_is_detected_while_it_spins():
    """A SCHED_FIFO thread spinning on CPU 0 without beating: its watcher (default scheduler,
    pinned to CPU 0 too, needing the GIL from the spinner) reports the stall while the loop
    still spins. Without the kernel's RT throttling (50 ms of each second left to others) the
    watcher could not run on CPU 0 before the loop ended."""
    with open('/proc/sys/kernel/sched_rt_runtime_us', encoding='ascii') as f:
        assert int(f.read()) < 1_000_000, 'RT throttling is off on this machine'
    env = {**os.environ, 'PYTHONPATH': str(REPO)}
    r = subprocess.run([sys.executable, '-c', WEDGE], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[0])
    assert (out['policy'], out['cpus']) == ('SCHED_FIFO', [0])
    assert out['stalled_ns'] > 200_000_000
    assert out['seen_before_the_loop_ended'] is True
