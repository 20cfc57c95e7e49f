"""Write small robots for tests: a 2-DoF arm as a ROS description package with STL meshes.

``write_description_package(root)`` makes ``root/my_arm_description/`` the way a robot vendor
ships one (``package.xml``, ``meshes/*.stl``, ``urdf/my_arm.urdf`` naming its meshes
``package://my_arm_description/meshes/...``); ``write_spec`` writes the robot spec beside it;
``write_mjcf`` writes the same arm as MJCF.
"""

from __future__ import annotations

from pathlib import Path
import struct
from typing import Any

import yaml

PACKAGE = 'my_arm_description'
JOINTS = ('shoulder', 'elbow')


def box_stl(half: tuple[float, float, float]) -> bytes:
    """Return a binary STL of a box with half-extents ``half`` centred at the origin."""
    hx, hy, hz = half
    v = [(x, y, z) for x in (-hx, hx) for y in (-hy, hy) for z in (-hz, hz)]
    # two triangles per face, counter-clockwise seen from outside
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    tris = []
    for a, b, c, d in faces:
        tris += [(v[a], v[b], v[c]), (v[a], v[c], v[d])]
    out = bytearray(b'simreal test box'.ljust(80, b' '))
    out += struct.pack('<I', len(tris))
    for tri in tris:
        out += struct.pack('<3f', 0.0, 0.0, 0.0)
        for p in tri:
            out += struct.pack('<3f', *p)
        out += struct.pack('<H', 0)
    return bytes(out)


def urdf_text(mesh: str = 'package://my_arm_description/meshes/{link}.stl',
              mass: float = 0.3) -> str:
    """The 2-DoF arm's URDF; ``mesh`` is the filename pattern of each link's mesh."""
    links = []
    for link, length in (('l1', 0.12), ('l2', 0.10)):
        m = mesh.format(link=link)
        links.append(f"""
  <link name="{link}">
    <inertial>
      <origin xyz="0 0 {length / 2}"/>
      <mass value="{mass}"/>
      <inertia ixx="4e-4" iyy="4e-4" izz="5e-5" ixy="0" ixz="0" iyz="0"/>
    </inertial>
    <visual><origin xyz="0 0 {length / 2}"/><geometry><mesh filename="{m}"/></geometry>
    </visual>
    <collision><origin xyz="0 0 {length / 2}"/><geometry><mesh filename="{m}"/></geometry>
    </collision>
  </link>""")
    return f"""<?xml version="1.0"?>
<robot name="my_arm">
  <link name="base_link">
    <inertial><mass value="1.0"/>
      <inertia ixx="1e-3" iyy="1e-3" izz="1e-3" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  {links[0]}
  {links[1]}
  <link name="tool0"/>
  <joint name="shoulder" type="revolute">
    <parent link="base_link"/><child link="l1"/><origin xyz="0 0 0.05"/>
    <axis xyz="0 1 0"/><limit lower="-1.6" upper="1.6" velocity="5.0" effort="3.0"/>
    <dynamics damping="0.05" friction="0.01"/>
  </joint>
  <joint name="elbow" type="revolute">
    <parent link="l1"/><child link="l2"/><origin xyz="0 0 0.12"/>
    <axis xyz="0 1 0"/><limit lower="-2.0" upper="2.0" velocity="5.0" effort="3.0"/>
    <dynamics damping="0.05" friction="0.01"/>
  </joint>
  <joint name="tool_joint" type="fixed">
    <parent link="l2"/><child link="tool0"/><origin xyz="0 0 0.10"/>
  </joint>
</robot>
"""


def write_description_package(root: Path, urdf: str | None = None) -> Path:
    """Write ``root/my_arm_description`` (package.xml, meshes, URDF); return the URDF path."""
    pkg = root / PACKAGE
    (pkg / 'meshes').mkdir(parents=True, exist_ok=True)
    (pkg / 'urdf').mkdir(exist_ok=True)
    (pkg / 'package.xml').write_text(
        f'<?xml version="1.0"?>\n<package format="3"><name>{PACKAGE}</name>'
        '<version>0.1.0</version><description>test arm</description>'
        '<maintainer email="a@b.c">a</maintainer><license>MIT</license></package>\n',
        encoding='utf-8')
    (pkg / 'meshes' / 'l1.stl').write_bytes(box_stl((0.02, 0.02, 0.06)))
    (pkg / 'meshes' / 'l2.stl').write_bytes(box_stl((0.015, 0.015, 0.05)))
    path = pkg / 'urdf' / 'my_arm.urdf'
    path.write_text(urdf if urdf is not None else urdf_text(), encoding='utf-8')
    return path


def spec_data(model: str, **overrides: Any) -> dict[str, Any]:
    """The 2-DoF arm's robot spec as plain data (``model:`` = ``model``)."""
    data: dict[str, Any] = {
        'robot': 'my_arm',
        'model': model,
        'base_frame': 'base_link',
        'tool_frame': 'tool0',
        'bus': {'family': 'dynamixel', 'baud': 1000000},
        'servo_defaults': {'model': 'XL430-W250', 'model_number': 1060, 'ticks_per_rev': 4096,
                           'zero_tick': 2048, 'torque_per_amp': 1.0},
        'joints': [
            {'name': 'shoulder', 'servo_id': 1, 'home': 0.3, 'gains': {'kp': 8.0, 'kd': 0.2},
             'armature': 0.005,
             'limits': {'lower': -1.5, 'upper': 1.5, 'velocity': 4.0, 'effort': 1.4}},
            {'name': 'elbow', 'servo_id': 2, 'home': 0.6, 'gains': {'kp': 6.0, 'kd': 0.15},
             'armature': 0.005,
             'limits': {'lower': -1.9, 'upper': 1.9, 'velocity': 4.0, 'effort': 1.4}},
        ],
    }
    data.update(overrides)
    return data


def write_spec(path: Path, data: dict[str, Any]) -> Path:
    """Write a robot spec file; return its path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding='utf-8')
    return path


def mjcf_text(mesh_dir: str = '') -> str:
    """The 2-DoF arm as MJCF (ranges in degrees, MuJoCo's default); meshes if ``mesh_dir``."""
    if mesh_dir:
        assets = (f'<asset><mesh name="l1" file="{mesh_dir}/l1.stl"/>'
                  f'<mesh name="l2" file="{mesh_dir}/l2.stl"/></asset>')
        g1 = '<geom type="mesh" mesh="l1" pos="0 0 0.06"/>'
        g2 = '<geom type="mesh" mesh="l2" pos="0 0 0.05"/>'
    else:
        assets = ''
        g1 = '<geom type="box" size="0.02 0.02 0.06" pos="0 0 0.06"/>'
        g2 = '<geom type="box" size="0.015 0.015 0.05" pos="0 0 0.05"/>'
    return f"""<mujoco model="my_arm">
  {assets}
  <worldbody>
    <body name="base_link">
      <inertial pos="0 0 0" mass="1.0" diaginertia="1e-3 1e-3 1e-3"/>
      <body name="l1" pos="0 0 0.05">
        <joint name="shoulder" type="hinge" axis="0 1 0" range="-91.7 91.7" damping="0.05"/>
        <inertial pos="0 0 0.06" mass="0.3" diaginertia="4e-4 4e-4 5e-5"/>
        {g1}
        <body name="l2" pos="0 0 0.12">
          <joint name="elbow" type="hinge" axis="0 1 0" range="-114.6 114.6" damping="0.05"/>
          <inertial pos="0 0 0.05" mass="0.3" diaginertia="4e-4 4e-4 5e-5"/>
          {g2}
          <body name="tool0" pos="0 0 0.10"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>
"""
