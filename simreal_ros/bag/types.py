"""The message type registry: rosbags typestore plus the installed ROS packages' definitions."""

from __future__ import annotations

import os
from pathlib import Path
import re
from typing import Any, cast

from rosbags.interfaces import Nodetype
from rosbags.typesys import Stores, get_types_from_idl, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from simreal_ros.errors import BagError


class TypeRegistry:
    """Message definitions and type hashes for any ROS 2 type.

    Types known to rosbags' Kilted store are used directly; others are read from the ``.msg``
    (or ``.idl``) files of the installed ROS packages (``AMENT_PREFIX_PATH``).
    """

    def __init__(self) -> None:
        self.store: Typestore = get_typestore(Stores.ROS2_KILTED)

    def _share_dirs(self) -> list[Path]:
        prefixes = [p for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]
        return [Path(p) / 'share' for p in prefixes]

    def _register_from_share(self, msgtype: str, depth: int = 0) -> None:
        if depth > 32:
            raise BagError(f'message type {msgtype!r}: definitions nest too deeply')
        pkg, _, name = msgtype.partition('/msg/')
        for share in self._share_dirs():
            msg_file = share / pkg / 'msg' / f'{name}.msg'
            idl_file = share / pkg / 'msg' / f'{name}.idl'
            if msg_file.is_file():
                types = get_types_from_msg(msg_file.read_text(encoding='utf-8'), msgtype)
            elif idl_file.is_file():
                types = get_types_from_idl(idl_file.read_text(encoding='utf-8'))
            else:
                continue
            self.store.register(types)
            for _, fields in types.values():
                for _fname, ftype in cast('list[tuple[str, Any]]', fields):
                    for dep in _nested_type_names(ftype):
                        if dep not in self.store.fielddefs:
                            self._register_from_share(dep, depth + 1)
            return
        raise BagError(f'unknown message type {msgtype!r}: it is neither a standard ROS 2 '
                       f'type nor found as <prefix>/share/{pkg}/msg/{name}.msg under '
                       f'AMENT_PREFIX_PATH; source the workspace that defines it')

    def ensure(self, msgtype: str) -> None:
        """Make ``msgtype`` (``pkg/msg/Name``) known; BagError naming it when impossible."""
        if not re.fullmatch(r'[A-Za-z_][\w]*/msg/[A-Za-z_]\w*', msgtype):
            raise BagError(f'message type {msgtype!r} is not of the form pkg/msg/Name')
        if msgtype not in self.store.fielddefs:
            self._register_from_share(msgtype)

    def definition(self, msgtype: str) -> tuple[str, str]:
        """Return (concatenated .msg definition, RIHS01 hash) of ``msgtype``."""
        self.ensure(msgtype)
        msgdef, _ = self.store.generate_msgdef(msgtype, ros_version=2)
        return msgdef, self.store.hash_rihs01(msgtype)

    def deserialize(self, data: bytes | memoryview, msgtype: str) -> Any:
        """Deserialize CDR bytes of ``msgtype`` into a rosbags message object."""
        self.ensure(msgtype)
        return self.store.deserialize_cdr(data, msgtype)

    def serialize(self, msg: Any, msgtype: str) -> bytes:
        """Serialize a rosbags message object to CDR bytes."""
        self.ensure(msgtype)
        return bytes(self.store.serialize_cdr(msg, msgtype))


def _nested_type_names(ftype: Any) -> list[str]:
    """Names of message types referenced by a rosbags field definition."""
    kind, payload = ftype
    if kind == Nodetype.NAME:
        return [str(payload)]
    if kind in (Nodetype.ARRAY, Nodetype.SEQUENCE):
        return _nested_type_names(payload[0])
    return []
