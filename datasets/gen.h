/* gen.h — the core of ringfeed-gen: write a synthetic ImageNet-like training set as WebDataset
 * shards (and DALI v1.2 indexes), deterministically from a seed. Used by the ringfeed-gen tool,
 * by tests/test_synth.c and by the rf_test_make_shards() fixture.
 *
 * Sample i (0-based, global over the whole set):
 *  - key: "%08u" of i, or "n%05u/%08u" of (label, i) with RF_GEN_KEY_CLASS_DIR;
 *  - members: KEY.jpg (the JPEG) then KEY.cls (the label in decimal ASCII, no newline);
 *  - image seed rf_gen_image_seed(seed, i), size rf_synth_size() of that seed (then fitted to
 *    min_side/max_side), progressive when rf_gen_progressive(seed, i, fraction);
 *  - label rf_gen_label(seed, i, classes), or i % classes with RF_GEN_LABEL_MODULO.
 * Output bytes depend only on the config, never on the thread count: workers render in
 * parallel and one writer appends samples in index order through a bounded queue. Shards are
 * written with the public shard writer (rf_shard_writer in ringfeed_shards.h): datasets/ uses
 * include/ only. */
#ifndef RF_GEN_H
#define RF_GEN_H

#include <stddef.h>
#include <stdint.h>

enum rf_gen_key { RF_GEN_KEY_INDEX = 0, RF_GEN_KEY_CLASS_DIR = 1 };
enum rf_gen_label_mode { RF_GEN_LABEL_HASH = 0, RF_GEN_LABEL_MODULO = 1 };
/* The samples' image format; MIX cycles JPEG, PNG, WebP by sample index (i % 3). */
enum rf_gen_format { RF_GEN_JPG = 0, RF_GEN_PNG, RF_GEN_WEBP, RF_GEN_MIX };

typedef struct rf_gen_stats {
    uint64_t images;      /* samples written */
    uint64_t shards;      /* shards written (closed) */
    uint64_t bytes;       /* tar bytes written, all shards */
    uint64_t jpeg_bytes;  /* sum of the encoded images' sizes (JPEG, PNG or WebP) */
    uint64_t sum_width;   /* sums of image dimensions (means = sum / images) */
    uint64_t sum_height;
    uint64_t progressive; /* progressive JPEGs among them */
    double seconds;       /* wall time so far */
} rf_gen_stats;

#define GEN_TRAILER_MAX (16u << 20)

typedef struct rf_gen_config {
    /* Shard path pattern with exactly one integer conversion for the shard number, e.g.
     * "out/train-%06d.tar". The index of X.tar is X.idx (X + ".idx" when no .tar suffix). */
    const char *output;
    uint64_t images;              /* samples in total (> 0) */
    uint32_t classes;             /* default 1000; at most INT32_MAX (labels are int32_t) */
    uint64_t shard_bytes;         /* start a new shard before exceeding this; 0 = use per_shard */
    uint32_t per_shard;           /* samples per shard when shard_bytes == 0; default 1000 */
    uint32_t first_shard;         /* number of the first shard in the pattern; default 0 */
    uint64_t seed;
    int quality;                  /* JPEG quality; default 90 */
    uint32_t threads;             /* default: online CPUs */
    double progressive_fraction;  /* 0..1; default 0 */
    int restart;                  /* 1: restart markers (rf_jpeg_add_restarts, interval 0, the
                                     encoder's Huffman tables): same pixels; baseline only */
    uint32_t trailer_bytes;       /* bytes after each JPEG's EOI, as cameras and motion photos
                                     write them (0xFF 0xD8, then a seeded pattern): the same
                                     pixels; at most GEN_TRAILER_MAX; default 0 */
    uint32_t min_side, max_side;  /* fit every image so short >= min_side, long <= max_side
                                     (max wins when both cannot hold); 0 = unbounded */
    int write_index;              /* 1: write X.idx beside each shard */
    int tar_format;               /* enum rf_shard_format (ringfeed_shards.h) */
    int key_style;                /* enum rf_gen_key */
    int label_mode;               /* enum rf_gen_label_mode */
    float texture;                /* fine-texture scale; 0 = default (1.0) */
    int format;                   /* enum rf_gen_format: KEY.jpg (default), KEY.png (8-bit
                                     RGB), KEY.webp (lossy at `quality`) or a mix. Progressive
                                     and restart markers apply to the JPEG samples only */
    /* Called by the writer thread after each sample (may be NULL); return nonzero to stop. */
    int (*progress)(void *ctx, const rf_gen_stats *st);
    void *progress_ctx;
} rf_gen_config;

/* Defaults as documented above (output NULL, images 0: the caller must set both). */
void rf_gen_config_init(rf_gen_config *cfg);

/* Generate the whole set. Returns 0, -EINVAL for a bad config (msg says why), -ECANCELED when
 * progress asked to stop, or -errno from the file system. st (may be NULL) gets the totals.
 * msg (may be NULL) receives a one-line description of a failure. */
int rf_gen_run(const rf_gen_config *cfg, rf_gen_stats *st, char *msg, size_t msg_len);

/* The per-sample derivations described above, for tests that check what was written. */
uint64_t rf_gen_image_seed(uint64_t seed, uint64_t index);
uint32_t rf_gen_label(uint64_t seed, uint64_t index, uint32_t classes);
int rf_gen_progressive(uint64_t seed, uint64_t index, double fraction);
/* Size of sample `index` after fitting to min_side/max_side (0 = unbounded). */
void rf_gen_size(uint64_t seed, uint64_t index, uint32_t min_side, uint32_t max_side,
                 uint32_t *width, uint32_t *height);

#endif
