/* tar.h — the grouping of a shard's members into WebDataset samples and the notes on the links
 * a scan skips (loaders/tar.c), over the parser (tar_parse.h), shared by the WebDataset loader
 * and the tools (src/authoring). */
#ifndef RF_TAR_H
#define RF_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "loaders/tar_parse.h"

/* ---- WebDataset sample grouping (loaders/tar.c) ------------------------------------------ */

/* A sample is the run of consecutive regular members sharing a key (rf_tar_split_key); a key
 * that comes back after another key begins a new sample. The loader (scanning a shard or
 * reading its index) and inspection (src/authoring/inspect.c) both drive this one grouping,
 * member by member, so they see the same samples. For each regular member, in archive order:
 * rf_tar_group_starts says whether it begins a new sample; if so, the sample still in g (when
 * g->open) is complete: the caller takes what it needs from g and sets g->open = 0. Then
 * rf_tar_group_add adds the member and returns its role. After the last member, an open sample
 * is complete too. Zero-initialise g before the first member of a shard. */
enum rf_tar_role {
    RF_TAR_ROLE_OTHER = 0,
    RF_TAR_ROLE_IMAGE, /* the sample's image so far: the member whose extension comes first in
                          g->image_exts (a later member with an earlier one replaces it) */
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
    const char *label_ext;    /* the label member's extension (rf_label_ext: "cls", "json"),
                                 set by the caller after zeroing; NULL = RF_TAR_LABEL_EXT */
    char seen[128];           /* its members' extensions so far, ", " between (cut short) */
} rf_tar_group;

/* Why a sample whose members' extensions are `seen` (", " between) has no image member of
 * image_exts, after "has no image member": the list asked for, the members it has, and what
 * to do when one of them is an image type ringfeed does not decode (GIF, BMP, TIFF, ...) or a
 * JPEG, PNG or WebP extension missing from image_exts. Returns 1 when it named such a cause,
 * 0 when the members hold no image at all (then a link or member order may be to blame). */
int rf_tar_no_image(const char *image_exts, const char *seen, char *out, size_t cap);

/* 1 when the member called `name` begins a new sample (no sample open, or another key). */
int rf_tar_group_starts(const rf_tar_group *g, const char *name);
/* Add the member `name` (first header block hdr, data at `data`, `size` bytes), opening a new
 * sample when rf_tar_group_starts says so. Returns its enum rf_tar_role. Counts members without
 * a limit: callers apply theirs (the loader RF_TAR_SAMPLE_MEMBERS_MAX). */
int rf_tar_group_add(rf_tar_group *g, const char *name, uint64_t hdr, uint64_t data,
                     uint64_t size);

/* The last RF_TAR_LINKS_KEPT link members a scan skipped (links are never followed), kept for
 * the error of a sample that lacks its image: GNU tar stores the second name of a hard-linked
 * file as a link to the first, and a symlink as a link unless given --dereference. A sample is
 * complete only when the next one's first regular member comes, so the next sample's links
 * may come after its own: more than one is kept. */
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

/* Why the sample `key` (key_len bytes) has no image member when l holds a link member of that
 * key ("its member K.jpg at offset N is a hard link, which is not followed (...)"), written
 * to out: returns 1; otherwise 0 and out is "". The loader and inspection both append it. */
int rf_tar_link_hint(const rf_tar_link *l, const char *key, size_t key_len, char *out,
                     size_t cap);

#endif
