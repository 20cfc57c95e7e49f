"""Where a robot spec's model file and its meshes are found (core/model_files.py, core/robot.py).

A vendor's description package (test/robot_files.py) names its meshes
``package://my_arm_description/meshes/...``; the spec names the URDF the same way, or by
``file://``, an absolute path or a path relative to the spec file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from robot_files import PACKAGE, spec_data, urdf_text, write_description_package, write_spec

from simreal_ros.core.model_files import (
    ModelFileError,
    find_package,
    model_format,
    resolve_uri,
    resolved_urdf,
)
from simreal_ros.core.robot import load_robot
from simreal_ros.errors import ConfigError

URI = f'package://{PACKAGE}/urdf/my_arm.urdf'


@pytest.fixture
def no_search_path(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """Neither SIMREAL_MODEL_PATH nor an AMENT_PREFIX_PATH that could hold the package."""
    monkeypatch.delenv('SIMREAL_MODEL_PATH', raising=False)
    monkeypatch.setenv('AMENT_PREFIX_PATH', '')
    return monkeypatch


def test_package_uri_resolves_through_the_search_path(tmp_path, no_search_path):
    urdf = write_description_package(tmp_path / 'src')
    no_search_path.setenv('SIMREAL_MODEL_PATH', f'{tmp_path / "elsewhere"}:{tmp_path / "src"}')
    assert find_package(PACKAGE) == tmp_path / 'src' / PACKAGE
    spec = load_robot(write_spec(tmp_path / 'my_arm.yaml', spec_data(URI)))
    assert spec.urdf == urdf
    assert spec.model_format == 'urdf'


def test_package_uri_resolves_through_the_ament_index(tmp_path, no_search_path):
    prefix = tmp_path / 'install'
    urdf = write_description_package(prefix / 'share')
    marker = prefix / 'share' / 'ament_index' / 'resource_index' / 'packages' / PACKAGE
    marker.parent.mkdir(parents=True)
    marker.write_text('')
    no_search_path.setenv('AMENT_PREFIX_PATH', f'{tmp_path / "other"}:{prefix}')
    spec = load_robot(write_spec(tmp_path / 'my_arm.yaml', spec_data(URI)))
    assert spec.urdf == urdf


def test_a_share_folder_without_the_ament_index_entry_is_not_a_package(tmp_path,
                                                                       no_search_path):
    write_description_package(tmp_path / 'install' / 'share')
    no_search_path.setenv('AMENT_PREFIX_PATH', str(tmp_path / 'install'))
    assert find_package(PACKAGE) is None


def test_relative_absolute_and_file_uris(tmp_path, no_search_path):
    urdf = write_description_package(tmp_path)
    for model in (f'{PACKAGE}/urdf/my_arm.urdf', str(urdf), f'file://{urdf}'):
        spec = load_robot(write_spec(tmp_path / 'my_arm.yaml', spec_data(model)))
        assert spec.urdf == urdf, model


def test_meshes_resolve_to_absolute_paths(tmp_path, no_search_path):
    no_search_path.setenv('SIMREAL_MODEL_PATH', str(tmp_path))
    urdf = write_description_package(tmp_path)
    root = resolved_urdf(urdf)
    names = [m.get('filename') for m in root.iter('mesh')]
    mesh_dir = tmp_path / PACKAGE / 'meshes'
    assert names == [str(mesh_dir / f'{link}.stl') for link in ('l1', 'l1', 'l2', 'l2')]


def test_meshes_relative_to_the_urdf(tmp_path, no_search_path):
    urdf = write_description_package(tmp_path, urdf_text(mesh='../meshes/{link}.stl'))
    names = {m.get('filename') for m in resolved_urdf(urdf).iter('mesh')}
    assert names == {str(tmp_path / PACKAGE / 'urdf' / '..' / 'meshes' / f'{link}.stl')
                     for link in ('l1', 'l2')}


def test_a_package_not_found_says_where_to_add_it(tmp_path, no_search_path):
    urdf = write_description_package(tmp_path)
    with pytest.raises(ModelFileError) as info:
        resolved_urdf(urdf)
    assert str(info.value) == (
        f"link 'l1': mesh 'package://{PACKAGE}/meshes/l1.stl': package '{PACKAGE}' not "
        f'found: add the directory holding the {PACKAGE} folder to SIMREAL_MODEL_PATH (now '
        "'') or source the ROS workspace that installs it (AMENT_PREFIX_PATH)")


def test_a_missing_mesh_is_one_line_naming_it(tmp_path, no_search_path):
    no_search_path.setenv('SIMREAL_MODEL_PATH', str(tmp_path))
    urdf = write_description_package(tmp_path)
    (tmp_path / PACKAGE / 'meshes' / 'l2.stl').unlink()
    with pytest.raises(ModelFileError) as info:
        resolved_urdf(urdf)
    assert str(info.value) == (f"link 'l2': mesh 'package://{PACKAGE}/meshes/l2.stl': "
                               f'{tmp_path / PACKAGE / "meshes" / "l2.stl"} does not exist')


def test_model_and_urdf_keys_both_given_is_one_config_error(tmp_path, no_search_path):
    urdf = write_description_package(tmp_path)
    path = write_spec(tmp_path / 'my_arm.yaml', spec_data(str(urdf), urdf=str(urdf)))
    with pytest.raises(ConfigError) as info:
        load_robot(path)
    assert str(info.value) == (f"{path}: model: expected one of 'model' and 'urdf' (two "
                               "spellings of the robot's model file), got 'both'")


def test_a_missing_model_file_names_key_and_path(tmp_path, no_search_path):
    path = write_spec(tmp_path / 'my_arm.yaml', spec_data('nope/my_arm.urdf'))
    with pytest.raises(ConfigError) as info:
        load_robot(path)
    assert info.value.key == 'model'
    assert info.value.got == f'nope/my_arm.urdf ({Path(__file__).resolve().parents[2]}' \
        '/nope/my_arm.urdf does not exist)'


@pytest.mark.parametrize('name, text, fmt', [
    ('a.urdf', '<robot name="a"/>', 'urdf'), ('a.xml', '<robot name="a"/>', 'urdf'),
    ('a.xml', '<mujoco model="a"/>', 'mjcf'), ('a.mjcf', '<mujoco/>', 'mjcf')])
def test_the_format_is_the_extension_or_the_root_element(tmp_path, name, text, fmt):
    (tmp_path / name).write_text(text)
    assert model_format(tmp_path / name) == fmt


@pytest.mark.parametrize('name, text, message', [
    ('a.xml', '<sdf version="1.9"/>', 'the root element is <sdf>: a model is a URDF (<robot>) '
     'or an MJCF (<mujoco>) file'),
    ('a.urdf.xacro', '<robot/>', 'a xacro file is a template: run `xacro FILE.urdf.xacro -o '
     'FILE.urdf` and name the .urdf')])
def test_other_formats_are_refused_with_the_fix(tmp_path, name, text, message):
    (tmp_path / name).write_text(text)
    with pytest.raises(ModelFileError) as info:
        model_format(tmp_path / name)
    assert str(info.value) == message


def test_a_file_uri_to_nothing_is_refused(tmp_path):
    with pytest.raises(ModelFileError, match='does not exist'):
        resolve_uri(f'file://{tmp_path}/none.stl', tmp_path)
