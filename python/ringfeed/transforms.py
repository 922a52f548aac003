"""Per-batch transforms on ringfeed batches with torch: torchvision.transforms.v2 (or any
callable on an NCHW tensor) applied to the batch tensor on its own device and torch's current
stream, then normalization (docs/python.md, "Per-batch GPU transforms").

    from ringfeed.transforms import augmented, default_transform
    for x, labels in augmented(loader, default_transform(), ringfeed.IMAGENET_MEAN,
                               ringfeed.IMAGENET_STD, seed=0):
        ...

ringfeed makes torch's current stream wait for each batch's copy before handing it out and
releases the batch in order on that stream, so transforms queued there read the batch after
its copy and before its memory is recycled, without a synchronization. Their outputs are new
tensors from torch's allocator: the loader's buffer is only read. torch (and torchvision for
default_transform) is imported on first use: `import ringfeed` never needs it.
"""

MASK64 = (1 << 64) - 1


def _torch():
    import torch
    return torch


def batch_seed(seed, epoch, index):
    """A seed for one batch's random draws, from (seed, epoch, batch index) only: the same
    batch gets the same draws in every run, whatever the training loop drew meanwhile."""
    h = (seed * 0x9E3779B97F4A7C15 + epoch * 0xBF58476D1CE4E5B9 + index) & MASK64
    h ^= h >> 31
    return ((h * 0x94D049BB133111EB) & MASK64) >> 1  # 63 bits: any torch seed


def augmented(loader, transform, mean, std, seed=0, per_sample=False, out_dtype=None):
    """Yield (images, labels) of each batch of one epoch of `loader` (a uint8 ringfeed.Loader,
    either layout, torch arrays): images as an NCHW view (channels_last memory for an NHWC
    loader), passed through `transform` (None: none) on the tensor's own device and torch's
    current stream, then normalized to out_dtype (default float32) with mean/std in pixel
    units.

    torchvision's v2 transforms draw their random parameters once per call, so a batch-wise
    call gives every image of the batch the same draw; per_sample=True calls the transform on
    each image (its own draw, one launch per image and operation). The draws come from torch's
    generators seeded per batch (batch_seed), inside torch.random.fork_rng, so they are
    reproducible and leave the caller's random state as it was."""
    torch = _torch()
    out_dtype = out_dtype or torch.float32
    mean_t = std_t = None
    for b in loader:
        x = b.images.permute(0, 3, 1, 2) if b.images.shape[-1] == 3 else b.images
        if mean_t is None:
            mean_t = torch.tensor(mean, device=x.device, dtype=torch.float32).view(1, 3, 1, 1)
            std_t = torch.tensor(std, device=x.device, dtype=torch.float32).view(1, 3, 1, 1)
        if transform is not None:
            x = seeded(transform, x, batch_seed(seed, b.epoch, b.index), per_sample)
        yield ((x.float() - mean_t) / std_t).to(out_dtype), b.labels


def seeded(transform, x, s, per_sample=False):
    """transform(x) with torch's CPU generator, and the CUDA one of x's device, seeded to s for
    the call and restored afterwards; per_sample: one call per image of the batch x."""
    torch = _torch()
    devices = [x.device.index if x.device.index is not None else torch.cuda.current_device()] \
        if x.is_cuda else []
    with torch.random.fork_rng(devices=devices):
        torch.default_generator.manual_seed(s)
        if x.is_cuda:
            with torch.cuda.device(x.device):
                torch.cuda.manual_seed(s)
        if per_sample:
            return torch.stack([transform(img) for img in x])
        return transform(x)


def default_transform():
    """Colour jitter and random grayscale: the photometric half of a common ImageNet recipe
    (the geometric half, RandomResizedCrop and flip, is ringfeed's own). Needs torchvision."""
    from torchvision.transforms import v2
    return v2.Compose([v2.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4),
                       v2.RandomGrayscale(p=0.2)])
