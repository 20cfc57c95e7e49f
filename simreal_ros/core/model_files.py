"""Robot model files: which format a model is, and where the files it names are.

A robot spec's ``model:`` names a **URDF** or an **MJCF** file. The format is the file's
extension (``.urdf``; ``.mjcf``) or, for ``.xml``, its root element (``<robot>`` is URDF,
``<mujoco>`` is MJCF). A ``.xacro`` is refused: run ``xacro`` first and name its output.

A URDF's ``<mesh filename="...">`` (and every other file URI in a model) resolves as ROS tools
resolve it:

1. ``package://PKG/rest``: ``DIR/PKG/rest`` for the first ``DIR`` of ``SIMREAL_MODEL_PATH``
   (directories holding package folders, separated by ``:``) that has a ``PKG`` folder; else
   ``PREFIX/share/PKG/rest`` for the first ``PREFIX`` of ``AMENT_PREFIX_PATH`` whose ament
   index lists ``PKG`` (``share/ament_index/resource_index/packages/PKG``, what
   ``colcon build`` and ``apt install ros-*-description`` install);
2. ``file:///abs/path``: that path;
3. anything else: an absolute path, or a path relative to the directory of the model file.

The resolved URDF (:func:`resolved_urdf`) is the model with each mesh filename replaced by its
absolute path, which both engines load: MuJoCo reads ``package:/...`` as a plain relative path
(measured: ``Error opening file 'package:/my_arm_description/meshes/l1.stl'``) and PyBullet
drops ``package://`` and looks beside the URDF only.
"""

from __future__ import annotations

from dataclasses import dataclass
import os
from pathlib import Path
from xml.etree import ElementTree

MODEL_PATH_ENV = 'SIMREAL_MODEL_PATH'
MODEL_FORMATS = ('urdf', 'mjcf')
#: mesh formats MuJoCo loads (it rejects COLLADA ``.dae``, which many URDFs use for visuals)
MUJOCO_MESH_SUFFIXES = ('.stl', '.obj', '.msh')


class ModelFileError(ValueError):
    """A model file or a file it names cannot be used; the message says how to fix it."""


@dataclass(frozen=True)
class MeshRef:
    """One mesh a model names: where (link or body), the URI as written, the resolved path."""

    owner: str
    uri: str
    path: Path | None  # None: not found (``why`` says where it was looked for)
    why: str = ''


def model_format(path: Path) -> str:
    """Return ``'urdf'`` or ``'mjcf'`` for a model file; ModelFileError when neither."""
    suffix = path.suffix.lower()
    if suffix == '.urdf':
        return 'urdf'
    if suffix == '.mjcf':
        return 'mjcf'
    if suffix == '.xacro':
        raise ModelFileError('a xacro file is a template: run `xacro FILE.urdf.xacro -o '
                             'FILE.urdf` and name the .urdf')
    try:
        root = ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise ModelFileError(f'not a readable XML model ({exc})') from None
    if root.tag == 'robot':
        return 'urdf'
    if root.tag == 'mujoco':
        return 'mjcf'
    raise ModelFileError(f'the root element is <{root.tag}>: a model is a URDF (<robot>) or an '
                         'MJCF (<mujoco>) file')


def _ament_prefixes() -> list[Path]:
    return [Path(p) for p in os.environ.get('AMENT_PREFIX_PATH', '').split(os.pathsep) if p]


def _search_dirs() -> list[Path]:
    return [Path(p) for p in os.environ.get(MODEL_PATH_ENV, '').split(':') if p]


def find_package(package: str) -> Path | None:
    """Return the directory of ROS package ``package`` (search path, then ament index)."""
    for d in _search_dirs():
        if (d / package).is_dir():
            return d / package
    for prefix in _ament_prefixes():
        marker = prefix / 'share' / 'ament_index' / 'resource_index' / 'packages' / package
        if marker.is_file() and (prefix / 'share' / package).is_dir():
            return prefix / 'share' / package
    return None


def resolve_uri(uri: str, relative_to: Path) -> Path:
    """Resolve a file URI of a model (see the module docstring); ModelFileError if not found."""
    if uri.startswith('package://'):
        package, _, rest = uri[len('package://'):].partition('/')
        pkg_dir = find_package(package)
        if pkg_dir is None:
            raise ModelFileError(
                f'package {package!r} not found: add the directory holding the {package} '
                f'folder to {MODEL_PATH_ENV} (now {os.environ.get(MODEL_PATH_ENV, "")!r}) or '
                'source the ROS workspace that installs it (AMENT_PREFIX_PATH)')
        path = pkg_dir / rest
    elif uri.startswith('file://'):
        path = Path(uri[len('file://'):])
    else:
        path = Path(uri).expanduser()
        if not path.is_absolute():
            path = relative_to / path
    if not path.is_file():
        raise ModelFileError(f'{path} does not exist')
    return path.absolute()


def _parse(path: Path) -> ElementTree.Element:
    try:
        return ElementTree.parse(path).getroot()
    except (OSError, ElementTree.ParseError) as exc:
        raise ModelFileError(str(exc)) from None  # the parser's text names line and column


def urdf_meshes(root: ElementTree.Element, base: Path) -> list[tuple[ElementTree.Element,
                                                                       MeshRef]]:
    """Every ``<mesh filename>`` of a URDF tree with its link and resolved path."""
    out = []
    for link in root.iter('link'):
        for mesh in link.iter('mesh'):
            uri = mesh.get('filename', '')
            try:
                ref = MeshRef(str(link.get('name')), uri, resolve_uri(uri, base))
            except ModelFileError as exc:
                ref = MeshRef(str(link.get('name')), uri, None, str(exc))
            out.append((mesh, ref))
    return out


def mjcf_meshes(root: ElementTree.Element, base: Path) -> list[MeshRef]:
    """Every ``<mesh file>`` asset of an MJCF tree, resolved as MuJoCo does (meshdir)."""
    compiler = root.find('compiler')
    meshdir = ''
    if compiler is not None:
        meshdir = compiler.get('meshdir', compiler.get('assetdir', ''))
    out = []
    for mesh in root.iter('mesh'):
        uri = mesh.get('file')
        if uri is None:
            continue
        try:
            ref = MeshRef(str(mesh.get('name', uri)), uri,
                          resolve_uri(uri, base / meshdir if meshdir else base))
        except ModelFileError as exc:
            ref = MeshRef(str(mesh.get('name', uri)), uri, None, str(exc))
        out.append(ref)
    return out


def model_meshes(path: Path, fmt: str) -> list[MeshRef]:
    """Every mesh a model file names, resolved (``path`` None where not found)."""
    root = _parse(path)
    if fmt == 'urdf':
        return [ref for _, ref in urdf_meshes(root, path.parent)]
    return mjcf_meshes(root, path.parent)


def resolved_urdf(path: Path) -> ElementTree.Element:
    """Return the URDF's tree, mesh filenames made absolute; ModelFileError if one is missing."""
    root = _parse(path)
    for mesh, ref in urdf_meshes(root, path.parent):
        if ref.path is None:
            raise ModelFileError(f'link {ref.owner!r}: mesh {ref.uri!r}: {ref.why}')
        mesh.set('filename', str(ref.path))
    return root


def pybullet_mjcf_refusal(spec_file: Path | str, model: Path) -> str:
    """Return the line that says the pybullet engine does not run an MJCF model, and what to do."""
    return (f'{spec_file}: model {Path(model).name} is MJCF, which the pybullet engine does not '
            'load (its loadMJCF drops joint limits and inertias): use engine:=mujoco, or give '
            'the robot a URDF model (docs/robots.md)')


def model_links(path: Path, fmt: str) -> set[str]:
    """Link names of a URDF, body names of an MJCF (empty when the file does not parse)."""
    try:
        root = _parse(path)
    except ModelFileError:
        return set()  # the model builder reports a broken file with its own message
    tag = 'link' if fmt == 'urdf' else 'body'
    return {str(e.get('name')) for e in root.iter(tag) if e.get('name')}
