"""Safe, pickle-free encoding of what a learner's function returned.

Records cross from the learner's (untrusted) kernel to the judge's clean process, so decoding
must never run code: only JSON with arrays as base64 bytes of a whitelisted dtype.
"""

from __future__ import annotations

import base64

import numpy as np

_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"}
MAX_DEPTH = 8


class EncodingError(ValueError):
    """The value (or record) is not one the protocol carries."""


def to_plain(value, depth: int = 0):
    """Turn a learner's return value into plain numpy / Python data (torch tensors included).

    ndarray subclasses become base ndarrays, so custom comparison methods are dropped.
    """
    if depth > MAX_DEPTH:
        raise EncodingError("output is nested too deeply")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (tuple, list)):
        return tuple(to_plain(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return {str(k): to_plain(v, depth + 1) for k, v in value.items()}
    if type(value).__module__.startswith("torch") and hasattr(value, "detach"):
        tensor = value.detach().cpu()
        if str(tensor.dtype) == "torch.bfloat16":
            tensor = tensor.float()
        value = tensor.numpy()
    if isinstance(value, np.ndarray):
        return np.array(value, copy=True, subok=False)
    raise EncodingError(f"cannot record a value of type {type(value).__name__}")


def encode(value):
    """Plain data -> JSON-able data."""
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and not np.isfinite(value):
            return {"__float__": repr(float(value))}  # np.float64's repr names its type
        return value
    if isinstance(value, tuple):
        return {"__tuple__": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"__dict__": {k: encode(v) for k, v in value.items()}}
    if isinstance(value, np.ndarray):
        if value.dtype.name not in _DTYPES:
            value = value.astype(np.float64)
        data = np.ascontiguousarray(value).tobytes()
        return {
            "__ndarray__": base64.b64encode(data).decode("ascii"),
            "dtype": value.dtype.name,
            "shape": list(value.shape),
        }
    raise EncodingError(f"cannot encode a value of type {type(value).__name__}")


def decode(data, depth: int = 0):
    """JSON-able data -> plain data. Raises EncodingError on anything unexpected."""
    if depth > MAX_DEPTH + 2:
        raise EncodingError("record is nested too deeply")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if not isinstance(data, dict):
        raise EncodingError(f"unexpected {type(data).__name__} in record")
    if "__float__" in data:
        text = data["__float__"]
        if text not in ("nan", "inf", "-inf"):
            raise EncodingError(f"bad float {text!r} in record")
        return float(text)
    if "__tuple__" in data:
        return tuple(decode(v, depth + 1) for v in _as_list(data["__tuple__"]))
    if "__dict__" in data:
        items = data["__dict__"]
        if not isinstance(items, dict):
            raise EncodingError("bad dict in record")
        return {str(k): decode(v, depth + 1) for k, v in items.items()}
    if "__ndarray__" in data:
        dtype, shape = data.get("dtype"), data.get("shape")
        if dtype not in _DTYPES:
            raise EncodingError(f"dtype {dtype!r} is not allowed in a record")
        if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
            raise EncodingError(f"bad shape {shape!r} in record")
        raw = base64.b64decode(data["__ndarray__"], validate=True)
        count = int(np.prod(shape, dtype=np.int64))
        if len(raw) != count * np.dtype(dtype).itemsize:
            raise EncodingError("array bytes do not match its shape and dtype")
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    raise EncodingError("unknown object in record")


def _as_list(value):
    if not isinstance(value, list):
        raise EncodingError("bad list in record")
    return value
