"""mhalib.validate: one wording for plain ints, numpy arrays and torch tensors."""

import numpy as np
import pytest
import torch

from mhalib import validate


def test_ints_from_numpy_and_python_read_the_same():
    assert validate.positive_int("n", np.int64(3)) == 3
    with pytest.raises(TypeError, match=r"n must be an int, got n=2.5 \(float\)"):
        validate.positive_int("n", 2.5)
    with pytest.raises(ValueError, match="n must be positive, got n=0"):
        validate.positive_int("n", 0)


def test_dtype_and_device_mismatches_are_both_type_errors():
    a = torch.zeros(2)
    with pytest.raises(TypeError, match=r"b.dtype=torch.float64 does not match a.dtype"):
        validate.same_dtype_and_device(a=a, b=torch.zeros(2, dtype=torch.float64))
    with pytest.raises(TypeError, match=r"b.device=meta does not match a.device=cpu"):
        validate.same_dtype_and_device(a=a, b=torch.zeros(2, device="meta"))


def test_numpy_arrays_name_the_argument():
    assert validate.as_float_array("x", [1, 2]).dtype == np.float64
    assert validate.as_float_array("x", np.ones(2, np.float32)).dtype == np.float32
    with pytest.raises(TypeError, match="x must be a numeric array, got x.dtype=<U1"):
        validate.as_float_array("x", ["a"])
    with pytest.raises(ValueError, match=r"x must have at least 2 dimensions, got x.shape=\(3,\)"):
        validate.require_ndim("x", np.ones(3), 2)
