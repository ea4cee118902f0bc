"""tests/shell/jpeg_size.py — a JPEG's (width, height), read from its start-of-frame segment (no
imaging library at test time); imported by the predict checks beside it."""
import struct
import sys


def jpeg_size(path):
    """(width, height) from a JPEG's start-of-frame segment."""
    data = open(path, "rb").read()
    at = 2
    while at + 9 <= len(data):
        if data[at] != 0xFF:
            sys.exit(f"FAIL: {path} is not a JPEG stream at byte {at}")
        marker, length = data[at + 1], struct.unpack(">H", data[at + 2:at + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            height, width = struct.unpack(">HH", data[at + 5:at + 9])
            return width, height
        at += 2 + length
    sys.exit(f"FAIL: no frame header in {path}")
