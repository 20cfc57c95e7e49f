"""``simreal export --format lerobot``: teleop episodes as a LeRobot dataset (v3.0 layout).

The layout is the one the ``lerobot`` 0.6 package writes (``codebase_version`` ``v3.0``)::

    meta/info.json                          fps, features, totals, path templates, splits
    meta/stats.json                         per feature: min, max, mean, std, count, q01..q99
    meta/tasks.parquet                      index ``task`` (the text), column ``task_index``
    meta/episodes/chunk-000/file-000.parquet
                                            one row per episode: episode_index, tasks, length,
                                            data/chunk_index, data/file_index,
                                            dataset_from_index, dataset_to_index,
                                            videos/<key>/{chunk_index,file_index,from_timestamp,
                                            to_timestamp}, meta/episodes/{chunk_index,
                                            file_index}, stats/<feature>/<stat>
    data/chunk-000/file-000.parquet         one row per frame: observation.state, action,
                                            timestamp, frame_index, episode_index, index,
                                            task_index
    videos/observation.images.<camera>/chunk-000/file-000.mp4
                                            the camera's frames, episodes one after another

Frames are taken on a grid of ``fps`` from the later of the first follower state and the first
command to the earlier of the last ones; each frame holds the latest sample at or before its
time (what a policy running at ``fps`` would have seen and sent): ``observation.state`` the
follower's ``joint_states`` positions, ``action`` the ``joint_commands`` positions (the mapped
leader), both float32 in robot joint order and named as LeRobot names motor positions
(``<joint>.pos``: the SO-101's ``shoulder_pan.pos`` ... ``gripper.pos``; the gripper is a joint
like any other), and for each camera topic the latest image. Values are in the stack's units
(rad), not LeRobot's degrees or 0-100 gripper range.

Only accepted episodes are exported unless ``include_rejected``: an episode directory of
``simreal_episodes`` carries its verdict in ``episode.yaml``; a plain bag is checked here with
the same checks. Videos are MPEG-4 Part 2 (``mp4v``) from OpenCV's writer, the encoder this
stack ships (lerobot writes AV1 with PyAV by default; its decoders read either).
"""

from __future__ import annotations

from dataclasses import dataclass, field
import json
from pathlib import Path
import shutil
from typing import Any, Callable, Sequence

import numpy as np
import numpy.typing as npt

from simreal_ros.bag import BagReader
from simreal_ros.core.robot import RobotSpec
from simreal_ros.errors import SimrealError
from simreal_ros.gap.episode import load_episode
from simreal_ros.gap.image_metrics import IMAGE, to_array
from simreal_ros.gap.quality import Thresholds
from simreal_ros.teleop.quality import (
    EPISODE_META,
    TeleopThresholds,
    check_teleop_episode,
    read_meta,
    reasons,
)

FloatArray = npt.NDArray[np.float64]
CODEBASE_VERSION = 'v3.0'
CHUNKS_SIZE = 1000
DATA_FILE_MB = 100
VIDEO_FILE_MB = 200
DATA_PATH = 'data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet'
VIDEO_PATH = 'videos/{video_key}/chunk-{chunk_index:03d}/file-{file_index:03d}.mp4'
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)
Progress = Callable[[str], None]


@dataclass
class Source:
    """One episode to export: its bag, verdict and metadata."""

    bag: Path
    name: str
    accepted: bool
    reasons: list[str]
    task: str
    meta: dict[str, Any] = field(default_factory=dict)


def find_sources(paths: Sequence[str], robot: RobotSpec, th: Thresholds,
                 tth: TeleopThresholds) -> list[Source]:
    """Resolve episode directories, session directories and plain bags, in order."""
    out: list[Source] = []
    for text in paths:
        p = Path(text).expanduser()
        if (p / EPISODE_META).exists():
            out.append(_episode_source(p))
        elif (p / 'metadata.yaml').exists():
            ep = load_episode(str(p))
            v = check_teleop_episode(ep, robot, th, tth)
            out.append(Source(p, p.name, v.passed, reasons(v),
                              ep.info.custom_data.get('episode.task', '')))
        elif p.is_dir() and sorted(p.glob(f'episode_*/{EPISODE_META}')):
            out += [_episode_source(e.parent)
                    for e in sorted(p.glob(f'episode_*/{EPISODE_META}'))]
        else:
            raise SimrealError(f'{p}: not an episode (episode.yaml), a directory of episodes '
                               f'or a bag (metadata.yaml)')
    return out


def _episode_source(directory: Path) -> Source:
    meta = read_meta(directory)
    return Source(directory / str(meta.get('bag', 'bag')), directory.name,
                  bool(meta['accepted']), list(meta.get('reasons', [])),
                  str(meta.get('task', '')), meta)


def hold_indices(sample_ns: npt.NDArray[np.int64], grid_ns: npt.NDArray[np.int64]
                 ) -> npt.NDArray[np.int64]:
    """Index of the latest sample at or before each grid time (samples sorted, grid >= first)."""
    idx: npt.NDArray[np.int64] = np.searchsorted(sample_ns, grid_ns, side='right') - 1
    return idx


def feature_stats(values: FloatArray) -> dict[str, list[float]]:
    """LeRobot's per-feature statistics of ``values`` (frames x dims, or image samples)."""
    out = {'min': values.min(axis=0), 'max': values.max(axis=0),
           'mean': values.mean(axis=0), 'std': values.std(axis=0)}
    for q in QUANTILES:
        out[f'q{int(round(q * 100)):02d}'] = np.quantile(values, q, axis=0)
    stats = {k: np.atleast_1d(v).astype(np.float64).tolist() for k, v in out.items()}
    stats['count'] = [int(values.shape[0])]
    return stats


def image_stats(frames: list[npt.NDArray[np.uint8]]) -> dict[str, Any]:
    """Per-channel statistics of images in [0, 1], shaped (3, 1, 1) as lerobot keeps them."""
    step = max(1, len(frames) // 100)  # lerobot samples frames too; a subset is enough
    pix = np.concatenate([f[::8, ::8].reshape(-1, f.shape[2]) for f in frames[::step]]) / 255.0
    flat = feature_stats(pix)
    return {k: ([[[v]] for v in vals] if k != 'count' else [len(frames)])
            for k, vals in flat.items()}


@dataclass
class Frames:
    """One episode resampled: the rows of its data file and its camera frames."""

    state: FloatArray
    action: FloatArray
    timestamps: FloatArray
    images: dict[str, list[npt.NDArray[np.uint8]]]


def resample(source: Source, robot: RobotSpec, fps: int, state_topic: str,
             action_topic: str) -> Frames:
    """Hold the latest state, command and image at each frame time of one episode."""
    ep = load_episode(str(source.bag))
    for topic in (state_topic, action_topic):
        if topic not in ep.joints or len(ep.joints[topic].stamps) < 2:
            raise SimrealError(f'{source.bag}: no {topic} (sensor_msgs/JointState) to export; '
                               f'it has {sorted(ep.info.topics)}')
    st = ep.joints[state_topic].series().select(robot.joint_names)
    ac = ep.joints[action_topic].series().select(robot.joint_names)
    t0 = max(int(st.stamps[0]), int(ac.stamps[0]))
    t1 = min(int(st.stamps[-1]), int(ac.stamps[-1]))
    period = 1_000_000_000 // fps
    if t1 - t0 < period:
        raise SimrealError(f'{source.bag}: state and commands overlap for less than one frame '
                           f'at {fps} fps')
    grid = np.arange(t0, t1 + 1, period, dtype=np.int64)
    state = st.position[hold_indices(st.stamps, grid)]
    action = ac.position[hold_indices(ac.stamps, grid)]
    cams = [t for t, (msgtype, _n) in sorted(ep.info.topics.items()) if msgtype == IMAGE]
    images: dict[str, list[npt.NDArray[np.uint8]]] = {}
    if cams:
        with BagReader(str(source.bag)) as reader:
            for cam in cams:
                stamps: list[int] = []
                frames: list[npt.NDArray[np.uint8]] = []
                for m in reader.messages([cam]):
                    msg = reader.deserialize(m)
                    stamps.append(int(msg.header.stamp.sec) * 1_000_000_000
                                  + int(msg.header.stamp.nanosec))
                    frames.append(to_array(msg))
                if not frames:
                    continue
                order = np.argsort(np.asarray(stamps, dtype=np.int64), kind='stable')
                s = np.asarray(stamps, dtype=np.int64)[order]
                idx = np.clip(hold_indices(s, grid), 0, len(s) - 1)
                images[camera_key(cam)] = [frames[int(order[i])] for i in idx]
    return Frames(state, action, (grid - t0) / 1e9, images)


def camera_key(topic: str) -> str:
    """LeRobot feature key of an image topic: ``/camera/image_raw`` -> images.camera."""
    parts = [p for p in topic.strip('/').split('/') if p]
    name = parts[-2] if len(parts) >= 2 and parts[-1] == 'image_raw' else parts[-1]
    return f'observation.images.{name}'


def write_video(path: Path, frames: list[npt.NDArray[np.uint8]], fps: int) -> None:
    """Encode RGB frames as MPEG-4 (mp4v) with OpenCV."""
    import cv2
    h, w = frames[0].shape[:2]
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*'mp4v'), float(fps), (w, h))
    if not writer.isOpened():
        raise SimrealError(f'cannot write the video {path} (OpenCV has no mp4v encoder)')
    try:
        for f in frames:
            rgb = f if f.shape[2] == 3 else np.repeat(f, 3, axis=2)
            writer.write(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
    finally:
        writer.release()


def export_lerobot(sources: Sequence[Source], out: Path, robot: RobotSpec, fps: int,
                   include_rejected: bool = False, task: str = '',
                   state_topic: str = '/joint_states', action_topic: str = '/joint_commands',
                   progress: Progress | None = None) -> dict[str, Any]:
    """Write the dataset; return a summary (episodes exported and skipped, frames)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    say = progress or (lambda _line: None)
    if out.exists():
        raise SimrealError(f'{out} exists already; simreal never overwrites a dataset: choose a '
                           f'new --out')
    if not 1 <= fps <= 1000:
        raise SimrealError(f'--fps {fps}: expected 1..1000 frames per second')
    chosen = [s for s in sources if s.accepted or include_rejected]
    skipped = [{'episode': s.name, 'reasons': s.reasons} for s in sources
               if not (s.accepted or include_rejected)]
    if not chosen:
        raise SimrealError(f'no accepted episode among {len(sources)} (give --all to export '
                           f'rejected ones too)')
    tasks: dict[str, int] = {}
    rows: list[pa.Table] = []
    ep_rows: list[dict[str, Any]] = []
    all_state: list[FloatArray] = []
    all_action: list[FloatArray] = []
    videos: dict[str, list[npt.NDArray[np.uint8]]] = {}
    video_shape: dict[str, tuple[int, ...]] = {}
    n = robot.n
    index = 0
    tmp = out.with_name(out.name + '.partial')
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        for e, src in enumerate(chosen):
            fr = resample(src, robot, fps, state_topic, action_topic)
            label = src.task or task
            if not label:
                raise SimrealError(f'{src.name}: the episode has no task label; give --task')
            tix = tasks.setdefault(label, len(tasks))
            length = len(fr.timestamps)
            say(f'episode {e} ({src.name}): {length} frames, task {label!r}')
            cols = {
                'observation.state': pa.array(list(fr.state.astype(np.float32)),
                                              pa.list_(pa.float32(), n)),
                'action': pa.array(list(fr.action.astype(np.float32)),
                                   pa.list_(pa.float32(), n)),
                'timestamp': pa.array(fr.timestamps.astype(np.float32), pa.float32()),
                'frame_index': pa.array(np.arange(length, dtype=np.int64)),
                'episode_index': pa.array(np.full(length, e, dtype=np.int64)),
                'index': pa.array(np.arange(index, index + length, dtype=np.int64)),
                'task_index': pa.array(np.full(length, tix, dtype=np.int64)),
            }
            rows.append(pa.table(cols))
            row: dict[str, Any] = {
                'episode_index': e, 'tasks': [label], 'length': length,
                'data/chunk_index': 0, 'data/file_index': 0,
                'dataset_from_index': index, 'dataset_to_index': index + length}
            ep_stats: dict[str, dict[str, Any]] = {
                'observation.state': feature_stats(fr.state),
                'action': feature_stats(fr.action),
                'timestamp': feature_stats(fr.timestamps[:, None]),
                'frame_index': feature_stats(np.arange(length, dtype=np.float64)[:, None]),
                'episode_index': feature_stats(np.full((length, 1), float(e))),
                'index': feature_stats(np.arange(index, index + length,
                                                 dtype=np.float64)[:, None]),
                'task_index': feature_stats(np.full((length, 1), float(tix)))}
            for key, frames in fr.images.items():
                start = len(videos.get(key, [])) / fps
                videos.setdefault(key, []).extend(frames)
                video_shape[key] = frames[0].shape
                row.update({f'videos/{key}/chunk_index': 0, f'videos/{key}/file_index': 0,
                            f'videos/{key}/from_timestamp': start,
                            f'videos/{key}/to_timestamp': start + length / fps})
                ep_stats[key] = image_stats(frames)
            row['meta/episodes/chunk_index'] = 0
            row['meta/episodes/file_index'] = 0
            for feat, st in ep_stats.items():
                for name, value in st.items():
                    row[f'stats/{feat}/{name}'] = value
            ep_rows.append(row)
            all_state.append(fr.state)
            all_action.append(fr.action)
            index += length
        data_path = tmp / DATA_PATH.format(chunk_index=0, file_index=0)
        data_path.parent.mkdir(parents=True)
        pq.write_table(pa.concat_tables(rows), data_path, compression='snappy')
        episodes_path = tmp / 'meta/episodes/chunk-000/file-000.parquet'
        episodes_path.parent.mkdir(parents=True)
        pd.DataFrame(ep_rows).to_parquet(episodes_path)
        pd.DataFrame({'task_index': list(tasks.values())},
                     index=pd.Index(list(tasks), name='task')).to_parquet(
            tmp / 'meta/tasks.parquet')
        for key, frames in videos.items():
            say(f'video {key}: {len(frames)} frames')
            write_video(tmp / VIDEO_PATH.format(video_key=key, chunk_index=0, file_index=0),
                        frames, fps)
        # LeRobot's motor feature names (``shoulder_pan.pos``, ..., ``gripper.pos``); the
        # values stay this stack's units (rad, or m for a prismatic joint), not degrees
        names = {'names': [f'{name}.pos' for name in robot.joint_names]}
        features: dict[str, Any] = {
            'observation.state': {'dtype': 'float32', 'shape': [n], **names},
            'action': {'dtype': 'float32', 'shape': [n], **names}}
        for key, shape in video_shape.items():
            h, w, c = shape
            features[key] = {'dtype': 'video', 'shape': [h, w, 3],
                             'names': ['height', 'width', 'channels'],
                             'info': {'video.height': h, 'video.width': w,
                                      'video.codec': 'mpeg4', 'video.pix_fmt': 'yuv420p',
                                      'video.is_depth_map': False, 'video.fps': fps,
                                      'video.channels': 3, 'has_audio': False}}
        for key, dtype in (('timestamp', 'float32'), ('frame_index', 'int64'),
                           ('episode_index', 'int64'), ('index', 'int64'),
                           ('task_index', 'int64')):
            features[key] = {'dtype': dtype, 'shape': [1], 'names': None}
        info = {
            'codebase_version': CODEBASE_VERSION, 'robot_type': robot.name,
            'total_episodes': len(chosen), 'total_frames': index, 'total_tasks': len(tasks),
            'chunks_size': CHUNKS_SIZE, 'data_files_size_in_mb': DATA_FILE_MB,
            'video_files_size_in_mb': VIDEO_FILE_MB, 'fps': fps,
            'splits': {'train': f'0:{len(chosen)}'}, 'data_path': DATA_PATH,
            'video_path': VIDEO_PATH if videos else None, 'features': features}
        (tmp / 'meta/info.json').write_text(json.dumps(info, indent=4), encoding='utf-8')
        state, action = np.concatenate(all_state), np.concatenate(all_action)
        stats: dict[str, Any] = {'observation.state': feature_stats(state),
                                 'action': feature_stats(action)}
        for key in ('timestamp', 'frame_index', 'episode_index', 'index', 'task_index'):
            col = pa.concat_tables(rows).column(key).to_numpy().astype(np.float64)[:, None]
            stats[key] = feature_stats(col)
        for key, frames in videos.items():
            stats[key] = image_stats(frames)
        (tmp / 'meta/stats.json').write_text(json.dumps(stats, indent=4), encoding='utf-8')
        tmp.rename(out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {'out': str(out), 'format': f'lerobot {CODEBASE_VERSION}', 'fps': fps,
            'episodes': [s.name for s in chosen], 'frames': index, 'tasks': list(tasks),
            'skipped': skipped, 'videos': sorted(videos)}


def default_fps(sources: Sequence[Source], action_topic: str) -> int:
    """Return the commands' rate of the first episode, rounded (frames = one per command)."""
    ep = load_episode(str(sources[0].bag), [action_topic])
    s = ep.stats[action_topic]
    return max(1, int(round(1000.0 / s.median_period_ms)))


def check_robot(sources: Sequence[Source], robot: RobotSpec) -> None:
    """SimrealError when an episode's metadata names another robot than ``robot``."""
    for s in sources:
        other = str(s.meta.get('robot', robot.name))
        if other != robot.name:
            raise SimrealError(f'{s.name} is an episode of {other}, not {robot.name}: give '
                               f'--robot {other} or export them separately')
