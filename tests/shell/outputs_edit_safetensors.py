#!/usr/bin/env python3
"""tests/shell/outputs_edit_safetensors.py — the damaged and foreign files outputs_cli.sh feeds
to bareyolo, written with the standard library only (no numpy):

  set IN OUT TENSOR INDEX VALUE   IN with element INDEX of the F32 tensor TENSOR set to VALUE
                                  (a Python float: nan, inf, 1e30)
  to-f16 IN OUT                   IN with every F32 tensor stored as F16 (as a PyTorch .half()
                                  export writes it)
  batch OUT PIXEL                 a grads batch: images [1,3,64,64] of 0.5 but the first pixel,
                                  PIXEL; one target row (image 0, class 0, a centred box)
  dtypes FILE                     prints the file's tensor dtypes, sorted, one line
"""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_bytes,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_bytes])
    return header, bytearray(data[8 + header_bytes:])


def write(path, metadata, tensors):
    """tensors: [(name, dtype, shape, bytes)] in file order."""
    header = {"__metadata__": metadata} if metadata else {}
    offset = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors))


def in_order(header, body):
    entries = sorted((e["data_offsets"][0], name) for name, e in header.items()
                     if name != "__metadata__")
    for _, name in entries:
        e = header[name]
        begin, end = e["data_offsets"]
        yield name, e["dtype"], e["shape"], bytes(body[begin:end])


def main(command, *args):
    if command == "set":
        source, target, tensor, index, value = args
        header, body = read(source)
        begin = header[tensor]["data_offsets"][0] + 4 * int(index)
        body[begin:begin + 4] = struct.pack("<f", float(value))
        write(target, header.get("__metadata__"), list(in_order(header, body)))
    elif command == "to-f16":
        source, target = args
        header, body = read(source)
        tensors = []
        for name, dtype, shape, data in in_order(header, body):
            if dtype == "F32":
                values = struct.unpack("<%df" % (len(data) // 4), data)
                dtype, data = "F16", struct.pack("<%de" % len(values), *values)
            tensors.append((name, dtype, shape, data))
        write(target, header.get("__metadata__"), tensors)
    elif command == "batch":
        target, pixel = args
        images = [0.5] * (3 * 64 * 64)
        images[0] = float(pixel)
        write(target, None, [
            ("images", "F32", [1, 3, 64, 64], struct.pack("<%df" % len(images), *images)),
            ("targets", "F32", [1, 6], struct.pack("<6f", 0, 0, 0.5, 0.5, 0.3, 0.3))])
    elif command == "dtypes":
        header, _ = read(args[0])
        print(" ".join(sorted({e["dtype"] for n, e in header.items() if n != "__metadata__"})))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(*sys.argv[1:])
