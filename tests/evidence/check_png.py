#!/usr/bin/env python3
"""Exit 0 when a PNG (8-bit RGB/RGBA, non-interlaced, as Chromium writes them) holds more than one
colour, and a visible share of non-background pixels: a blank page fails. Standard library only."""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, hdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = hdr
    assert depth == 8 and ctype in (2, 6) and interlace == 0, f"unsupported PNG {hdr}"
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    out = []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out.append(bytes(line))
        prev = line
    return w, h, bpp, out


w, h, bpp, rows = pixels(sys.argv[1])
counts = {}
for line in rows[::4]:
    for x in range(0, w * bpp, bpp * 4):
        px = line[x:x + 3]
        counts[px] = counts.get(px, 0) + 1
total = sum(counts.values())
background = max(counts.values())
print(f"screenshot {w}x{h}: {len(counts)} colours, {100 * (total - background) / total:.1f}% non-background")
if len(counts) < 2 or total - background < total * 0.01:
    print("FAIL: the screenshot is blank")
    sys.exit(1)
