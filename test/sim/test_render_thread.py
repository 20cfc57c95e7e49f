"""The sim's render thread: GL only once a frame is wanted, and a clean stop either way."""

import threading

import numpy as np

from simreal_ros.core.robot import CameraSpec
from simreal_ros.sim.render_thread import RenderThread


class FakeRenderer:
    """Records where it was made and renders the state's first value as a 2x2 image."""

    made_in: list[str] = []

    def __init__(self) -> None:
        FakeRenderer.made_in.append(threading.current_thread().name)
        self.closed = False

    def render(self, state, which):
        return [np.full((2, 2), int(state[0]), np.uint8) if w else None for w in which]

    def close(self) -> None:
        self.closed = True


def camera() -> CameraSpec:
    return CameraSpec(name='cam', parent='world', xyz=(0.0, 0.0, 1.0), rpy=(0.0, 0.0, 0.0),
                      width=2, height=2, fps_hz=100.0, fovy_deg=60.0, encoding='mono8')


def test_no_renderer_is_made_until_a_frame_is_offered_and_none_after_close():
    FakeRenderer.made_in = []
    rt = RenderThread(FakeRenderer, [camera()], lambda s, i: None, lambda e: None)
    assert FakeRenderer.made_in == []
    assert rt.thread.ident is None
    rt.close()
    assert rt.offer(0, np.zeros(1)) is False
    assert FakeRenderer.made_in == []
    assert rt.thread.ident is None


def test_the_first_offer_starts_the_renderer_on_its_own_thread():
    FakeRenderer.made_in = []
    frames: list = []
    got = threading.Event()

    def on_frame(stamp, images):
        frames.append((stamp, int(images[0][0, 0])))
        got.set()
    rt = RenderThread(FakeRenderer, [camera()], on_frame, lambda e: None)
    assert rt.offer(5_000_000, np.array([7.0])) is True
    assert got.wait(10.0)
    rt.close()
    assert not rt.thread.is_alive()
    assert FakeRenderer.made_in == ['camera_render']
    assert frames == [(5_000_000, 7)]
