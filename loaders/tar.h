/* tar.h — the grouping of a shard's members into WebDataset samples and the notes on the links
 * a scan skips (tar.c), over tar_parse.h; shared by the loader and the tools. */
#ifndef RF_TAR_H
#define RF_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "loaders/tar_parse.h"

/* ---- WebDataset sample grouping ---- */

/* A sample is the run of consecutive regular members sharing a key; a key that comes back later
 * begins a new sample. The loader and inspection both drive this grouping, so they see the
 * same samples. For each regular member in archive order: when rf_tar_group_starts says it
 * begins a new sample, the open sample in g is complete (the caller takes it and clears
 * g->open); then rf_tar_group_add adds the member and returns its role. After the last member
 * an open sample is complete too. Zero-initialise g per shard. */
enum rf_tar_role {
    RF_TAR_ROLE_OTHER = 0,
    RF_TAR_ROLE_IMAGE, /* the sample's image so far (a later member ranked higher replaces it) */
    RF_TAR_ROLE_LABEL, /* its first member with the extension label_ext */
};

typedef struct rf_tar_group {
    int open;                 /* a sample is open (set by add, cleared by the caller) */
    char key[RF_TAR_NAME_MAX + 1];
    size_t key_len;
    uint64_t start;           /* first header block of its first member */
    uint64_t end;             /* end of its last member's data */
    uint32_t members;         /* regular members so far */
    const char *image_exts;   /* set by the caller; NULL: RF_TAR_IMAGE_EXTS */
    uint32_t img_rank;        /* position of the image's extension in image_exts, from 1 */
    int has_img, has_lbl;
    uint64_t img_hdr, img_data, img_size;  /* the image member (RF_TAR_ROLE_IMAGE) */
    uint64_t lbl_hdr, lbl_data, lbl_size;  /* the label member (RF_TAR_ROLE_LABEL) */
    const char *label_ext;    /* set by the caller after zeroing; NULL = RF_TAR_LABEL_EXT */
    char seen[128];           /* its members' extensions so far, ", " between (cut short) */
} rf_tar_group;

/* Why a sample whose members' extensions are `seen` has no image member of image_exts: the list
 * asked for, the members it has, and what to do about an undecoded image type or a missing
 * extension. 1 when it named such a cause, 0 when the members hold no image at all. */
int rf_tar_no_image(const char *image_exts, const char *seen, char *out, size_t cap);

/* 1 when the member called `name` begins a new sample (no sample open, or another key). */
int rf_tar_group_starts(const rf_tar_group *g, const char *name);
/* Add the member `name` (header hdr, data at `data`, `size` bytes), opening a new sample when
 * rf_tar_group_starts says so; returns its enum rf_tar_role. Members are counted without a
 * limit: callers apply theirs. */
int rf_tar_group_add(rf_tar_group *g, const char *name, uint64_t hdr, uint64_t data,
                     uint64_t size);

/* The last RF_TAR_LINKS_KEPT link members a scan skipped (never followed), for the error of a
 * sample lacking its image: GNU tar stores a hard-linked file's second name, and a symlink
 * without --dereference, as a link. A sample is complete only when the next one starts, whose
 * links may come first: more than one is kept. */
#define RF_TAR_LINKS_KEPT 4
typedef struct rf_tar_link {
    struct {
        char name[RF_TAR_NAME_MAX + 1];
        uint64_t hdr;
        int type; /* RF_TAR_HARDLINK, RF_TAR_SYMLINK */
    } e[RF_TAR_LINKS_KEPT];
    uint32_t n; /* links noted so far; e[n % RF_TAR_LINKS_KEPT] is the next to replace */
} rf_tar_link;

/* Remember m in l when it is a link. */
void rf_tar_link_note(rf_tar_link *l, const rf_tar_member *m);

/* Why the sample `key` has no image member when l holds a link of that key, into out: 1; else
 * 0 and out is "". */
int rf_tar_link_hint(const rf_tar_link *l, const char *key, size_t key_len, char *out,
                     size_t cap);

#endif
