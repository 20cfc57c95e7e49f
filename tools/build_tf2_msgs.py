"""Build and install ``tf2_msgs`` (TFMessage only) into a venv that has the PyPI ROS wheels.

``tf2_msgs`` (ROS 2 geometry2) is not among the PyPI ROS wheels, but the rosidl generators
(``rosidl_generator_c``/``_py``, ``rosidl_typesupport_c``/``_introspection_c``/``_fastrtps_c``,
all dependencies of ``ros-rclpy``) and the headers and libraries of ``geometry_msgs`` are. This
script does what ``rosidl_generate_interfaces()`` does in a colcon build, without CMake:

1. runs the generators on ``tools/interfaces/tf2_msgs/msg/TFMessage.msg`` (the type hash comes
   from the type description, so it is the real ``RIHS01_e369d0f0...``: the type of a system
   ROS's ``tf2_msgs/msg/TFMessage``, accepted by RViz, Foxglove and ``ros2 topic``);
2. compiles the C/C++ sources into the libraries an installed message package has
   (``libtf2_msgs__rosidl_generator_c.so`` ... and the three Python extension modules);
3. installs them like the wheels do: libraries in ``<prefix>/lib`` (on the venv's
   ``LD_LIBRARY_PATH`` by ``ros_wheels_bootstrapper``), the Python package in site-packages, the
   interface files under ``share/tf2_msgs`` and the ament index markers.

It does nothing where an importable ``tf2_msgs`` exists already (a system ROS install, or an
earlier run: the stamp file records the hash of the inputs). ``make venv`` runs it after the pip
install. Usage: ``python tools/build_tf2_msgs.py [--force]``.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor
import hashlib
import importlib.util
import os
from pathlib import Path
import shutil
import subprocess
import sys
import sysconfig
import tempfile

PACKAGE = 'tf2_msgs'
HERE = Path(__file__).resolve().parent / 'interfaces' / PACKAGE
SITE = Path(sysconfig.get_paths()['purelib'])
PREFIX = Path(sys.prefix)
STAMP = SITE / PACKAGE / '.simreal-build'
# Header directories (ament's isolated layout include/<pkg>/<pkg>/...; fastcdr's is plain).
DEPS = ['rosidl_runtime_c', 'rosidl_runtime_cpp', 'rosidl_typesupport_interface', 'rcutils',
        'rcpputils', 'rosidl_typesupport_c', 'rosidl_typesupport_introspection_c',
        'rosidl_typesupport_fastrtps_c', 'rosidl_typesupport_fastrtps_cpp', 'rmw',
        'rosidl_dynamic_typesupport', 'geometry_msgs', 'std_msgs', 'builtin_interfaces']
MSG_PKGS = ['geometry_msgs', 'std_msgs', 'builtin_interfaces']


def inputs_hash() -> str:
    """Hash of what the build depends on: the interface, this script, the dependencies."""
    h = hashlib.sha256()
    for path in sorted(HERE.rglob('*')) + [Path(__file__).resolve()]:
        if path.is_file():
            h.update(path.read_bytes())
    for pkg in MSG_PKGS:
        h.update((PREFIX / 'share' / pkg / 'package.xml').read_bytes())
    return h.hexdigest()


def generate(out: Path) -> None:
    """Run the five generators; each writes to ``out/<generator>/tf2_msgs``."""
    from rosidl_generator_c.cli import GenerateC
    from rosidl_generator_py.cli import GeneratePython
    from rosidl_typesupport_c.cli import GenerateCTypesupport
    from rosidl_typesupport_fastrtps_c.cli import GenerateFastRTPSCTypesupport
    from rosidl_typesupport_introspection_c.cli import GenerateIntrospectionCTypesupport
    files = [f'{HERE}:msg/TFMessage.msg']
    include = [str(PREFIX / 'share')]
    for name, cls in [('c', GenerateC), ('py', GeneratePython), ('ts_c', GenerateCTypesupport),
                      ('introspection_c', GenerateIntrospectionCTypesupport),
                      ('fastrtps_c', GenerateFastRTPSCTypesupport)]:
        cls(name).generate(PACKAGE, files, include, output_path=out / name / PACKAGE)


def compile_all(gen: Path, lib: Path, ext: Path) -> None:
    """Compile the generated sources into the package's libraries and extension modules."""
    import numpy
    inc = [f'-I{gen / d}' for d in ('c', 'introspection_c', 'fastrtps_c')]
    inc += [f'-I{PREFIX / "include" / d}' for d in DEPS] + [f'-I{PREFIX / "include"}']
    inc += [f'-I{sysconfig.get_paths()["include"]}', f'-I{numpy.get_include()}']
    link = [f'-L{PREFIX / "lib"}', f'-L{lib}', '-Wl,-rpath,$ORIGIN']
    pre = f'{PACKAGE}__rosidl'
    dep_libs = [f'-l{p}__rosidl_generator_c' for p in MSG_PKGS] + ['-lrosidl_runtime_c',
                                                                 '-lrcutils']
    c, py = gen / 'c' / PACKAGE / 'msg', gen / 'py' / PACKAGE
    # (output, sources, extra flags); each stage links only against earlier ones.
    stages = [
        [(lib / f'lib{pre}_generator_c.so', sorted((c / 'detail').glob('*.c')), dep_libs)],
        [(lib / f'lib{pre}_typesupport_introspection_c.so',
          [gen / 'introspection_c' / PACKAGE / 'msg/detail/tf_message__type_support.c'],
          [f'-l{pre}_generator_c', '-lrosidl_typesupport_introspection_c',
           *(f'-l{p}__rosidl_typesupport_introspection_c' for p in MSG_PKGS)]),
         (lib / f'lib{pre}_typesupport_fastrtps_c.so',
          [gen / 'fastrtps_c' / PACKAGE / 'msg/detail/tf_message__type_support_c.cpp'],
          [f'-l{pre}_generator_c', '-lrosidl_typesupport_fastrtps_c',
           '-lrosidl_typesupport_fastrtps_cpp', '-lfastcdr', '-lrmw',
           *(f'-l{p}__rosidl_typesupport_fastrtps_c' for p in MSG_PKGS)]),
         (lib / f'lib{pre}_typesupport_c.so',
          [gen / 'ts_c' / PACKAGE / 'msg/tf_message__type_support.cpp'],
          [f'-l{pre}_generator_c', '-lrosidl_typesupport_c', '-lrcpputils', '-lrcutils']),
         (lib / f'lib{pre}_generator_py.so', [py / 'msg/_tf_message_s.c'],
          [f'-l{pre}_generator_c', '-lgeometry_msgs__rosidl_generator_py', *dep_libs])],
        [(ext / f'{PACKAGE}_s__rosidl_typesupport_{ts}.so',
          [py / f'_{PACKAGE}_s.ep.rosidl_typesupport_{ts}.c'],
          [f'-l{pre}_generator_py', f'-l{pre}_typesupport_{ts}', f'-l{pre}_generator_c'])
         for ts in ('c', 'introspection_c', 'fastrtps_c')],
    ]

    def build(job: tuple[Path, list[Path], list[str]]) -> None:
        out, sources, libs = job
        cxx = any(s.suffix == '.cpp' for s in sources)
        cmd = ['c++' if cxx else 'cc', '-shared', '-fPIC', '-O2', '-w',
               *(['-std=c++17'] if cxx else []), *inc, *map(str, sources), '-o', str(out),
               *link, *libs]
        subprocess.run(cmd, check=True)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for stage in stages:
            list(pool.map(build, stage))


def install(gen: Path, lib_dir: Path) -> None:
    """Copy the Python package, libraries, interface files and ament index markers."""
    pkg = SITE / PACKAGE
    shutil.rmtree(pkg, ignore_errors=True)
    (pkg / 'msg').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    for f in ('msg/__init__.py', 'msg/_tf_message.py'):
        shutil.copy2(gen / 'py' / PACKAGE / f, pkg / f)
    for so in lib_dir.glob(f'{PACKAGE}_s__*.so'):
        shutil.move(str(so), pkg / so.name)
    for so in lib_dir.glob('lib*.so'):
        shutil.copy2(so, PREFIX / 'lib' / so.name)
    share = PREFIX / 'share' / PACKAGE
    (share / 'msg').mkdir(parents=True, exist_ok=True)
    shutil.copy2(HERE / 'package.xml', share / 'package.xml')
    shutil.copy2(HERE / 'msg/TFMessage.msg', share / 'msg/TFMessage.msg')
    shutil.copy2(gen / 'c' / PACKAGE / 'tmp/msg/TFMessage.idl', share / 'msg/TFMessage.idl')
    shutil.copy2(gen / 'c' / PACKAGE / 'msg/TFMessage.json', share / 'msg/TFMessage.json')
    index = PREFIX / 'share/ament_index/resource_index'
    markers = {'packages': '', 'rosidl_interfaces': 'msg/TFMessage.idl\nmsg/TFMessage.msg\n',
               'rosidl_generator_packages': '', 'rosidl_runtime_packages': '',
               'rosidl_typesupport_c': ''}
    for kind, text in markers.items():
        (index / kind).mkdir(parents=True, exist_ok=True)
        (index / kind / PACKAGE).write_text(text)


def main() -> int:
    """Build and install unless an up-to-date or a system ``tf2_msgs`` is importable."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--force', action='store_true', help='rebuild even if up to date')
    args = parser.parse_args()
    digest = inputs_hash()
    spec = importlib.util.find_spec(PACKAGE)
    if spec is not None and not args.force:
        if not STAMP.exists():
            print(f'{PACKAGE}: using the installed one at {spec.origin}')
            return 0
        if STAMP.read_text() == digest:
            return 0
    os.environ.setdefault('AMENT_PREFIX_PATH', str(PREFIX))
    with tempfile.TemporaryDirectory(prefix='tf2_msgs-') as tmp:
        gen, lib = Path(tmp) / 'gen', Path(tmp) / 'lib'
        lib.mkdir()
        generate(gen)
        compile_all(gen, lib, lib)
        install(gen, lib)
    STAMP.write_text(digest)
    print(f'{PACKAGE}: built and installed into {PREFIX}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
