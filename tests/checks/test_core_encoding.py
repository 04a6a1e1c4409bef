"""The record encoding carries plain data across and refuses anything that is not plain data."""

import json

import numpy as np
import pytest
import torch

from mhalib.checks.encoding import EncodingError, decode, encode, to_plain


def roundtrip(value):
    return decode(json.loads(json.dumps(encode(to_plain(value)))))


def test_arrays_tuples_dicts_survive_a_json_roundtrip():
    value = (np.arange(6, dtype=np.float32).reshape(2, 3), {"total": 12, "x": 1.5}, [True, None])
    out = roundtrip(value)
    assert out[0].dtype == np.float32 and out[0].shape == (2, 3)
    np.testing.assert_array_equal(out[0], value[0])
    assert out[1] == {"total": 12, "x": 1.5}
    assert out[2] == (True, None)


def test_torch_tensors_become_numpy_and_bfloat16_becomes_float32():
    out = roundtrip(torch.ones(2, 2, dtype=torch.bfloat16))
    assert isinstance(out, np.ndarray) and out.dtype == np.float32


def test_nan_and_inf_floats_roundtrip():
    out = roundtrip((float("nan"), float("inf"), -float("inf")))
    assert np.isnan(out[0]) and out[1] == np.inf and out[2] == -np.inf


def test_ndarray_subclass_with_lying_comparisons_is_stripped():
    class AlwaysEqual(np.ndarray):
        def __eq__(self, other):
            return True

    sneaky = np.zeros(3).view(AlwaysEqual)
    plain = to_plain(sneaky)
    assert type(plain) is np.ndarray


@pytest.mark.parametrize("bad", [
    {"__ndarray__": "AAAA", "dtype": "object", "shape": [1]},
    {"__ndarray__": "AAAA", "dtype": "float64", "shape": [100]},
    {"__ndarray__": "not base64!", "dtype": "float64", "shape": [1]},
    {"__ndarray__": "", "dtype": "float64", "shape": [-1]},
    {"__float__": "1e308*10"},
    {"__tuple__": "abc"},
    {"__pickle__": "gASVAAAA"},
    [1, 2, 3],
])
def test_malformed_records_raise_encoding_error(bad):
    with pytest.raises((EncodingError, ValueError)):
        decode(bad)


def test_unrecordable_values_are_refused():
    with pytest.raises(EncodingError):
        to_plain(object())
    with pytest.raises(EncodingError):
        to_plain(lambda: 0)
