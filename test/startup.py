"""What a node or a command that refuses to start must print: one ``error:`` line, no traceback.

A node exits 1, the ``simreal`` command 2.
"""

from __future__ import annotations

import subprocess

from simreal_ros.bringup.launcher import NodeProcess


class StartUpError(AssertionError):
    """A node's refused start-up did not look like the one-line reason users are promised."""


def start_up_error(p: NodeProcess, timeout: float = 30.0) -> str:
    """Wait for ``p`` to exit; return its one ``error:`` line (without the prefix).

    Raises StartUpError unless the exit code is 1, exactly one line starts with ``error: ``
    and no Python traceback was printed.
    """
    code = p.wait(timeout)
    out = p.output()
    errors = [line for line in out.splitlines() if line.startswith('error: ')]
    if code != 1 or len(errors) != 1 or 'Traceback (most recent call last)' in out:
        raise StartUpError(f'expected exit 1 with one error: line and no traceback; got exit '
                           f'{code} with {len(errors)} error: lines:\n{out}')
    return errors[0][len('error: '):]


def cli_error_line(r: subprocess.CompletedProcess, code: int = 2) -> str:
    """Return the one line of ``simreal``'s stderr that holds ``error:``.

    Raises StartUpError unless the exit code is ``code``, exactly one line of stderr holds
    ``error:`` and no Python traceback was printed (argparse's usage lines may come first).
    """
    errors = [line for line in r.stderr.splitlines() if 'error:' in line]
    if (r.returncode != code or len(errors) != 1
            or 'Traceback (most recent call last)' in r.stdout + r.stderr):
        raise StartUpError(f'expected exit {code} with one error: line and no traceback; got '
                           f'exit {r.returncode} with {len(errors)} error: lines:\n'
                           f'{r.stdout}{r.stderr}')
    return errors[0]
