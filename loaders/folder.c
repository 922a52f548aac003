/* folder.c — the folder format: an unpacked image dataset read file by file, without packing.
 *
 * DESIGN. The input is a class-folder tree (torchvision ImageFolder) or a text file of `path
 * label` lines, turned into an rf_image_list by the walker ringfeed-pack packs, so a folder and
 * its shards hold the same samples in the same order. Each file is one sample whose span is the
 * whole file, its label known up front (label_len 0), so the rest of the loader treats it like
 * a tar sample. The key is the relative path without its extension.
 *
 * Files are not kept open (rf_file.fd = -1): ImageNet's 1.28 M files would exceed
 * RLIMIT_NOFILE, so the pipeline opens each for its read (open_per_read), a few microseconds
 * against a millisecond of decode. Sizes are taken at create, so a file changed later is caught
 * as truncated or as a decode error. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loaders/dataset.h"
#include "loaders/tar.h"
#include "ringfeed_shards.h"

#define FOLDER_DEFAULT_SAMPLE_BYTES (64ull << 20)
/* The position of a file's extension in RF_TAR_IMAGE_EXTS (ds->image_exts of a folder), for
 * messages naming the file as KEY.EXT. 0 for a list entry with another extension. */
static uint32_t image_rank(const char *path)
{
    const char *base = strrchr(path, '/'), *dot = strrchr(base ? base : path, '.');
    return dot ? rf_tar_ext_rank(dot + 1, RF_TAR_IMAGE_EXTS) : 0;
}

static int add_image(rf_dataset *ds, const rf_image_list *l, uint64_t i, uint64_t max_span,
                     rf_err *err)
{
    const char *path = rf_image_list_path(l, i);
    struct stat st;
    if (stat(path, &st) != 0)
        return rf_seterr(err, -errno, "%s: %s", path, strerror(errno));
    uint64_t size = (uint64_t)st.st_size;
    int rc = 0;
    if (size == 0)
        rc = rf_seterr(err, RF_EFORMAT, "%s: empty file at offset 0", path);
    else if (size > max_span)
        rc = rf_seterr(err, RF_ELIMIT, "%s: %" PRIu64 " bytes, over max_sample_bytes %" PRIu64,
                       path, size, max_span);
    else
        rc = rf_dataset_add_file(ds, path, -1, size, err);
    if (rc)
        return rc;
    rf_sample s = {
        .offset = 0,
        .length = (uint32_t)size,
        .file = ds->nfiles - 1,
        .data_off = 0,
        .data_len = (uint32_t)size,
        .label_len = 0,
        .flags = (uint16_t)RF_SAMPLE_EXT(image_rank(path)),
        .label = rf_image_list_label(l, i),
        .data_hdr = 0,
    };
    const char *key = rf_image_list_name(l, i);
    return rf_dataset_add_sample(ds, &s, key, strlen(key), err);
}

static int folder_open(rf_dataset *ds, char *const *paths, uint32_t npaths,
                       uint64_t max_sample_bytes, rf_err *err)
{
    if (npaths != 1)
        return rf_seterr(err, RF_EINVAL, "the folder source takes one entry (a class-folder "
                         "tree or a `path label` file); the patterns gave %u", npaths);
    rf_image_list *l = NULL;
    int rc = rf_image_list_open(paths[0], &l, err->msg, sizeof err->msg);
    if (rc) {
        err->code = rc;
        return rc;
    }
    /* A file the walk could not read (a dangling symlink, a FIFO named .jpg) fails create: a
     * sample silently missing from every epoch would be worse. */
    uint64_t bad = rf_image_list_unreadable(l);
    if (bad) {
        rc = rf_seterr(err, rf_image_list_unreadable_code(l, 0), "%s (%" PRIu64 " unreadable "
                       "entries in %s)", rf_image_list_unreadable_message(l, 0), bad, paths[0]);
        rf_image_list_free(l);
        return rc;
    }
    uint64_t n = rf_image_list_count(l);
    uint64_t max_span = RF_MIN(max_sample_bytes ? max_sample_bytes : FOLDER_DEFAULT_SAMPLE_BYTES,
                               (uint64_t)UINT32_MAX);
    ds->payload_ext = "jpg";
    ds->image_exts = RF_TAR_IMAGE_EXTS; /* every format, whatever rf_config.image_exts says */
    for (uint64_t i = 0; i < n && rc == 0; i++)
        rc = add_image(ds, l, i, max_span, err);
    rf_image_list_free(l);
    return rc;
}

const rf_format_ops rf_format_folder = {
    .abi = RF_FORMAT_ABI, .name = "folder", .source = RF_SOURCE_FOLDER, .open = folder_open};
