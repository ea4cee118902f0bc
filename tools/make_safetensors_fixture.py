#!/usr/bin/env python3
"""Regenerates the safetensors fixture embedded in tests/unit/safetensors.cpp.

The fixture is a small file written by the reference implementation (the `safetensors`
package: `pip install safetensors numpy`). The C++ test checks that our reader gets these
tensors back and that our writer, given the same tensors in the same order, produces the
same bytes.

  python3 tools/make_safetensors_fixture.py            print the C++ byte array
  python3 tools/make_safetensors_fixture.py --load F   load F with the reference reader and
                                                       print its tensors and metadata
"""
import argparse

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save


def fixture_tensors():
    # One metadata key only: the reference writer emits several keys in hash order.
    metadata = {"bareyolo": '{"epoch": 3}'}
    tensors = {
        "model.0.conv.weight": np.array([0.5, -1.25, 2.0, 3.75], np.float32).reshape(2, 1, 1, 2),
        "model.0.bn.num_batches_tracked": np.array(7, np.int64),
        "model.0.bn.running_var": np.array([0.25, 1.0, 1e-3], np.float64),
        "empty": np.zeros((0, 3), np.float32),
        "half": np.array([1.5, -2.0], np.float16),
        "mask": np.array([1, 0, 255], np.uint8),
    }
    return tensors, metadata


def print_cpp_array(data: bytes):
    print(f"// {len(data)} bytes, from tools/make_safetensors_fixture.py")
    print("const std::vector<uint8_t> kPythonFixture = {")
    for start in range(0, len(data), 16):
        print("    " + ", ".join(f"0x{b:02x}" for b in data[start:start + 16]) + ",")
    print("};")


def print_file(path: str):
    with safe_open(path, framework="numpy") as f:
        print("metadata:", f.metadata())
        for name in f.keys():
            value = f.get_tensor(name)
            print(f"{name}: {value.dtype} {list(value.shape)} {value.ravel().tolist()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--load", metavar="FILE", help="print a file read by the reference reader")
    args = parser.parse_args()
    if args.load:
        print_file(args.load)
    else:
        tensors, metadata = fixture_tensors()
        print_cpp_array(save(tensors, metadata=metadata))


if __name__ == "__main__":
    main()
