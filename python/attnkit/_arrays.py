"""Framework-neutral helpers: which library an array comes from, outputs allocated like an input,
and the CUDA stream a call is enqueued on."""

import sys

_DTYPES = ("float32", "float16", "bfloat16", "int32", "float8_e4m3fn")


def is_fp8(x):
    """Whether array x holds e4m3 values (torch.float8_e4m3fn, ml_dtypes' float8_e4m3fn)."""
    return "float8_e4m3" in str(x.dtype)


def is_torch(x):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def _family(x):
    return type(x).__module__.split(".", 1)[0]


_FP8_DLPACK = None  # whether this torch exports float8_e4m3fn tensors through DLPack


def torch_exports_fp8():
    global _FP8_DLPACK
    if _FP8_DLPACK is None:
        import torch

        try:
            torch.empty(1, dtype=torch.float8_e4m3fn).__dlpack__()
            _FP8_DLPACK = True
        except (BufferError, RuntimeError, TypeError):
            _FP8_DLPACK = False
    return _FP8_DLPACK


def fp8_bytes(x):
    """x, or for a torch float8_e4m3fn tensor this torch cannot export through DLPack, its uint8
    view: attnkit reads uint8 arrays as e4m3 bytes."""
    if x is not None and is_torch(x) and x.dtype.itemsize == 1 and not torch_exports_fp8():
        import torch

        if x.dtype == torch.float8_e4m3fn:
            return x.view(torch.uint8)
    return x


def dtype_of(ref, name):
    """The dtype called `name` ('float32', ...) in the library of array `ref`; None: ref's own."""
    if name is None:
        return ref.dtype
    if name not in _DTYPES:
        raise ValueError(f"dtype '{name}' is not one of {_DTYPES}")
    if is_torch(ref):
        import torch

        return getattr(torch, name)
    family = _family(ref)
    if family == "cupy":
        import cupy

        return cupy.dtype(name)
    import numpy

    if name in ("bfloat16", "float8_e4m3fn"):
        raise ValueError(f"numpy has no {name}: pass the output array, or use torch tensors")
    return numpy.dtype(name)


def empty(ref, shape, dtype=None):
    """An uninitialised array of `shape` on ref's device, from ref's library; dtype: a name from
    _DTYPES, or None for ref's dtype."""
    shape = tuple(int(s) for s in shape)
    if is_torch(ref):
        import torch

        dt = ref.dtype if dtype is None else getattr(torch, dtype)
        return torch.empty(shape, dtype=dt, device=ref.device)
    family = _family(ref)
    if family == "numpy":
        import numpy

        return numpy.empty(shape, dtype=dtype_of(ref, dtype))
    if family == "cupy":
        import cupy

        with ref.device:
            return cupy.empty(shape, dtype=dtype_of(ref, dtype))
    if family in ("jax", "jaxlib"):
        raise ValueError(
            "JAX arrays are immutable: pass the outputs (out=, lse=, ...) as arrays of a library "
            "that can be written (torch, CuPy, numpy)"
        )
    namespace = getattr(ref, "__array_namespace__", None)
    if namespace is None:
        raise ValueError(f"cannot allocate an output like a {type(ref).__name__}: pass out=")
    xp = namespace()
    dt = ref.dtype if dtype is None else getattr(xp, dtype)
    return xp.empty(shape, dtype=dt, device=ref.device)


def stream_of(ref, stream):
    """The cudaStream_t (an int) for a call whose first array is `ref`. An explicit `stream` wins: an
    int, a torch.cuda.Stream or a cupy Stream. Otherwise torch's current stream for torch CUDA
    tensors, CuPy's current stream for CuPy arrays, else 0 (the legacy default stream)."""
    if stream is not None:
        if isinstance(stream, int):
            return stream
        for attr in ("cuda_stream", "ptr"):
            handle = getattr(stream, attr, None)
            if handle is not None:
                return int(handle)
        raise ValueError(f"stream: expected an int, a torch.cuda.Stream or a cupy Stream, got {type(stream).__name__}")
    if is_torch(ref):
        if ref.is_cuda:
            import torch

            return torch._C._cuda_getCurrentRawStream(ref.device.index)
        return 0
    if _family(ref) == "cupy":
        import cupy

        return cupy.cuda.get_current_stream().ptr
    return 0
