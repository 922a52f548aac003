"""ringfeed.Loader and ringfeed.TokenLoader: the Python face of rf_loader.

Batch lifetime (the one rule to know; docs/python.md says it at length):

  A batch's `.images` (and a token batch's `.tokens`, `.x`, `.y`) are zero-copy views of the
  loader's memory: device memory from the loader's stream-ordered pool on CUDA, the pinned ring
  slot on the host. They stay valid until this loader is asked for the next batch (the next
  `next()` on any of its iterators, including the one that ends the epoch), `set_epoch()`,
  `load_state_dict()` or `close()`. At that point the batch goes back to the ring with
  rf_loader_release(..., stream=torch.cuda.current_stream()): device memory is recycled only
  after the work already queued on that stream, so the usual loop

      for images, labels in loader:
          loss = model(images).loss(labels); loss.backward(); opt.step()

  never reads a recycled buffer, without any synchronization. `.labels`, `.keys` and the other
  metadata are owned copies and stay valid forever. A later batch at the same memory gets the
  same array object back (no new tensor each step on the training loop's thread), so an array
  held past its release may show another batch.

  To hold a batch longer, call `batch.keep()`: it is then returned when you call
  `batch.release()`, or automatically once the batch and every array made from it are garbage.
  The ring is a fixed set of `prefetch_depth` slots reused in order, so a kept batch must be
  released within `prefetch_depth` batches: the loader raises RuntimeError (never deadlocks) if
  the next batch needs the slot of a batch that is still kept. To keep data indefinitely, copy
  it (`images.clone()`), or create the loader with `copy=True` (every batch then owns its
  memory, at the cost of one device/host copy per batch).

  close() (and load_state_dict(), for the C loader it replaces) stops the loader's threads
  but frees its memory only once no array or tensor over it is left: reading one after
  close() never touches freed memory, even when close() came from another thread.
"""
import ctypes

from . import _arrays, _mix, _stats, _transform
from . import _capi as C
from ._args import U32_MAX, _choice, _field_int, _other_settings, _settings_doc
from ._base import _LoaderBase
from ._batch import (_BatchBase, _meta_property, copy_annotations, copy_boxes,
                     copy_letterbox, copy_masks, copy_multi_labels, copy_sizes,
                     copy_view_boxes, copy_view_targets, native_views, targets_of,
                     view_arrays, bucket_array, bucket_of)
from ._config import (_CROPS, _IMAGE_DTYPES, _LAYOUTS, _ON_ERROR, _SCHEDULES, _TOKEN_DTYPES,
                      _cache_fields, _common_fields, _dct_scaling, _default_decode_threads,
                      _dtype_name, _field_names, _find_nvjpeg, _image_exts, _label_fields,
                      _multi_crop_text, _remote_fields, _size_buckets_text, _size_fields,
                      _source_kind)

# This module holds the public classes; the machinery under them lives by concern in _config
# (arguments as rf_config fields), _batch (leases, a batch's lazily copied metadata), _base (the
# C loader's lifetime, calls, leases and iteration) and _state (epochs, state_dict and
# load_state_dict, stats, config). Their names stay importable from here, as they were.
from ._args import U64_MAX, _path_bytes, _uint  # noqa: F401
from ._base import _EpochIterator  # noqa: F401
from ._batch import _META, _Lease, _copy_fields, _copy_keys, _host_meta  # noqa: F401
from ._capi import LoaderTimeout, RingfeedError  # noqa: F401
from ._config import _ARRAY_TYPES, _IO_ENGINES, _SOURCES, _env_int, _parse_device  # noqa: F401
from ._state import STATE_VERSION  # noqa: F401

IMAGENET_MEAN = (123.675, 116.28, 103.53)  # pixel units (0..255), RGB
IMAGENET_STD = (58.395, 57.12, 57.375)

# Names of rf_stats.skipped_by_reason entries (enum rf_skip_reason), read from the library.
SKIP_REASONS = _stats.SKIP_REASONS
# Names of rf_stats.recovered_by_kind entries (enum rf_recovered, rf_recovered_name): what
# libjpeg recovered from in files delivered with every pixel.
RECOVERED_KINDS = ("header_bytes", "jfif_version", "icc")


class Batch(_BatchBase):
    """A batch of images: `.images` (N,3,H,W) or (N,H,W,3), `.labels` int64 (N,),
    `.crop_boxes` int32 (N, 4) and `.flips` bool (N,) (each sample's crop box x, y, w, h in its
    source image's pixels, and whether it was flipped; on the host, numpy or torch as the
    labels), `.letterbox` float32 (N, 4) (scale_x, scale_y, pad_x, pad_y: a source point x
    lands at x * scale_x + pad_x of the output before the flip; every crop mode), `.sizes`
    int32 (N, 2) with crop="native" or size_buckets (each image's height, width; else None)
    and `.native_images()` (each image at its own size, views of `.images`), `.bucket` with
    size_buckets ((index, height, width) of the batch's bucket, which `.images` and `.masks`
    have; else None), `.multi_labels` and
    `.label_counts` with multi_label (uint8 (N, num_classes) multi-hot or int32 (N, max_labels)
    padded with -1, and int32 (N,); None when off),
    `.masks` with mask= (uint8 or int32 (N, H, W) on the host, each sample's mask with its
    image's crop, nearest resize and flip; None when off), `.keys`
    list of str, `.fields` {name: list of N bytes} for the loader's `fields`
    ({} when none), and `.epoch`, `.index`, `.sample_ids`, `.positions`, `.is_padding`.
    With boxes (box_json_path or box_ext): `.boxes` float32 (N, max_boxes, 4) xyxy in output
    pixels, `.box_classes` int32 (N, max_boxes) (-1 padded), `.box_counts` int32 (N,); with
    keypoints (keypoint_json_path): `.points` float32 (N, max_points, 3) x, y, v and
    `.point_counts` int32 (N,); None when off. `targets()` lists each sample's valid ones.
    With multi_crop, `.views` is the list of the sample's views, view k (N, H_k, W_k, 3) or
    (N, 3, H_k, W_k) in the loader's dtype and device (zero-copy slices of `.images`, which
    is then (N, row): every sample's views one after another), with `.view_boxes`,
    `.view_flips` and `.view_letterbox` (lists, per view, like `.crop_boxes`, `.flips` and
    `.letterbox`, which are view 0's);
    with masks `.view_masks` (per view, (N, H_k, W_k) with that view's crop, nearest resize
    and flip) and with boxes or keypoints `view_targets(k)` (`targets()` of view k, mapped
    through that view's crop and flip); `.masks`, `.boxes` ... `targets()` are then view 0's.
    Without it `.views`, `.view_boxes`, `.view_flips`, `.view_letterbox` and `.view_masks` are
    [] (`.view_masks` also without masks).
    Unpacks as `images, labels`."""

    __slots__ = ("images", "labels", "crop_boxes", "flips", "letterbox", "sizes", "bucket",
                 "multi_labels", "label_counts", "boxes", "box_classes", "box_counts", "points",
                 "point_counts", "masks", "views", "view_boxes", "view_flips", "view_letterbox",
                 "view_masks", "_view_annots", "_keys", "_fields", "_nchw")
    _LAZY = _BatchBase._LAZY + ("_keys", "_fields")

    keys = _meta_property("_keys")
    fields = _meta_property("_fields")

    def __iter__(self):
        return iter((self.images, self.labels))

    def native_images(self):
        """crop="native": a list of each sample's image at its own size (`.sizes`), views of
        `.images` (valid as long as it is), (h, w, 3) for NHWC or (3, h, w) for NCHW."""
        if self.sizes is None:
            raise ValueError("native_images() needs crop='native' or size_buckets")
        return native_views(self.images, self.sizes, self._nchw)

    def targets(self):
        """Each sample's valid boxes and keypoints, as torchvision's detection models take
        them: a list of N dicts with "boxes" (k, 4) float32 xyxy in output pixels and "labels"
        (k,) int64 (the class ids, -1 where none was given) when the loader reads boxes, and
        "keypoints" (p, 3) float32 x, y, v when it reads keypoints; numpy or torch as the
        batch's arrays. A blank padding sample's are empty. With multi_crop: view 0's."""
        return targets_of(self.boxes, self.box_classes, self.box_counts, self.points,
                          self.point_counts, len(self.is_padding))

    def view_targets(self, k):
        """multi_crop: targets() of view k, its boxes and keypoints mapped through the view's
        own crop, resize and flip (`.view_boxes[k]`, `.view_flips[k]`), in its output pixels."""
        if not 0 <= k < len(self._view_annots):
            raise IndexError(f"view_targets({k}): the batch has {len(self._view_annots)} views")
        return targets_of(*self._view_annots[k], len(self.is_padding))

    def __repr__(self):
        return (f"Batch(epoch={self.epoch}, index={self.index}, count={self.count}, "
                f"images={tuple(self.images.shape)} {self.images.dtype})")


class TokenBatch(_BatchBase):
    """A batch of token windows: `.tokens` (N, L+1), `.x` = tokens[:, :-1], `.y` =
    tokens[:, 1:] (views). Unpacks as `x, y`."""

    __slots__ = ("tokens", "x", "y")

    def __iter__(self):
        return iter((self.x, self.y))

    def __repr__(self):
        return (f"TokenBatch(epoch={self.epoch}, index={self.index}, count={self.count}, "
                f"tokens={tuple(self.tokens.shape)} {self.tokens.dtype})")

class Loader(_LoaderBase):
    """Images and labels from WebDataset tar shards.

    Loader(shards, batch_size, *, size=224, crop="random", layout="NCHW", dtype="uint8",
           mean=None, std=None, device=None, shuffle=True, seed=0, rank=None, world_size=None,
           decode_threads=0, io_threads=0, prefetch_depth=0, drop_last=False, on_error="fail",
           copy=False, array_type="auto", io_engine="auto", flip_prob=None, scale=None,
           ratio=None, start_epoch=0, decode_nice=None, gpu_decode=False, gpu_decode_percent=100,
           hw_decode_percent=0, timeout=0, dct_scaling=True, label="cls", fields=(),
           max_field_bytes=None, source="auto", image=("jpg", "jpeg", "png", "webp"),
           schedule="auto", cache_dir=None, cache_bytes=0, remote_retries=None,
           remote_timeout=None, weights=None, class_weights=None, sample_weights=None,
           transform=None, transform_threads=0, **settings)

    shards: a path, glob or brace range (`train-{000000..000099}.tar`), or a list of them;
      tar shards may be http://, https:// or s3:// URLs instead (all or none; docs/remote.md);
      str, bytes or os.PathLike, passed to the library as os.fsencode() bytes (a NUL in one
      is a ValueError). With a folder source, one path: an image folder or list file.
      With weights, a list of sources, each one of these or {"shards": ..., "label": ...}
      with a label rule of its own (docs/python.md, "Mixing sources").
    weights: one number >= 0 per source: each source's share of an epoch's positions, exact
      per epoch and interleaved by the seed. epoch_size=N sets the positions per epoch
      (default: the dataset's samples); a source asked for more than it holds starts a new
      permutation of itself, or with replacement="on" every draw is independent.
    class_weights: a weight per class id (a sequence, or {class id: weight}), for sources
      whose labels are known at create (a folder); sample_weights: one per sample in the
      dataset's order. Both draw within a source in proportion, with replacement.
    source: "auto" (default): one path that is a directory is an image folder, anything else
      tar shards; "folder": the one path is an ImageFolder tree (one subfolder per class,
      labels by sorted subfolder index; `loader.classes` names them) or a text file of `path
      label` lines (as ringfeed-bench --folder); "tar": shard patterns, even a directory's
      name. Every other option applies to folders as to shards.
    label: "cls" (default): each sample's label is its KEY.cls member, a decimal integer
      0..2147483647 ("5" or "5\\n"); a sample whose label member is missing, empty, negative
      or not such a number is bad input, as a corrupt JPEG is (on_error="fail" raises naming
      the shard, member and offset; "skip" counts it under stats()["skipped_by_reason"]
      ["label"]). "json:PATH": the integer field PATH (keys joined by dots,
      "annotations.class_id") of each sample's KEY.json member, judged the same way (bad
      JSON, the field missing, a float, a negative number or a string is a `label` error
      naming the member, its offset and what is wrong; a key twice on the path is one too).
      None: unlabelled data, every label is -1 and no label member is read. A folder source
      takes its labels from its folders or list: only the default is accepted with it.
    fields: member extensions whose bytes each batch delivers, e.g. ("txt", "json"):
      batch.fields["txt"] is a list of `bytes`, one per sample in batch order (b"" for
      padding samples), copied out of the library's buffers when the batch is made, so they
      stay valid after release. A sample without one of the members is bad input
      (on_error="fail" raises naming the shard, sample, offset and extension; "skip" counts it
      under "field"). Extensions match exactly, case-sensitive, as in WebDataset. Tar shards
      only (a folder source has no members). A field may name the label member too
      (fields=("json",) with label="json:PATH" gets each KEY.json's bytes).
    transform: a Python callable over each decoded image, fn(img) -> array, or fn(img, key=,
      fields=, seed=) with those it declares: img is the sample's HWC uint8 array (size x
      size x 3, cropped, resized and flipped, before the dtype conversion), key its key (str),
      fields {extension: bytes} of the loader's fields, seed a per-sample int for its random
      draws (from seed, epoch and sample only); it returns a uint8 array of the same shape,
      which replaces the pixels. It runs on the decode threads before the batch is handed
      out: order, exactly-once, state_dict() and the skip counts are as without it. An
      exception (or another shape or dtype) is bad input: on_error="fail" raises
      ringfeed.TransformError naming the key and the exception; "skip" replaces the sample,
      counts it under "hook", logs it (logger "ringfeed") and keeps the message in
      transform_errors. Not with gpu_decode or hw_decode_percent (the library refuses).
      docs/python.md, "Per-sample transforms in Python".
    transform_threads: at most this many transform calls at once (default: one per decode
      thread); with decode_threads left at 0 the loader starts this many decode threads, or
      its default number when that is more.
    max_field_bytes: the largest member a field takes (default 16 KiB, at most 64 MiB); a
      larger one is bad input ("too_large"). Each ring slot holds batch_size x len(fields) x
      max_field_bytes bytes for them.
    image: the image members' extensions, most preferred first (a tuple of str, or one str
      like "png"), compared without regard to case: each sample's image is its member whose
      extension comes earliest (WebDataset's "jpg;png"); a sample with none fails the loader's
      creation. 1..8 extensions of 1..15 letters or digits (ValueError otherwise). The image is
      decoded as what its bytes are: JPEG, PNG (8/16-bit, palette, gray, interlaced) or WebP,
      to RGB with alpha dropped, through the same crop, resize, flip and conversion; JPEG is
      the fast path and the only one gpu_decode and hw_decode_percent take (the others are
      decoded by the CPU into the same batch). Bytes of none of these formats are bad input
      counted under "not_jpeg".
    dtype: "uint8" (pixels as decoded), or "float16"/"bfloat16"/"float32" holding
      (pixel - mean[c]) / std[c] with mean/std in pixel units (0..255), e.g. ringfeed.IMAGENET_MEAN
      and ringfeed.IMAGENET_STD; the conversion runs on the GPU for CUDA loaders. A torch
      dtype (torch.bfloat16) or numpy dtype (np.float32) names the same types.
    size: the output's side (224: square), or (height, width) for H x W images, which
      crop="random" (torchvision's RandomResizedCrop((h, w)): the box is drawn on the source
      with scale and ratio, then resized to h x w) and crop="center" (Resize(shorter side ->
      round(max(h, w) * 256 / 224)) then CenterCrop((h, w))) both honour; batch.images is then
      (N, 3, h, w) for NCHW and (N, h, w, 3) for NHWC.
    crop="letterbox": the whole image resized, aspect kept, to fit h x w (Ultralytics'
      LetterBox: r = min(h / H, w / W), new size round(W * r) x round(H * r), centred with the
      odd pixel of slack on the right or bottom); crop="center_pad": Resize(shorter) +
      CenterCrop((h, w)) exactly as torchvision's, padding where the resized image is smaller
      than the crop. The rest takes pad_value=(r, g, b) or one number (0..255; default 114 for
      letterbox, 0 for center_pad); batch.letterbox says where each image landed.
      crop="native": each image at its own size, scaled down as letterbox does only when it is
      larger than h x w; batch.sizes (N, 2) and batch.native_images() give each, packed in a
      slot of h x w (batch.images keeps that (N, h, w, 3) shape: the ring stays allocated
      once). Not with a transform, nor a float dtype with layout NCHW. All three on every
      decode path: the GPU kernels and engines resize onto the image's rectangle and pad
      around it (or pack a native image at its own size), byte for byte the CPU's full-scale
      decode.
    crop, layout, io_engine, on_error, array_type, device: strings in any case ("nhwc").
    Integer arguments must be integers within their rf_config field (uint32, or uint64 for
      seed and start_epoch; batch_size and world_size >= 1): anything else is a TypeError or
      a ValueError naming the argument, never a silently wrapped value.
    device: "cuda" (torch's current device), "cuda:N", "cpu", or None (CUDA if usable).
    decode_threads: 0 for ringfeed.default_decode_threads(): the CPUs this process may use
      (affinity mask, cgroup quota) divided by LOCAL_WORLD_SIZE when torchrun sets it.
    decode_nice: niceness the decode threads add to their own (0..19; None: 10, the library's
      default; 0: none), so that the training loop's threads run first when decoding keeps
      every CPU busy (docs/tuning.md).
    gpu_decode: decode baseline JPEGs on the GPU: for restart-marked files (ringfeed-pack
      --restart, ringfeed.add_restarts) the decode threads only cut out the restart intervals a
      crop needs; for plain files they walk the Huffman codes up to the crop's last row (about
      half a CPU decode) and copy the crop's rows; kernels do the rest. Other images
      (progressive, CMYK, PNG, ...) decode on the CPU in the same batches, and every image of
      the run at full scale (no DCT scaling), so each has exactly the pixels the CPU path gives
      with dct_scaling=False whichever engine took it; stats()["gpu_decoded"] counts the
      delivered GPU ones, stats()["gpu_plain_decoded"] the plain files among them. With
      on_error="skip" a sample the kernels find bad is replaced before its batch is handed out
      (docs/reliability.md).
    gpu_decode_percent: with gpu_decode, the share (1..100) of eligible images sent to the GPU;
      the seed decides which, the rest decode on the CPU. For training a model that keeps the
      GPU busy, ~25 keeps both the CPUs and the GPU below saturation (docs/gpu-decode.md).
    hw_decode_percent: the share (0..100) of images decoded by the GPU's hardware JPEG
      decoders (A100, A30, H100, H200), which use neither the CPUs nor the SMs; any baseline
      JPEG, restart markers or not. Needs libnvjpeg (the nvidia-nvjpeg wheel is found
      automatically); stats()["hw_decoded"] counts them. They open beside the first batches
      (about 1 s on an H200), whose share of them the GPU kernels (with gpu_decode) or the
      CPU decode meanwhile; a GPU without them leaves that share there, stats()["hw_engines"]
      0 and stats()["hw_engines_why"] the open's error. on_error="skip" works, but a file the engines decode without an error (damaged
      entropy data) is never skipped.
    dct_scaling: True (default): a CPU-only loader decodes images whose crop is at least twice
      the output size at 1/2..1/8 scale (faster; pixels differ from a full-scale decode, by up to
      tens of levels at edges). False: always full scale, the pixels a GPU-decode loader gives.
      gpu_decode, hw_decode_percent and schedule="balance" (a CUDA device's "auto") turn it
      off for their whole run.
      "always": on with every schedule, the GPU paths leaving those crops to the CPU, so the
      pixels are a CPU-only loader's whichever path took each (docs/gpu-decode.md).
    schedule: where JPEGs are decoded (rf_config.decode_schedule, docs/gpu-decode.md).
      "auto" (default): "manual" when gpu_decode or hw_decode_percent is given, otherwise
      "balance" on a CUDA device and "cpu" elsewhere (and for batches of more than 65,535
      samples, which the GPU paths refuse). "balance" (CUDA only): a
      scheduler spreads JPEGs over the hardware decoders (when present; opened only once its
      GPU share first reaches half the images), the GPU kernels and
      the CPU in shares moved by hill-climbing on the training loop's measured rate
      (from the CPU only once the first batch is out, and only while the loader is the
      bound), no percentage to
      tune; every image is decoded at full scale (dct_scaling="always": the crops the CPU
      DCT-scales stay on it), so the pixels do not depend on which path took each;
      stats()["sched_gpu_permille"] and ["sched_hw_permille"] show its shares. "cpu": the CPU
      only. "manual": gpu_decode, gpu_decode_percent and hw_decode_percent as given.
    prefetch_depth: batch slots in the ring; 0 is the library's default (4, 8 with
      gpu_decode, hw_decode_percent or schedule="balance", which a CUDA device's "auto" is).
    rank, world_size: default from the RANK and WORLD_SIZE environment variables (torchrun).
      Every rank gets the same number of batches; the last ones are padded with repeated
      samples (batch.is_padding) unless drop_last.
    timeout: seconds to wait for a batch (0: for ever), as the DataLoader's. On expiry
      ringfeed.LoaderTimeout (a RingfeedError and a TimeoutError) says where the pipeline
      stands, down to the oldest unfinished sample's shard, member and offset; nothing is
      lost, and iterating again waits again.
    cache_dir, cache_bytes: for URL shards, a local directory (str, bytes or os.PathLike; made
      when missing) keeping whole shards under a budget of cache_bytes bytes (required with
      cache_dir), least recently used out first: a shard found there is read from local disk
      for the whole run, a missing one is fetched whole in the background (one extra GET per
      shard) once the loader reads it and read from disk afterwards. Several ranks may share
      the directory. stats()["shard_cache_hits"], ["shard_cache_misses"], ... and
      ["shard_cache_why"] say what it did (docs/remote.md). None (default): no cache; ignored
      for local shards.
    remote_retries: for URL shards, how often one request is retried (timeouts, 5xx, 429/503,
      resets, short bodies) before it is an I/O error naming the URL and byte range: 1..100,
      None (default) the library's 5 (rf_config.remote_retries).
    remote_timeout: for URL shards, seconds to connect, and how long a transfer may stall
      (counted in whole seconds, at least 1) before it is retried: > 0 and at most 3600, None
      (default) the library's 30 (rf_config.remote_timeout_ms).
    Iterating yields one epoch of Batch objects; see the module docstring for how long a
    batch's memory stays valid, and `copy=True` to make every batch own its memory. Where
    torch is installed a Loader is a torch IterableDataset: DataLoader(loader,
    batch_size=None) yields the same batches (num_workers=0: ringfeed has threads of its own).
    """

    def __init__(self, shards, batch_size, *, size=224, crop="random", layout="NCHW",
                 dtype="uint8", mean=None, std=None, device=None, shuffle=True, seed=0,
                 rank=None, world_size=None, decode_threads=0, io_threads=0, prefetch_depth=0,
                 drop_last=False, on_error="fail", copy=False, array_type="auto",
                 io_engine="auto", flip_prob=None, scale=None, ratio=None, start_epoch=0,
                 decode_nice=None, gpu_decode=False, gpu_decode_percent=100,
                 hw_decode_percent=0, timeout=0, dct_scaling=True, label="cls", fields=(),
                 max_field_bytes=None, source="auto",
                 image=("jpg", "jpeg", "png", "webp"), schedule="auto", cache_dir=None,
                 cache_bytes=0, remote_retries=None, remote_timeout=None, weights=None,
                 class_weights=None, sample_weights=None, transform=None, transform_threads=0,
                 **settings):
        dtype = _dtype_name(dtype, _IMAGE_DTYPES)
        shards, per_source, source_labels = _mix.split_sources(shards, weights)
        batch_size = _field_int("batch_size", batch_size, lo=1)
        f = _common_fields(seed, rank, world_size, io_threads, prefetch_depth, drop_last,
                           on_error, io_engine, timeout, decode_threads, start_epoch)
        f.update({
            "batch_size": batch_size,
            "crop": _choice("crop", crop, _CROPS),
            "layout": _choice("layout", layout, _LAYOUTS),
            "order": C.RF_ORDER_GLOBAL if shuffle else C.RF_ORDER_NONE,
            "gpu_decode": 1 if gpu_decode else 0,
            "gpu_decode_percent": _field_int("gpu_decode_percent", gpu_decode_percent),
            "hw_decode_percent": _field_int("hw_decode_percent", hw_decode_percent),
            "dct_scaling": _dct_scaling(dct_scaling),
            "dtype": C.DTYPES[dtype][0],
            "source": _source_kind(source, shards, label, per_source),
            "image_exts": _image_exts(image),
            "decode_schedule": _choice("schedule", schedule, _SCHEDULES),
        })
        f.update(_size_fields(size))
        f.update(_label_fields(label))
        f.update(_cache_fields(cache_dir, cache_bytes))
        f.update(_remote_fields(remote_retries, remote_timeout))
        if "multi_crop" in settings:  # groups as tuples, or the library's text
            settings["multi_crop"] = _multi_crop_text(settings["multi_crop"])
        if "size_buckets" in settings:  # (height, width) pairs, or the library's text
            settings["size_buckets"] = _size_buckets_text(settings["size_buckets"])
        f.update(_other_settings("Loader", settings))
        f.update(_mix.mix_fields(per_source, weights, class_weights, sample_weights,
                                 source_labels))
        self.fields = _field_names(fields)
        if self.fields:
            f["fields"] = ",".join(self.fields).encode("ascii")
        if max_field_bytes is not None:
            f["max_field_bytes"] = _field_int("max_field_bytes", max_field_bytes, lo=1)
        if transform is not None:
            self._transform = _transform.SampleTransform(
                transform, transform_threads, decode_threads, _default_decode_threads(),
                self.fields, f["on_error"] == _ON_ERROR["skip"])
            f.update(self._transform.config_fields())
        elif transform_threads:
            raise ValueError("transform_threads needs a transform")
        if mean is not None or std is not None:
            if dtype == "uint8":
                raise ValueError("mean/std apply to float outputs: pass dtype='float32', "
                                 "'float16' or 'bfloat16'")
            mean = (0.0, 0.0, 0.0) if mean is None else tuple(float(m) for m in mean)
            std = (1.0, 1.0, 1.0) if std is None else tuple(float(s) for s in std)
            if len(mean) != 3 or len(std) != 3 or min(std) <= 0:
                raise ValueError("mean and std need 3 values each, std > 0")
            if max(std) < 1.0:
                raise ValueError(
                    f"std={std} looks like 0..1 units; ringfeed normalizes pixels in 0..255 units "
                    "(use ringfeed.IMAGENET_MEAN / IMAGENET_STD, or multiply by 255)")
            f["mean"], f["std"] = mean, std
        if decode_nice is not None:  # None: the library's default (10)
            f["decode_nice"] = _field_int("decode_nice", decode_nice)
        if flip_prob is not None:
            f["flip_prob"] = float(flip_prob)
        if scale is not None:
            f["scale_min"], f["scale_max"] = (float(x) for x in scale)
        if ratio is not None:
            f["ratio_min"], f["ratio_max"] = (float(x) for x in ratio)
        if hw_decode_percent:
            _find_nvjpeg()
        self.batch_size = batch_size
        self.layout = "NHWC" if f["layout"] == C.RF_LAYOUT_NHWC else "NCHW"
        self.dtype = dtype
        self._classes = None
        super().__init__(f, shards, device, copy, array_type, dtype)

    @property
    def classes(self):
        """The class names of a folder source, in label order (classes[label] is the name of
        the sorted subfolder that label stands for), read with the walker the loader uses;
        [] for a `path label` list file, None for tar shards; with several folder sources
        (weights=), one such list per source, whose labels are its own. Read on first use: a
        tree changed after the loader was created gives the names as they are then."""
        if self._cfg_fields["source"] != C.RF_SOURCE_FOLDER:
            return None
        if self._classes is None:
            self._classes = [C.image_list_classes(p) for p in self._shard_bytes]
        if len(self._classes) > 1:  # mixed folders: each source's labels are its own
            return [list(c) for c in self._classes]
        return list(self._classes[0])

    def _wrap(self, b, lease, stream):
        batch = Batch.__new__(Batch)
        n = self._fill_meta(batch, b, lease)
        batch._keys = batch._fields = None
        dtype = self._check_dtype(b)
        batch.images = self._data_array(b, lease, tuple(b.shape[:b.ndim]), dtype, stream)
        batch.views = view_arrays(batch.images, b, n)
        batch.bucket = bucket_of(b)
        nchw = b.layout == C.RF_LAYOUT_NCHW
        if batch.bucket:  # size_buckets: (N, Hb, Wb, 3) or (N, 3, Hb, Wb) over the slots
            hb, wb = batch.bucket[1:]
            batch.images = bucket_array(batch.images, n, (3, hb, wb) if nchw else (hb, wb, 3))
        batch.view_boxes, batch.view_flips, batch.view_letterbox = copy_view_boxes(
            b, n, self._array_type)
        if b.device_kind == C.RF_DEVICE_CUDA and b.labels_device:
            lab = self._views.get(lease, b.labels_device, (n,), "int32", self._cuda_view)
            batch.labels = lab.long()  # a new tensor, ordered on the current stream
        else:
            batch.labels = _arrays.host_copy_int(b.labels, n, ctypes.c_int32, self._array_type)
        batch.crop_boxes, batch.flips = copy_boxes(b, n, self._array_type)
        batch.letterbox = copy_letterbox(b, n, self._array_type)
        batch.sizes = copy_sizes(b, n, self._array_type)
        batch._nchw = b.layout == C.RF_LAYOUT_NCHW
        width = self._cfg_fields.get("num_classes" if b.label_multihot else "max_labels", 0)
        batch.multi_labels, batch.label_counts = copy_multi_labels(b, n, width,
                                                                   self._array_type)
        (batch.boxes, batch.box_classes, batch.box_counts, batch.points,
         batch.point_counts) = copy_annotations(b, n, self._cfg_fields.get("max_boxes", 0),
                                                self._cfg_fields.get("max_points", 0),
                                                self._array_type)
        nhwc = b.layout == C.RF_LAYOUT_NHWC
        h, w = (b.shape[1], b.shape[2]) if nhwc else (b.shape[2], b.shape[3])
        batch.view_masks, batch._view_annots = copy_view_targets(
            b, n, self._cfg_fields.get("max_boxes", 0), self._cfg_fields.get("max_points", 0),
            self._array_type)
        # with views b.shape is (n, row): the views carry the sizes, view 0's is the batch's
        batch.masks = (batch.view_masks[0] if batch.view_masks
                       else copy_masks(b, n, int(h), int(w), self._array_type))
        if batch.bucket and batch.masks is not None:  # each packed from its row's start
            m = bucket_array(batch.masks, n, batch.bucket[1:])
            batch.masks = m.copy() if isinstance(m, _arrays.np.ndarray) else m.contiguous()
        return batch


class TokenLoader(_LoaderBase):
    """Fixed-length token windows from flat binary token files (nanoGPT/Megatron .bin).

    TokenLoader(path, token_bytes, seq_len, batch_size, *, dtype="int64", device=None,
                shuffle=True, seed=0, rank=None, world_size=None, io_threads=0,
                prefetch_depth=4, drop_last=False, on_error="fail", copy=False,
                array_type="auto", io_engine="auto", start_epoch=0, timeout=0,
                cache_dir=None, cache_bytes=0, remote_retries=None, remote_timeout=None,
                weights=None, sample_weights=None, **settings)

    path: a token file's path, glob or brace range, or a list of them; the files may be
      http://, https:// or s3:// URLs instead (all or none; docs/remote.md): each window is
      then one ranged GET, and cache_dir, cache_bytes, remote_retries and remote_timeout
      mean what they mean for Loader's URL shards (the cache keeps whole token files).
    Every sample is a window of seq_len + 1 tokens; iterating yields TokenBatch objects that
    unpack as (x, y) with x = window[:, :-1] and y = window[:, 1:] (views of one buffer).
    shuffle=True draws window starts at random each epoch (seeded) in a global permutation;
    shuffle=False walks non-overlapping windows in file order. dtype: "int64" (default, what
    nn.Embedding and cross_entropy want), "int32", "uint16", or None (as stored on disk); torch
    and numpy dtypes name them too. Same argument checks, lifetime rules and `timeout` as
    Loader. weights=, epoch_size=, replacement= and sample_weights= (one per window) mix
    sources of token files as Loader's mix sources of shards (path then a list of sources).
    """

    def __init__(self, path, token_bytes, seq_len, batch_size, *, dtype="int64", device=None,
                 shuffle=True, seed=0, rank=None, world_size=None, io_threads=0,
                 prefetch_depth=4, drop_last=False, on_error="fail", copy=False,
                 array_type="auto", io_engine="auto", start_epoch=0, decode_threads=0,
                 timeout=0, cache_dir=None, cache_bytes=0, remote_retries=None,
                 remote_timeout=None, weights=None, sample_weights=None, **settings):
        path, per_source, _ = _mix.split_sources(path, weights)
        token_bytes = _field_int("token_bytes", token_bytes)
        if token_bytes not in (2, 4):
            raise ValueError(f"token_bytes must be 2 (uint16) or 4 (uint32), not {token_bytes}")
        seq_len = _field_int("seq_len", seq_len, lo=1, hi=U32_MAX - 1)  # windows: seq_len + 1
        batch_size = _field_int("batch_size", batch_size, lo=1)
        if dtype is not None:
            dtype = _dtype_name(dtype, _TOKEN_DTYPES)
        f = _common_fields(seed, rank, world_size, io_threads, prefetch_depth, drop_last,
                           on_error, io_engine, timeout, decode_threads, start_epoch)
        f.update({
            "batch_size": batch_size,
            "source": C.RF_SOURCE_TOKENS,
            "token_bytes": token_bytes,
            "seq_len": seq_len,
            "token_windows": C.RF_WINDOWS_RANDOM if shuffle else C.RF_WINDOWS_SEQUENTIAL,
            "token_dtype": C.DTYPES[dtype][0] if dtype else 0,
            "order": C.RF_ORDER_GLOBAL if shuffle else C.RF_ORDER_NONE,
        })
        f.update(_cache_fields(cache_dir, cache_bytes))
        f.update(_remote_fields(remote_retries, remote_timeout))
        f.update(_other_settings("TokenLoader", settings))
        f.update(_mix.mix_fields(per_source, weights, None, sample_weights))
        self.batch_size = batch_size
        self.seq_len = seq_len
        # As stored on disk: uint16 for 2-byte tokens; 4-byte tokens are uint32, delivered as
        # int32 (token ids stay far below 2**31).
        expect = dtype if dtype else ("uint16" if token_bytes == 2 else "int32")
        self.dtype = expect
        super().__init__(f, path, device, copy, array_type, None if dtype is None else dtype)

    def _wrap(self, b, lease, stream):
        batch = TokenBatch.__new__(TokenBatch)
        self._fill_meta(batch, b, lease)
        dtype = self._check_dtype(b)
        if dtype not in _TOKEN_DTYPES:
            raise RuntimeError(f"libringfeed returned {dtype} token batches")
        shape = (int(b.shape[0]), int(b.shape[1]))
        t = self._data_array(b, lease, shape, dtype, stream)
        batch.tokens = t
        batch.x = t[:, :-1]
        batch.y = t[:, 1:]
        return batch


Loader.__doc__ += _settings_doc()
TokenLoader.__doc__ += _settings_doc()
