/* exif.c — the EXIF orientation tag of a JPEG, read from its bytes.
 *
 * The loader decodes pixels as stored and does not apply the tag (as PIL's Image.open and
 * torchvision's ImageFolder do not; DALI does): ringfeed-inspect counts such images with this
 * reader so a user sees them before training (docs/reliability.md). Every offset is checked
 * against the segment before it is read; anything malformed is "no tag". */
#include "decode/decode.h"
#include "decode/jpeg_restart.h"

#include <string.h>

static uint32_t rd16(const uint8_t *p, int big)
{
    return big ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}

static uint32_t rd32(const uint8_t *p, int big)
{
    return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
               : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* The orientation in a TIFF structure of n bytes (what follows "Exif\0\0"), or 0. */
static uint32_t tiff_orientation(const uint8_t *t, size_t n)
{
    if (n < 8 || !((t[0] == 'I' && t[1] == 'I') || (t[0] == 'M' && t[1] == 'M')))
        return 0;
    int big = t[0] == 'M';
    if (rd16(t + 2, big) != 42)
        return 0;
    uint32_t ifd = rd32(t + 4, big);
    if (ifd < 8 || ifd > n - 2)
        return 0;
    uint32_t count = rd16(t + ifd, big);
    for (uint32_t i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        if (e + 12 > n)
            return 0;
        if (rd16(t + e, big) != 0x0112)
            continue;
        /* SHORT, one value, held in the first two bytes of the value field */
        if (rd16(t + e + 2, big) != 3 || rd32(t + e + 4, big) != 1)
            return 0;
        uint32_t v = rd16(t + e + 8, big);
        return v >= 1 && v <= 8 ? v : 0;
    }
    return 0;
}

uint32_t rf_jpeg_exif_orientation(const uint8_t *j, size_t len)
{
    if (!rf_jpeg_has_soi(j, len))
        return 0;
    size_t p = 2, at;
    uint32_t m;
    while (rf_jpeg_segment(j, len, &p, &m, &at) == 0 && m != 0xDA) {
        const uint8_t *d = j + at + 4;
        size_t n = p - at - 4;
        if (m == 0xE1 && n >= 6 && memcmp(d, "Exif\0\0", 6) == 0)
            return tiff_orientation(d + 6, n - 6); /* the first Exif APP1 is the one readers use */
    }
    return 0;
}
