"""Load a policy network (TorchScript ``.pt`` or ONNX ``.onnx``) and check it against its spec.

Pickled checkpoints (``torch.save`` of a module or a state dict) are refused: unpickling runs
arbitrary code from the file. TorchScript archives hold TorchScript code and tensors only and
are loaded with ``torch.jit.load``; ONNX files run in onnxruntime. Input and output sizes are
checked at load with a real forward pass, and a mismatch names the expected and actual shapes.

A spec with image terms declares a network of two inputs, ``forward(obs_vector, image_stack)``
with float32 ``(1, obs_dim)`` and ``(1, K*C, H, W)`` (``image_shape``; an ONNX model's two
inputs in that order); the loaded model is then called as ``model(obs, images)``.
"""

from __future__ import annotations

from pathlib import Path
import threading
from typing import Any, Callable, Sequence
import warnings
import zipfile

import numpy as np
import numpy.typing as npt

from simreal_ros.errors import PolicyError

FloatArray = npt.NDArray[np.float64]

WARMUP_CALLS = 5
EXPORT_HINT = ('export the network with torch.jit.script(model).save(path) (or '
               'torch.jit.trace), or to ONNX')


def _torchscript_members(path: Path) -> list[str]:
    if not zipfile.is_zipfile(path):
        raise PolicyError(f'{path}: not a TorchScript archive (a legacy pickle file?); '
                          f'pickles are refused because loading them runs arbitrary code; '
                          f'{EXPORT_HINT}')
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    has_code = any('/code/' in n for n in names)
    has_constants = any(n.endswith('/constants.pkl') for n in names)
    if not (has_code and has_constants):
        raise PolicyError(f'{path}: a pickled torch.save checkpoint, not TorchScript; pickles '
                          f'are refused because loading them runs arbitrary code; '
                          f'{EXPORT_HINT}')
    return names


class PolicyModel:
    """A loaded network: ``model(obs[, images]) -> action``, 1-D float64 numpy in and out.

    ``images`` (float32 ``(1, K*C, H, W)``) is given exactly when ``image_shape`` is set.
    """

    def __init__(self, path: Path, fmt: str, obs_dim: int, act_dim: int,
                 call: Callable[..., FloatArray],
                 image_shape: tuple[int, int, int] | None = None) -> None:
        self.path = path
        self.format = fmt
        self.obs_dim = obs_dim
        self.act_dim = act_dim
        self.image_shape = image_shape
        self._call = call

    def __call__(self, obs: FloatArray, images: Any = None) -> FloatArray:
        """Run the network on one observation vector (and image stack)."""
        if self.image_shape is None:
            return self._call(obs)
        return self._call(obs, images)


def _first_layer_inputs(module: Any) -> int | None:
    for p in module.parameters():
        if p.dim() == 2:
            return int(p.shape[1])
    return None


def _shapes(obs_dim: int, image_shape: Sequence[int] | None) -> str:
    """Say in words which inputs the spec declares."""
    if image_shape is None:
        return f'an observation of shape (1, {obs_dim})'
    return (f'inputs (obs_vector, image_stack) of shapes (1, {obs_dim}) and '
            f'(1, {", ".join(str(int(d)) for d in image_shape)})')


def _load_torchscript(path: Path, obs_dim: int, act_dim: int, threads: int,
                      image_shape: tuple[int, int, int] | None = None) -> PolicyModel:
    _torchscript_members(path)
    import torch
    if threads > 0:
        torch.set_num_threads(threads)
    try:
        with warnings.catch_warnings():  # torch >= 2.9 marks TorchScript as deprecated
            warnings.simplefilter('ignore', DeprecationWarning)
            module = torch.jit.load(str(path), map_location='cpu')  # type: ignore[no-untyped-call]
    except Exception as exc:  # noqa: BLE001 - torch raises RuntimeError with its reader text
        # the text's first line can be empty (an unknown op: '\nUnknown builtin op: ...'), so
        # the first line that says something
        said = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), repr(exc))
        raise PolicyError(f'{path}: torch.jit.load failed: {said}') from None
    module.eval()
    probe = [torch.zeros(1, obs_dim, dtype=torch.float32)]
    if image_shape is not None:
        probe.append(torch.zeros(1, *image_shape, dtype=torch.float32))
    try:
        with torch.inference_mode():
            for _ in range(WARMUP_CALLS):  # the JIT profiles and optimizes on the first calls
                out = module(*probe)
    except Exception as exc:  # noqa: BLE001
        got = _first_layer_inputs(module) if image_shape is None else None
        actual = (f'the network takes (1, {got}) (its first layer has {got} inputs)'
                  if got is not None and got != obs_dim
                  else f'the network fails on it: {str(exc).strip().splitlines()[-1]}')
        raise PolicyError(f'{path}: input shape mismatch: the spec declares '
                          f'{_shapes(obs_dim, image_shape)} but {actual}') from None
    if not isinstance(out, torch.Tensor):
        raise PolicyError(f'{path}: the network must return one tensor, got '
                          f'{type(out).__name__}')
    shape = tuple(int(s) for s in out.shape)
    if shape not in ((1, act_dim), (act_dim,)):
        raise PolicyError(f'{path}: output shape mismatch: the spec declares an action of '
                          f'shape (1, {act_dim}) but the network returns {shape}')

    caller = threading.local()

    def call(obs: FloatArray, *images: Any) -> FloatArray:
        if threads > 0 and not getattr(caller, 'threads_set', False):
            # OpenMP's thread count belongs to the thread that sets it: a call from another
            # thread (the policy node's loop) ran a team of one thread per core, its worker
            # spinning between calls (at SCHED_FIFO, the loop's priority). Measured in a
            # thread at load ~25 on 2 cores: call p50 17.9 ms and 1.35 s of CPU for 500
            # calls, against 0.053 ms and 0.04 s with the count set in that thread.
            torch.set_num_threads(threads)
            caller.threads_set = True
        x = [torch.from_numpy(np.asarray(obs, dtype=np.float32).reshape(1, obs_dim))]
        x += [torch.from_numpy(np.asarray(i, dtype=np.float32)) for i in images]
        with torch.inference_mode():
            y = module(*x)
        return np.asarray(y.numpy(), dtype=np.float64).reshape(act_dim)

    return PolicyModel(path, 'torchscript', obs_dim, act_dim, call, image_shape)


def _load_onnx(path: Path, obs_dim: int, act_dim: int, threads: int,
               image_shape: tuple[int, int, int] | None = None) -> PolicyModel:
    try:
        import onnxruntime as ort
    except ImportError:
        raise PolicyError(f'{path}: ONNX policies need the onnxruntime package, which is not '
                          f'installed (pip install onnxruntime), or use a TorchScript .pt'
                          ) from None
    opts = ort.SessionOptions()
    if threads > 0:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    try:
        sess = ort.InferenceSession(str(path), sess_options=opts,
                                    providers=['CPUExecutionProvider'])
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own exception types
        raise PolicyError(f'{path}: onnxruntime could not load the model: '
                          f'{str(exc).splitlines()[0]}') from None
    inputs, outputs = sess.get_inputs(), sess.get_outputs()
    n_in = 1 if image_shape is None else 2
    if len(inputs) != n_in or len(outputs) < 1:
        raise PolicyError(f'{path}: the network must take {n_in} input(s) '
                          f'({_shapes(obs_dim, image_shape)}), it takes '
                          f'{[i.name for i in inputs]}')
    img_name = ''
    if image_shape is not None:
        img_name = inputs[1].name
        img_shape = list(inputs[1].shape)
        if len(img_shape) != 4 or any(isinstance(d, int) and d != want for d, want in
                                      zip(img_shape[1:], image_shape, strict=True)):
            raise PolicyError(f'{path}: input shape mismatch: the spec declares '
                              f'{_shapes(obs_dim, image_shape)} but the network takes '
                              f'{img_shape} as its second input')
    in_shape = list(inputs[0].shape)
    if not in_shape or (isinstance(in_shape[-1], int) and in_shape[-1] != obs_dim):
        raise PolicyError(f'{path}: input shape mismatch: the spec declares an observation of '
                          f'shape (1, {obs_dim}) but the network takes {in_shape}')
    out_shape = list(outputs[0].shape)
    if out_shape and isinstance(out_shape[-1], int) and out_shape[-1] != act_dim:
        raise PolicyError(f'{path}: output shape mismatch: the spec declares an action of '
                          f'shape (1, {act_dim}) but the network returns {out_shape}')
    in_name, out_name = inputs[0].name, outputs[0].name
    rank = len(in_shape)

    def run(obs: Any, *images: Any) -> Any:
        x = np.asarray(obs, dtype=np.float32).reshape((1, obs_dim) if rank == 2 else (obs_dim,))
        feed = {in_name: x}
        if images:
            feed[img_name] = np.asarray(images[0], dtype=np.float32)
        return sess.run([out_name], feed)[0]

    def call(obs: FloatArray, *images: Any) -> FloatArray:
        return np.asarray(run(obs, *images), dtype=np.float64).reshape(act_dim)

    try:
        zeros = [np.zeros(obs_dim, np.float32)]
        if image_shape is not None:
            zeros.append(np.zeros((1, *image_shape), np.float32))
        probe = np.asarray(run(*zeros))
    except Exception as exc:  # noqa: BLE001
        raise PolicyError(f'{path}: the network does not run on '
                          f'{_shapes(obs_dim, image_shape)}: {str(exc).splitlines()[0]}'
                          ) from None
    if probe.size != act_dim:
        raise PolicyError(f'{path}: output shape mismatch: the spec declares an action of '
                          f'shape (1, {act_dim}) but the network returns {probe.shape}')
    return PolicyModel(path, 'onnx', obs_dim, act_dim, call, image_shape)


def load_model(path: str | Path, obs_dim: int, act_dim: int, threads: int = 1,
               image_shape: tuple[int, int, int] | None = None) -> PolicyModel:
    """Load ``path`` (``.pt`` TorchScript or ``.onnx``) and check its input/output sizes.

    ``image_shape`` (K*C, H, W): the network takes ``(obs_vector, image_stack)``.
    """
    p = Path(path)
    if not p.is_file():
        raise PolicyError(f"{p}: policy model file not found (the policy spec's model: key "
                          f'is relative to the spec file)')
    if p.suffix == '.pt':
        return _load_torchscript(p, obs_dim, act_dim, threads, image_shape)
    if p.suffix == '.onnx':
        return _load_onnx(p, obs_dim, act_dim, threads, image_shape)
    raise PolicyError(f'{p}: unknown model format {p.suffix!r}; use a TorchScript .pt or an '
                      f'ONNX .onnx file')
