"""What a node that refuses to start must print: one ``error:`` line, no traceback, exit 1."""

from __future__ import annotations

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
