"""PNG and WebP samples next to JPEG, in shards written by Python's tarfile: pixels against PIL
decoding the same file and applying the same crop and resize, the image member chosen by the
image= preference, GPU-less determinism across thread counts, and bad files as named errors or
counted skips.

Tolerances: PIL's antialiased bilinear resize (box= the loader's crop) against the loader's
14-bit fixed-point one differs by at most 2 levels per channel (measured: 1, mean 0.13-0.22, for
every kind here, 0 for gray); lossless formats (PNG of any kind, lossless WebP) decode to exact
pixels, so the same picture saved as PNG and as lossless WebP gives byte-identical batches.
Lossy WebP: libwebp decodes only the crop's rectangle (plus a 2-pixel margin, so its chroma
upsampling at the rectangle's edge never reaches the crop) while PIL decodes the whole picture:
bound 4 levels and a mean under 0.5 (measured 1, 0.20). JPEG: PIL's libjpeg-turbo decode of the file
is the reference, at full scale here (the crop is under twice the output size), bound 2.
"""
import io
import math
import struct
import tarfile
import zlib

import numpy as np
import pytest

import ringfeed

PIL = pytest.importorskip("PIL.Image")

SIZE = 24
KW = dict(batch_size=4, size=SIZE, device="cpu", layout="NHWC", crop="center",
          shuffle=False, array_type="numpy")


def picture(w, h, seed=0, channels=3):
    """A smooth picture with some texture (lossy codecs keep it close), uint8 HxWxC."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = [(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 3) % 256,
            (x * 7 + y * 5) % 256]
    a = np.stack(base[:channels], axis=-1).astype(np.int32)
    a += rng.integers(-6, 7, size=a.shape)
    return np.clip(a, 0, 255).astype(np.uint8)


def _chunk(kind, data):
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2)]


def png_bytes(a, bit_depth=8, color_type=2, interlace=False, idat=None, ihdr_size=None):
    """A PNG written here (PIL writes neither 16-bit RGB nor interlaced files): a is HxWxC of
    uint8 or uint16 (big-endian on disk), filter 0 on every row."""
    h, w = a.shape[:2]
    raw = a.astype(">u2").tobytes() if bit_depth == 16 else a.astype(np.uint8).tobytes()
    row = len(raw) // h
    px = row // w

    def rows(sub):
        sh, sw = sub.shape[:2]
        b = sub.astype(">u2").tobytes() if bit_depth == 16 else sub.astype(np.uint8).tobytes()
        return b"".join(b"\0" + b[r * sw * px:(r + 1) * sw * px] for r in range(sh))

    if interlace:
        data = b"".join(rows(a[y0::dy, x0::dx]) for x0, y0, dx, dy in ADAM7
                        if a[y0::dy, x0::dx].size)
    else:
        data = rows(a)
    iw, ih = ihdr_size or (w, h)
    head = struct.pack(">IIBBBBB", iw, ih, bit_depth, color_type, 0, 0, 1 if interlace else 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", head)
            + _chunk(b"IDAT", idat if idat is not None else zlib.compress(data, 9))
            + _chunk(b"IEND", b""))


def pil_bytes(im, fmt, **kw):
    out = io.BytesIO()
    im.save(out, fmt, **kw)
    return out.getvalue()


def center_box(w, h, size=SIZE):
    """crop.c's center_box: Resize(shorter -> size*256/224) then CenterCrop(size), on the
    original image."""
    r = size * 256 // 224
    nw, nh = (r, math.floor(r * h / w)) if w <= h else (math.floor(r * w / h), r)
    cw, ch = min(size, nw), min(size, nh)
    left, top = round((nw - cw) / 2.0), round((nh - ch) / 2.0)
    sx, sy = w / nw, h / nh
    return (left * sx, top * sy, (left + cw) * sx, (top + ch) * sy)


def reference(rgb):
    """PIL's resize of the same crop: what the loader must give, within the tolerance."""
    im = PIL.fromarray(rgb, "RGB")
    box = center_box(*im.size)
    return np.asarray(im.resize((SIZE, SIZE), PIL.BILINEAR, box=box))


def write_shard(path, samples, fmt=tarfile.PAX_FORMAT):
    """samples: [(key, {ext: bytes})], members in the dict's order, plus KEY.cls."""
    with tarfile.open(path, "w", format=fmt) as tf:
        for i, (key, members) in enumerate(samples):
            for ext, data in list(members.items()) + [("cls", str(i).encode())]:
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
    return str(path)


def collect(path, **kw):
    out = {}
    opts = dict(KW, **kw)
    for b in ringfeed.Loader(path, **opts):
        for k, img, pad in zip(b.keys, b.images, b.is_padding):
            if not pad:
                out[k] = np.array(img)
    return out


def kinds():
    """(key, file bytes, the RGB PIL or numpy says the file holds, lossy)."""
    rgb = picture(67, 45, 1)
    rgba = picture(53, 71, 2, channels=4)
    gray = picture(40, 60, 3)[..., 0]
    wide16 = (picture(58, 37, 4).astype(np.uint16) * 257 + 91)
    pal = PIL.fromarray(picture(61, 50, 5)).quantize(64)
    out = [
        ("png8", pil_bytes(PIL.fromarray(rgb), "PNG"), rgb, False),
        ("png16", png_bytes(wide16, 16, 2), (wide16 >> 8).astype(np.uint8), False),
        ("palette", pil_bytes(pal, "PNG"), np.asarray(pal.convert("RGB")), False),
        ("gray", pil_bytes(PIL.fromarray(gray, "L"), "PNG"), np.repeat(gray[..., None], 3, 2),
         False),
        ("grayalpha", png_bytes(np.stack([gray, 255 - gray], -1), 8, 4),
         np.repeat(gray[..., None], 3, 2), False),
        ("rgba", pil_bytes(PIL.fromarray(rgba, "RGBA"), "PNG"), rgba[..., :3], False),
        ("interlaced", png_bytes(rgb, 8, 2, interlace=True), rgb, False),
        ("webplossless", pil_bytes(PIL.fromarray(rgb), "WEBP", lossless=True), rgb, False),
        ("webplossy", pil_bytes(PIL.fromarray(rgb), "WEBP", quality=90), None, True),
        ("jpeg", pil_bytes(PIL.fromarray(rgb), "JPEG", quality=95), None, True),
    ]
    return out


EXT = {"png": "png", "webp": "webp", "jpeg": "jpg"}


def ext_of(key):
    return "webp" if key.startswith("webp") else "jpg" if key == "jpeg" else "png"


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    d = tmp_path_factory.mktemp("formats")
    ks = kinds()
    path = write_shard(d / "mixed.tar", [(k, {ext_of(k): data}) for k, data, _, _ in ks])
    return path, ks


def test_every_kind_matches_pil(mixed):
    path, ks = mixed
    got = collect(path)
    assert sorted(got) == sorted(k for k, _, _, _ in ks)
    for key, data, rgb, lossy in ks:
        if rgb is None:  # lossy: PIL's own decode of the file is the reference
            rgb = np.asarray(PIL.open(io.BytesIO(data)).convert("RGB"))
        want = reference(rgb)
        diff = np.abs(got[key].astype(int) - want.astype(int))
        if key == "webplossy":
            assert diff.max() <= 4 and diff.mean() < 0.5, (key, diff.max(), diff.mean())
        else:
            assert diff.max() <= 2, (key, diff.max())


def center_box_hw(w, h, oh, ow):
    """crop.c's center_box for an oh x ow output: Resize(R) with R = round(max(oh, ow) x
    256 / 224) as the config resolves resize_shorter, then CenterCrop((oh, ow))."""
    r = (max(oh, ow) * 256 + 112) // 224
    nw, nh = (r, math.floor(r * h / w)) if w <= h else (math.floor(r * w / h), r)
    cw, ch = min(ow, nw), min(oh, nh)
    left, top = round((nw - cw) / 2.0), round((nh - ch) / 2.0)
    sx, sy = w / nw, h / nh
    return (left * sx, top * sy, (left + cw) * sx, (top + ch) * sy)


@pytest.mark.parametrize("hw", [(96, 160), (160, 96)])
def test_non_square_png_and_webp_match_pil(tmp_path, hw):
    """size=(height, width): PNG (8- and 16-bit) and WebP (lossless, lossy) samples against
    PIL's resize of the same center crop, with the square cases' bounds; the batch's images
    are height x width."""
    oh, ow = hw
    rgb = picture(301, 203, 50)
    wide16 = rgb.astype(np.uint16) * 257
    im = PIL.fromarray(rgb)
    lossy = pil_bytes(im, "WEBP", quality=90)
    ks = [("png8", "png", pil_bytes(im, "PNG"), rgb),
          ("png16", "png", png_bytes(wide16, 16, 2), rgb),
          ("webplossless", "webp", pil_bytes(im, "WEBP", lossless=True), rgb),
          ("webplossy", "webp", lossy, np.asarray(PIL.open(io.BytesIO(lossy)).convert("RGB")))]
    path = write_shard(tmp_path / "ns.tar", [(k, {ext: data}) for k, ext, data, _ in ks])
    got = collect(path, size=hw)
    assert sorted(got) == sorted(k for k, _, _, _ in ks)
    for key, _, _, ref in ks:
        assert got[key].shape == (oh, ow, 3), (key, got[key].shape)
        want = np.asarray(PIL.fromarray(ref).resize((ow, oh), PIL.BILINEAR,
                                                     box=center_box_hw(301, 203, oh, ow)))
        diff = np.abs(got[key].astype(int) - want.astype(int))
        if key == "webplossy":
            # every pixel, edges included: the decoded rectangle reaches 2 pixels past the
            # crop (webp_decode.c), so libwebp's upsampling at its edge never shows (without
            # that margin: up to 27 levels on column 0 at 96x160)
            assert diff.max() <= 4 and diff.mean() < 0.5, (key, diff.max(), diff.mean())
        else:
            assert diff.max() <= 2, (key, diff.max())
    assert np.array_equal(got["png8"], got["png16"])
    assert np.array_equal(got["png8"], got["webplossless"])


def test_lossless_png_and_webp_give_identical_batches(tmp_path):
    """The same picture as PNG and as lossless WebP: byte-identical samples under random crops
    and flips (the crop is the seed's, the resize the same code)."""
    samples = []
    for i in range(6):
        im = PIL.fromarray(picture(90 + 7 * i, 70 + 5 * i, 10 + i))
        samples.append((f"p{i}", pil_bytes(im, "PNG"), pil_bytes(im, "WEBP", lossless=True)))
    a = write_shard(tmp_path / "png.tar", [(k, {"png": p}) for k, p, _ in samples])
    b = write_shard(tmp_path / "webp.tar", [(k, {"webp": w}) for k, _, w in samples])
    for crop in ("random", "center"):
        pa, pb = collect(a, crop=crop, seed=3), collect(b, crop=crop, seed=3)
        assert sorted(pa) == sorted(pb) == [f"p{i}" for i in range(6)]
        for k in pa:
            assert np.array_equal(pa[k], pb[k]), (crop, k)


def test_same_pixels_at_any_thread_count(mixed):
    path, _ = mixed
    runs = [collect(path, crop="random", seed=7, decode_threads=t) for t in (1, 2, 3)]
    for r in runs[1:]:
        assert sorted(r) == sorted(runs[0])
        for k in r:
            assert np.array_equal(r[k], runs[0][k]), k


def test_image_preference_chooses_the_member(tmp_path):
    """A sample holding KEY.png and KEY.jpg (different pictures): the default takes the jpg,
    image=("png", "jpg") the png, and extensions match in any case."""
    a, b = picture(50, 50, 20), picture(50, 50, 21)[::-1].copy()
    path = write_shard(tmp_path / "both.tar", [
        ("s", {"PNG": pil_bytes(PIL.fromarray(a), "PNG"),
               "jpg": pil_bytes(PIL.fromarray(b), "JPEG", quality=95)})])
    jpg = collect(path)["s"]
    png = collect(path, image=("png", "jpg"))["s"]
    assert np.abs(png.astype(int) - reference(a).astype(int)).max() <= 2
    assert np.abs(jpg.astype(int) - reference(b).astype(int)).mean() < 3
    assert np.abs(jpg.astype(int) - png.astype(int)).mean() > 20
    with pytest.raises(ringfeed.RingfeedError) as ei:
        collect(path, image="webp")
    assert "has no image member (webp)" in str(ei.value) and "sample s at offset 0" in str(ei.value)
    with pytest.raises(ValueError):
        ringfeed.Loader(path, image=("jp.g",), **KW)


def test_image_preference_with_fields_and_json_label(tmp_path):
    """image=, label="json:PATH" and fields= chosen in one walk over each sample's members:
    KEY.PNG is the image under image=("png", "jpg") while fields take KEY.txt and the
    not-chosen KEY.jpg byte for byte, and the label comes from KEY.json."""
    a, b = picture(50, 50, 60), picture(50, 50, 61)[::-1].copy()
    jpg = pil_bytes(PIL.fromarray(b), "JPEG", quality=95)
    samples = [(f"s{i}", {"jpg": jpg, "PNG": pil_bytes(PIL.fromarray(a), "PNG"),
                          "json": b'{"c": %d}' % (10 + i), "txt": b"caption %d" % i})
               for i in range(3)]
    path = write_shard(tmp_path / "both.tar", samples)
    opts = dict(KW, image=("png", "jpg"), label="json:c", fields=("txt", "jpg"))
    seen = 0
    for bt in ringfeed.Loader(path, **opts):
        for i, (k, img, pad) in enumerate(zip(bt.keys, bt.images, bt.is_padding)):
            if pad:
                continue
            n = int(k[1:])
            assert np.abs(np.array(img).astype(int) - reference(a).astype(int)).max() <= 2, k
            assert int(bt.labels[i]) == 10 + n
            assert bt.fields["txt"][i] == b"caption %d" % n and bt.fields["jpg"][i] == jpg
            seen += 1
    assert seen == 3


def test_extension_does_not_choose_the_decoder(tmp_path):
    """A .png member holding a JPEG is decoded as the JPEG it is (the magic bytes decide)."""
    rgb = picture(64, 48, 30)
    jpeg = pil_bytes(PIL.fromarray(rgb), "JPEG", quality=95)
    a = collect(write_shard(tmp_path / "a.tar", [("k", {"png": jpeg})]))["k"]
    b = collect(write_shard(tmp_path / "b.tar", [("k", {"jpg": jpeg})]))["k"]
    assert np.array_equal(a, b)


def bad_files():
    rgb = picture(64, 48, 40)
    good_png = png_bytes(rgb)
    bad_crc = bytearray(good_png)
    bad_crc[40] ^= 0xFF  # inside the IDAT data: its CRC no longer matches
    webp = pil_bytes(PIL.fromarray(rgb), "WEBP", quality=80)
    # 40000x40000 of 8-bit gray: a few KB of zlib holding 1.6 GB of zero rows
    bomb_rows = zlib.compress(b"\0" * (40001 * 200), 9)
    return [
        ("truncated", good_png[:len(good_png) // 2], "corrupt", "PNG"),
        ("badcrc", bytes(bad_crc), "corrupt", "PNG"),
        ("bomb", png_bytes(np.zeros((1, 1, 3), np.uint8), ihdr_size=(60000, 60000)),
         "too_large", "PNG is 60000x60000: over the limit"),
        ("zlibbomb", png_bytes(np.zeros((1, 1), np.uint8), 8, 0, idat=bomb_rows,
                               ihdr_size=(40000, 40000)), "too_large", "PNG is 40000x40000"),
        ("webptrunc", webp[:len(webp) // 2], "corrupt", "WebP"),
        ("notimage", b"GIF89a" + bytes(100), "not_jpeg", "not an image"),
    ]


@pytest.mark.parametrize("key,data,reason,says", bad_files())
def test_bad_files_are_named_errors_or_counted_skips(tmp_path, key, data, reason, says):
    good = pil_bytes(PIL.fromarray(picture(40, 40, 41)), "PNG")
    samples = [("a", {"png": good}), (key, {"png": data}), ("b", {"png": good})]
    path = write_shard(tmp_path / "bad.tar", samples, fmt=tarfile.GNU_FORMAT)
    with tarfile.open(path) as tf:
        off = next(m.offset for m in tf if m.name == f"{key}.png")
    with pytest.raises(ringfeed.RingfeedError) as ei:
        collect(path)
    msg = str(ei.value)
    assert f"member {key}.png at offset {off}" in msg and path in msg and says in msg, msg
    with ringfeed.Loader(path, on_error="skip", **KW) as ld:
        keys = [k for b in ld for k, p in zip(b.keys, b.is_padding) if not p]
        es = ld.epoch_stats()  # this epoch's: stats() may hold the next one's prefetch
    assert sorted(keys) == ["a", "b"]
    assert es["final"] and es["skipped"] == 1
    assert es["skipped_by_reason"][reason] == 1
