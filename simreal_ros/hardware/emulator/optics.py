"""The virtual camera's visual reality as pure image functions (numpy + OpenCV, no ROS, no GL).

What a real camera does to the ideal pinhole render of the scene, in the order a sensor does
it (:class:`Optics` chains them for :class:`~simreal_ros.core.camera_info.OpticalReality`):

    offset_pose(xyz, rpy, translation_m, rotation_rad) -> (xyz, rpy)
        the camera's true mounting: the nominal optical-frame pose (x right, y down,
        z forward, in its parent) times the offset (translation in the optical frame, then a
        rotation vector about the optical axes). A point at depth Z on the axis moves
        ``-fx * tx / Z`` px for a translation ``tx`` and ``-fx * tan(ry)`` px for a rotation
        ``ry`` about y (tested on a MuJoCo render).
    relight(lights, diffuse_scale, ambient_scale, rotation) (in the renderer, see
        :meth:`~simreal_ros.sim.mujoco.renderer.MujocoCameraRenderer.set_lighting`)
    distortion_maps(width, height, k, dist) -> (map_x, map_y, pad)
        Brown-Conrady lens distortion (k1, k2, p1, p2, k3; OpenCV's plumb_bob): for every
        pixel of the distorted output, the point of the ideal image it shows, found by
        inverting the model (``cv2.undistortPoints``), for ``cv2.remap``. A barrel lens
        (k1 < 0) sees *more* than the pinhole of the same focal length, so the ideal image is
        rendered ``pad`` px larger on every side: the output has no black corners, as a real
        lens has none. All-zero coefficients give no maps (identity).
    sensor_noise(signal, full_well_e, read_noise, rng) -> signal + noise
        photon shot noise (Poisson, variance = the electrons collected, a pixel collecting
        ``full_well_e`` electrons at 255) and read noise (Gaussian, ``read_noise`` grey
        levels), in grey levels, before gain: variance ``signal * 255 / full_well_e +
        read_noise**2`` (the Poissonian-Gaussian model of Foi et al., 2008), drawn as
        Gaussian with that variance (the normal approximation of the Poisson counts: one
        draw per pixel instead of a Poisson sample; mean and variance are exact); seeded by
        the reality's ``seed``.
    colour_gain(signal, gain, white_balance) -> signal * gain * wb[c]
        exposure (analog gain) and white balance: channel c's mean scales by exactly
        ``gain * wb[c]`` (before clipping).

Cost at 640x480 (``simreal bench camera``, ``visual_reality``, load average 5): 19.3 ms a frame
for the image stages, of which the noise 13.9 ms, next to 17.5 ms for the ideal render.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import cv2
import numpy as np
import numpy.typing as npt

from simreal_ros.core.camera_info import OpticalReality

# re-exported: the contracts are this module's doc
from simreal_ros.core.optics import colour_gain as colour_gain
from simreal_ros.core.optics import offset_pose as offset_pose
from simreal_ros.core.optics import rotation_matrix as rotation_matrix
from simreal_ros.core.optics import sensor_noise as sensor_noise

Image = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
#: most padding the ideal render gets for a lens (px per side): beyond it the corners of a
#: strongly distorted lens come from outside the render (black), which the docs say
MAX_PAD_FRACTION = 0.5


def distortion_maps(width: int, height: int, k: tuple[float, float, float, float],
                    dist: Sequence[float]) -> tuple[F32, F32, int] | None:
    """Remap tables of a lens, into an ideal image padded by ``pad`` px; None for no lens."""
    if not any(dist):
        return None
    fx, fy, cx, cy = k
    kmat = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]], dtype=np.float64)
    u, v = np.meshgrid(np.arange(width, dtype=np.float64), np.arange(height, dtype=np.float64))
    pts = np.stack([u.ravel(), v.ravel()], axis=1).reshape(-1, 1, 2)
    ideal = cv2.undistortPoints(pts, kmat, np.asarray(dist, dtype=np.float64), P=kmat)
    ideal = ideal.reshape(height, width, 2)
    over = max(0.0, -float(ideal[..., 0].min()), float(ideal[..., 0].max()) - (width - 1),
               -float(ideal[..., 1].min()), float(ideal[..., 1].max()) - (height - 1))
    pad = min(int(math.ceil(over)) + 1 if over > 0 else 0,
              int(MAX_PAD_FRACTION * min(width, height)))
    ideal += pad
    return (ideal[:, :, 0].astype(np.float32), ideal[:, :, 1].astype(np.float32), pad)


class Optics:
    """The optical reality applied to an ideal render of the true intrinsics.

    ``ideal_size`` (width, height) is what the render must be: the camera's size plus
    ``pad`` px on every side when the lens needs them (principal point shifted by ``pad``).
    """

    def __init__(self, reality: OpticalReality, width: int, height: int,
                 k: tuple[float, float, float, float]) -> None:
        self.r = reality
        self.width, self.height = width, height
        self.rng = np.random.default_rng(reality.seed)
        maps = distortion_maps(width, height, k, reality.distortion)
        self.maps: tuple[Any, Any] | None = None
        self.pad = 0
        if maps is not None:
            self.maps = (maps[0], maps[1])
            self.pad = maps[2]
        self.ideal_size = (width + 2 * self.pad, height + 2 * self.pad)

    def ideal_intrinsics(self, k: tuple[float, float, float, float]
                         ) -> tuple[float, float, float, float]:
        """Return the intrinsics the padded ideal render needs for a lens of intrinsics k."""
        fx, fy, cx, cy = k
        return fx, fy, cx + self.pad, cy + self.pad

    def apply(self, rgb: Image) -> Image:
        """Return the frame the sensor delivers (RGB) for an ideal render of ``ideal_size``."""
        w, h = self.ideal_size
        if rgb.shape[:2] != (h, w):
            raise ValueError(f'the ideal render is {rgb.shape[1]}x{rgb.shape[0]}, the lens '
                             f'needs {w}x{h} (pad {self.pad})')
        img: npt.NDArray[Any] = rgb
        if self.maps is not None:
            img = cv2.remap(img, self.maps[0], self.maps[1], cv2.INTER_LINEAR,
                            borderMode=cv2.BORDER_CONSTANT)
        if self.r.blur_sigma_px > 0:
            img = cv2.GaussianBlur(img, (0, 0), self.r.blur_sigma_px)
        out = img.astype(np.float32)
        sensor_noise(out, self.r.full_well_e, self.r.noise_std, self.rng)
        colour_gain(out, self.r.gain, self.r.white_balance)
        frame: Image = np.clip(out + 0.5, 0, 255).astype(np.uint8)
        return frame
