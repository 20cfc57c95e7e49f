"""Install simreal_ros with pip (``pip install -e '.[ros,test,pybullet]'``) or colcon.

colcon builds it as an ament_python package.
"""

from glob import glob
import importlib.util
import os
import sys

from setuptools import find_packages, setup

PACKAGE = 'simreal_ros'


def node_registry():
    """Load ``simreal_ros/bringup/registry.py`` by path (the package need not be importable)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), PACKAGE, 'bringup',
                        'registry.py')
    spec = importlib.util.spec_from_file_location('_simreal_node_registry', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining classes
    spec.loader.exec_module(module)
    return module


def tree(directory: str) -> list[tuple[str, list[str]]]:
    """Map every file below ``directory`` to ``share/simreal_ros/<same path>``."""
    out = []
    for root, _dirs, files in os.walk(directory):
        paths = [os.path.join(root, f) for f in files if not f.endswith('.pyc')]
        if paths:
            out.append((os.path.join('share', PACKAGE, root), paths))
    return out


ROS_MESSAGES = ['std-msgs', 'std-srvs', 'sensor-msgs', 'geometry-msgs', 'trajectory-msgs',
                'diagnostic-msgs', 'rosgraph-msgs', 'builtin-interfaces']


def ros_wheels(distro: str) -> list[str]:
    """Return the PyPI wheels of one ROS 2 distribution (``ros-<distro>-*`` pins its versions).

    Left out of install_requires, so a system (apt) ROS install builds with colcon unchanged.
    """
    return [f'ros-{distro}-{name}' for name in ['rclpy', 'rmw-fastrtps-cpp', *ROS_MESSAGES]]


setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*', 'bench', 'bench.*']),
    package_data={PACKAGE: ['py.typed']},
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + PACKAGE]),
        (os.path.join('share', PACKAGE), ['package.xml']),
        (os.path.join('share', PACKAGE, 'launch'), glob('launch/*.py')),
        *tree('config'),
        *tree('urdf'),
        *tree('bench'),
    ],
    python_requires='>=3.10',
    install_requires=['setuptools', 'numpy>=1.24', 'pyyaml>=6', 'mujoco[sysid]>=3.2',
                      'rosbags>=0.11,<0.12', 'zstandard', 'matplotlib>=3.7',
                      'opencv-python-headless>=4.8', 'torch==2.13.0', 'onnxruntime',
                      'dynamixel-sdk>=3.7', 'feetech-servo-sdk>=1.0',
                      'transforms3d>=0.4'],
    extras_require={
        'ros': ros_wheels('kilted'),  # the default: the distribution the project is developed on
        'ros-kilted': ros_wheels('kilted'),
        'ros-jazzy': ros_wheels('jazzy'),  # the LTS (May 2029); see docs/ros_distributions.md
        # the second physics engine (engine:=pybullet); a 103 MB manylinux wheel, no compiling
        'pybullet': ['pybullet>=3.2.6'],
        # simreal export --format lerobot (parquet files)
        'lerobot': ['pyarrow>=14', 'pandas>=2'],
        # simreal sweep: the Parquet table, and --ray (the loopback-only local instance is
        # measured on Ray 2.58, see docs/sweeps.md)
        'sweep': ['pyarrow>=14', 'ray>=2.58'],
        # pytest-xdist: make test's two workers (TEST_WORKERS, docs/testing.md)
        'test': ['pytest>=7', 'pytest-xdist>=3.5', 'hypothesis>=6', 'scipy>=1.10',
                 'yourdfpy>=0.0.56', 'colcon-core', 'colcon-ros', 'ruff', 'mypy', 'types-PyYAML',
                 'onnx', 'mcap>=1.1', 'mcap-ros2-support>=0.5', 'pyarrow>=14', 'pandas>=2',
                 'ray>=2.58', 'filelock>=3'],
    },
    zip_safe=True,
    maintainer='simreal_ros maintainers',
    maintainer_email='maintainers@simreal-ros.dev',
    description='MuJoCo sim bridge, real drivers and sim-to-real gap tools over identical '
                'ROS 2 topics.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': node_registry().console_scripts(),  # one entry per node kind
    },
)
