"""``ros2 launch simreal_ros bringup.launch.py backend:=sim [name:=value ...]``.

Thin by design: the node list comes from ``simreal_ros.bringup.planner``, the same planner that
``simreal launch`` uses, so both accept the same arguments and start the same graph.
"""

from launch.actions import DeclareLaunchArgument, EmitEvent, OpaqueFunction, RegisterEventHandler
from launch.event_handlers import OnProcessExit
from launch.events import Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from launch import LaunchDescription
from simreal_ros.bringup.planner import ARGUMENTS, PACKAGE, plan


def _nodes(context):
    args = {name: LaunchConfiguration(name).perform(context) for name in ARGUMENTS}
    actions = []
    for spec in plan(args):
        node = Node(package=PACKAGE, executable=spec.executable, name=spec.name,
                    namespace=spec.namespace or None, parameters=[spec.parameters],
                    remappings=list(spec.remappings), additional_env=spec.env or None,
                    output='screen')
        actions.append(node)
        if spec.required or spec.exit_ends_launch:
            actions.append(RegisterEventHandler(OnProcessExit(
                target_action=node,
                on_exit=[EmitEvent(event=Shutdown(reason=f'{spec.fqn} exited'))])))
    return actions


def generate_launch_description():
    """Declare the planner's arguments and start its plan."""
    declared = [DeclareLaunchArgument(name, default_value=arg.default,
                                      description=arg.description,
                                      **({'choices': list(arg.choices)} if arg.choices else {}))
                for name, arg in ARGUMENTS.items()]
    return LaunchDescription(declared + [OpaqueFunction(function=_nodes)])
