/* size_pass.c — every image's bucket, from its header, read once at create on the caller's
 * thread (no other thread runs yet). A tar member's payload offset is known from the scan or
 * the index, so only the header's bytes are read: 4 KiB covers a JPEG without a large EXIF
 * block, a PNG and a WebP; a longer EXIF (camera thumbnails) takes one more read of 64 KiB
 * and, rarely, the whole member. Folder images are opened one by one, as their reads are.
 * The reads are blocking preads on this one thread; the kernel is asked for the next AHEAD
 * samples' first reads in advance, which on cold storage overlaps them (a quarter of the time
 * of reading them one by one, docs/tuning.md). */
#include "pipeline/size_pass.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "decode/decode.h"

#define PEEK_FIRST 4096u
#define PEEK_SECOND 65536u
#define AHEAD 64 /* samples whose first read is asked for ahead of the one being read */

/* The size from reads of growing length; 0 with *w, *h (0 x 0: no parse), or -errno. */
static int sample_size(int fd, const rf_sample *sm, uint8_t **buf, size_t *cap, uint32_t *w,
                       uint32_t *h)
{
    uint64_t len = sm->data_len;
    *w = *h = 0;
    for (uint64_t want = PEEK_FIRST;; want = want < PEEK_SECOND ? PEEK_SECOND : len) {
        size_t n = (size_t)RF_MIN(want, len), got = 0;
        if (n > *cap) {
            uint8_t *b = realloc(*buf, n);
            if (!b)
                return RF_ENOMEM;
            *buf = b, *cap = n;
        }
        int rc = rf_pread_full(fd, *buf, n, sm->offset + sm->data_off, &got);
        if (rc)
            return rc;
        if (rf_image_peek_size(*buf, got, w, h) == 0 || n >= len)
            return 0;
    }
}

/* Ask the kernel for sample i's first read ahead of time (files kept open only): on cold
 * storage the reads then overlap instead of waiting one by one. */
static void read_ahead(const rf_dataset *ds, uint64_t i)
{
    if (i >= ds->nsamples)
        return;
    const rf_sample *sm = &ds->samples[i];
    const rf_file *f = &ds->files[sm->file];
    if (f->fd >= 0 && sm->data_len)
        posix_fadvise(f->fd, (off_t)(sm->offset + sm->data_off),
                      (off_t)RF_MIN(sm->data_len, PEEK_FIRST), POSIX_FADV_WILLNEED);
}

int pl_size_pass(const rf_dataset *ds, const rf_buckets *bk, uint16_t **out, rf_err *err)
{
    uint16_t *of = calloc(ds->nsamples ? ds->nsamples : 1, sizeof *of);
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc = of ? 0 : rf_seterr(err, RF_ENOMEM, "no memory for %llu samples' buckets",
                                (unsigned long long)ds->nsamples);
    for (uint64_t i = 0; i < RF_MIN(ds->nsamples, (uint64_t)AHEAD); i++)
        read_ahead(ds, i);
    for (uint64_t i = 0; i < ds->nsamples && rc == 0; i++) {
        read_ahead(ds, i + AHEAD);
        const rf_sample *sm = &ds->samples[i];
        const rf_file *f = &ds->files[sm->file];
        if (f->remote) {
            rc = rf_seterr(err, RF_EINVAL, "size_buckets reads every image's header at create; "
                           "%s is a remote shard, whose members would be fetched one by one: "
                           "not supported", f->path);
            break;
        }
        if (!sm->data_len)
            continue; /* no image member: bucket 0, and its decode says what is missing */
        int fd = f->fd >= 0 ? f->fd : open(f->path, O_RDONLY | O_CLOEXEC);
        uint32_t w = 0, h = 0;
        rc = fd < 0 ? -errno : sample_size(fd, sm, &buf, &cap, &w, &h);
        if (f->fd < 0 && fd >= 0)
            close(fd);
        if (rc) {
            rc = rf_seterr(err, rc, "size_buckets: reading the header of sample %s in %s: %s",
                           ds->keys + sm->key, f->path,
                           rc == RF_ENOMEM ? "no memory" : rf_strerror(rc));
            break;
        }
        of[i] = (uint16_t)rf_bucket_nearest(bk, w, h);
    }
    free(buf);
    if (rc) {
        free(of);
        of = NULL;
    }
    *out = of;
    return rc;
}
