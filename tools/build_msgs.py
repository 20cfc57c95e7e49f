"""Build and install message packages missing from the PyPI ROS wheels into a venv.

``tf2_msgs`` (ROS 2 geometry2: ``TFMessage``) and ``nav_msgs`` (common_interfaces:
``Odometry``) are not among the PyPI ROS wheels, but the rosidl generators
(``rosidl_generator_c``/``_py``, ``rosidl_typesupport_c``/``_introspection_c``/``_fastrtps_c``,
all dependencies of ``ros-rclpy``) and the headers and libraries of ``geometry_msgs``,
``std_msgs`` and ``builtin_interfaces`` are. For each package of :data:`PACKAGES` this script
does what ``rosidl_generate_interfaces()`` does in a colcon build, without CMake:

1. runs the generators on ``tools/interfaces/<pkg>/msg/*.msg`` (the type hash comes from the
   type description, so it is the real one, e.g. ``RIHS01_e369d0f0...`` for
   ``tf2_msgs/msg/TFMessage``: the type of a system ROS's, accepted by RViz, Foxglove and
   ``ros2 topic``);
2. compiles the C/C++ sources into the libraries an installed message package has
   (``lib<pkg>__rosidl_generator_c.so`` ... and the three Python extension modules);
3. installs them like the wheels do: libraries in ``<prefix>/lib`` (on the venv's
   ``LD_LIBRARY_PATH`` by ``ros_wheels_bootstrapper``), the Python package in site-packages, the
   interface files under ``share/<pkg>`` and the ament index markers.

It does nothing for a package that is importable already (a system ROS install, or an earlier
run: the stamp file ``<site-packages>/<pkg>/.simreal-build`` records the hash of that package's
inputs). ``make venv`` runs it after the pip install. Usage:
``python tools/build_msgs.py [PACKAGE ...] [--force]`` (no PACKAGE: all of them).
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

INTERFACES = Path(__file__).resolve().parent / 'interfaces'
SITE = Path(sysconfig.get_paths()['purelib'])
PREFIX = Path(sys.prefix)
#: package -> the message packages its messages use (their headers, libraries and .msg files
#: come from the wheels)
PACKAGES = {
    'tf2_msgs': ['geometry_msgs', 'std_msgs', 'builtin_interfaces'],
    'nav_msgs': ['geometry_msgs', 'std_msgs', 'builtin_interfaces'],
}
# Header directories (ament's isolated layout include/<pkg>/<pkg>/...; fastcdr's is plain).
RUNTIME_DEPS = ['rosidl_runtime_c', 'rosidl_runtime_cpp', 'rosidl_typesupport_interface',
                'rcutils', 'rcpputils', 'rosidl_typesupport_c',
                'rosidl_typesupport_introspection_c', 'rosidl_typesupport_fastrtps_c',
                'rosidl_typesupport_fastrtps_cpp', 'rmw', 'rosidl_dynamic_typesupport']


def messages(package: str) -> list[Path]:
    """Return the package's ``.msg`` files, sorted."""
    return sorted((INTERFACES / package / 'msg').glob('*.msg'))


def inputs_hash(package: str) -> str:
    """Hash of what a package's build depends on: its interfaces, this script, its deps."""
    h = hashlib.sha256()
    for path in sorted((INTERFACES / package).rglob('*')) + [Path(__file__).resolve()]:
        if path.is_file():
            h.update(path.read_bytes())
    for pkg in PACKAGES[package]:
        h.update((PREFIX / 'share' / pkg / 'package.xml').read_bytes())
    return h.hexdigest()


def generate(package: str, out: Path) -> None:
    """Run the five generators; each writes to ``out/<generator>/<package>``."""
    from rosidl_generator_c.cli import GenerateC
    from rosidl_generator_py.cli import GeneratePython
    from rosidl_typesupport_c.cli import GenerateCTypesupport
    from rosidl_typesupport_fastrtps_c.cli import GenerateFastRTPSCTypesupport
    from rosidl_typesupport_introspection_c.cli import GenerateIntrospectionCTypesupport
    here = INTERFACES / package
    files = [f'{here}:msg/{m.name}' for m in messages(package)]
    include = [str(PREFIX / 'share')]
    for name, cls in [('c', GenerateC), ('py', GeneratePython), ('ts_c', GenerateCTypesupport),
                      ('introspection_c', GenerateIntrospectionCTypesupport),
                      ('fastrtps_c', GenerateFastRTPSCTypesupport)]:
        cls(name).generate(package, files, include, output_path=out / name / package)


def compile_all(package: str, gen: Path, lib: Path, ext: Path) -> None:
    """Compile the generated sources into the package's libraries and extension modules."""
    import numpy
    msg_pkgs = PACKAGES[package]
    inc = [f'-I{gen / d}' for d in ('c', 'introspection_c', 'fastrtps_c')]
    inc += [f'-I{PREFIX / "include" / d}' for d in RUNTIME_DEPS + msg_pkgs]
    inc += [f'-I{PREFIX / "include"}']
    inc += [f'-I{sysconfig.get_paths()["include"]}', f'-I{numpy.get_include()}']
    link = [f'-L{PREFIX / "lib"}', f'-L{lib}', '-Wl,-rpath,$ORIGIN']
    pre = f'{package}__rosidl'
    dep_libs = [f'-l{p}__rosidl_generator_c' for p in msg_pkgs] + ['-lrosidl_runtime_c',
                                                                 '-lrcutils']
    c, py = gen / 'c' / package / 'msg', gen / 'py' / package
    intro = gen / 'introspection_c' / package / 'msg' / 'detail'
    fast = gen / 'fastrtps_c' / package / 'msg' / 'detail'
    ts_c = gen / 'ts_c' / package / 'msg'
    # (output, sources, extra flags); each stage links only against earlier ones.
    stages = [
        [(lib / f'lib{pre}_generator_c.so', sorted((c / 'detail').glob('*.c')), dep_libs)],
        [(lib / f'lib{pre}_typesupport_introspection_c.so',
          sorted(intro.glob('*__type_support.c')),
          [f'-l{pre}_generator_c', '-lrosidl_typesupport_introspection_c',
           *(f'-l{p}__rosidl_typesupport_introspection_c' for p in msg_pkgs)]),
         (lib / f'lib{pre}_typesupport_fastrtps_c.so',
          sorted(fast.glob('*__type_support_c.cpp')),
          [f'-l{pre}_generator_c', '-lrosidl_typesupport_fastrtps_c',
           '-lrosidl_typesupport_fastrtps_cpp', '-lfastcdr', '-lrmw',
           *(f'-l{p}__rosidl_typesupport_fastrtps_c' for p in msg_pkgs)]),
         (lib / f'lib{pre}_typesupport_c.so', sorted(ts_c.glob('*__type_support.cpp')),
          [f'-l{pre}_generator_c', '-lrosidl_typesupport_c', '-lrcpputils', '-lrcutils']),
         (lib / f'lib{pre}_generator_py.so', sorted((py / 'msg').glob('_*_s.c')),
          [f'-l{pre}_generator_c',
           *(f'-l{p}__rosidl_generator_py' for p in msg_pkgs), *dep_libs])],
        [(ext / f'{package}_s__rosidl_typesupport_{ts}.so',
          [py / f'_{package}_s.ep.rosidl_typesupport_{ts}.c'],
          [f'-l{pre}_generator_py', f'-l{pre}_typesupport_{ts}', f'-l{pre}_generator_c'])
         for ts in ('c', 'introspection_c', 'fastrtps_c')],
    ]

    def build(job: tuple[Path, list[Path], list[str]]) -> None:
        out, sources, libs = job
        if not sources:
            raise RuntimeError(f'{package}: the generators wrote no sources for {out.name}')
        cxx = any(s.suffix == '.cpp' for s in sources)
        cmd = ['c++' if cxx else 'cc', '-shared', '-fPIC', '-O2', '-w',
               *(['-std=c++17'] if cxx else []), *inc, *map(str, sources), '-o', str(out),
               *link, *libs]
        subprocess.run(cmd, check=True)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        for stage in stages:
            list(pool.map(build, stage))


def install(package: str, gen: Path, lib_dir: Path) -> None:
    """Copy the Python package, libraries, interface files and ament index markers."""
    pkg = SITE / package
    shutil.rmtree(pkg, ignore_errors=True)
    (pkg / 'msg').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    for f in (gen / 'py' / package / 'msg').glob('*.py'):
        shutil.copy2(f, pkg / 'msg' / f.name)
    for so in lib_dir.glob(f'{package}_s__*.so'):
        shutil.move(str(so), pkg / so.name)
    for so in lib_dir.glob('lib*.so'):
        shutil.copy2(so, PREFIX / 'lib' / so.name)
    share = PREFIX / 'share' / package
    (share / 'msg').mkdir(parents=True, exist_ok=True)
    shutil.copy2(INTERFACES / package / 'package.xml', share / 'package.xml')
    listed = []
    for msg in messages(package):
        shutil.copy2(msg, share / 'msg' / msg.name)
        idl = gen / 'c' / package / 'tmp' / 'msg' / f'{msg.stem}.idl'
        shutil.copy2(idl, share / 'msg' / idl.name)
        shutil.copy2(gen / 'c' / package / 'msg' / f'{msg.stem}.json',
                     share / 'msg' / f'{msg.stem}.json')
        listed += [f'msg/{msg.stem}.idl', f'msg/{msg.name}']
    index = PREFIX / 'share/ament_index/resource_index'
    markers = {'packages': '', 'rosidl_interfaces': ''.join(f'{x}\n' for x in listed),
               'rosidl_generator_packages': '', 'rosidl_runtime_packages': '',
               'rosidl_typesupport_c': ''}
    for kind, text in markers.items():
        (index / kind).mkdir(parents=True, exist_ok=True)
        (index / kind / package).write_text(text)


def build_package(package: str, force: bool) -> None:
    """Build and install ``package`` unless an up-to-date or a system one is importable."""
    digest = inputs_hash(package)
    stamp = SITE / package / '.simreal-build'
    spec = importlib.util.find_spec(package)
    if spec is not None and not force:
        if not stamp.exists():
            print(f'{package}: using the installed one at {spec.origin}')
            return
        if stamp.read_text() == digest:
            return
    with tempfile.TemporaryDirectory(prefix=f'{package}-') as tmp:
        gen, lib = Path(tmp) / 'gen', Path(tmp) / 'lib'
        lib.mkdir()
        generate(package, gen)
        compile_all(package, gen, lib, lib)
        install(package, gen, lib)
    stamp.write_text(digest)
    print(f'{package}: built and installed into {PREFIX}')


def main() -> int:
    """Build the packages named (default: all) that are missing or out of date."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('packages', nargs='*', metavar='PACKAGE',
                        help=f'one of {", ".join(PACKAGES)} (default: all)')
    parser.add_argument('--force', action='store_true', help='rebuild even if up to date')
    args = parser.parse_args()
    unknown = [p for p in args.packages if p not in PACKAGES]
    if unknown:
        parser.error(f'unknown package {unknown[0]!r}: expected one of {", ".join(PACKAGES)}')
    os.environ.setdefault('AMENT_PREFIX_PATH', str(PREFIX))
    for package in args.packages or list(PACKAGES):
        build_package(package, args.force)
    return 0


if __name__ == '__main__':
    sys.exit(main())
