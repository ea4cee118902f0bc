#!/usr/bin/python3
"""tools/make_photo_fixture.py — the reference decode of tests/fixtures/photos/*.jpg.

Decodes each photograph with Pillow (Debian's python3-pil, i.e. libjpeg-turbo: a decoder
independent of bareyolo's stb_image) and writes tests/fixtures/photos/reference.json: per
photo its size and the mean of every 16x16 block of each RGB channel. tests/unit/photos.cpp
compares bareyolo's decode against it; a mean of a block absorbs the rounding differences
of two correct JPEG decoders (IDCT, chroma upsampling) but not a wrong channel order, a
flipped or shifted image, a mis-sampled chroma plane or a lost row.

    /usr/bin/python3 tools/make_photo_fixture.py
"""
import json
import pathlib

from PIL import Image

BLOCK = 16
folder = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "photos"
reference = {}
for path in sorted(folder.glob("*.jpg")):
    try:
        image = Image.open(path)
        image.load()
    except OSError as error:
        reference[path.name] = {"error": str(error)}
        continue
    image = image.convert("RGB")
    width, height = image.size
    pixels = image.load()
    means = []
    for by in range(height // BLOCK):
        for bx in range(width // BLOCK):
            sums = [0, 0, 0]
            for y in range(by * BLOCK, (by + 1) * BLOCK):
                for x in range(bx * BLOCK, (bx + 1) * BLOCK):
                    for c, value in enumerate(pixels[x, y]):
                        sums[c] += value
            means.extend(round(s / (BLOCK * BLOCK), 1) for s in sums)
    reference[path.name] = {"width": width, "height": height, "block": BLOCK, "means": means}
(folder / "reference.json").write_text(json.dumps(reference, separators=(",", ":")) + "\n")
print("wrote", folder / "reference.json", "for", ", ".join(reference))
