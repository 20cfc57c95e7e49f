"""No node calls the deprecated ``Logger.warn``.

In this rclpy, ``warn`` is a wrapper around ``warning``, so every ``warn`` call of a process
shares one caller id: after an unthrottled ``warn``, a throttled one raises ``ValueError:
Requested logging filters cannot be changed between calls`` inside the node's callback.
"""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / 'simreal_ros'


def test_no_deprecated_logger_warn():
    found = []
    for path in sorted(PACKAGE.rglob('*.py')):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == 'warn' and isinstance(node.func.value, ast.Call) \
                    and getattr(node.func.value.func, 'attr', '') == 'get_logger':
                found.append(f'{path.relative_to(PACKAGE.parent)}:{node.lineno}')
    assert not found, f'use get_logger().warning(...), not warn(...): {found}'
