/* test_sync.c — the sync-point index (loaders/sync_index.h): its format (round trip, every
 * kind of damage refused with the byte offset), what the build gives each kind of file, and
 * the GPU decode from its points giving the CPU path's full-scale bytes through the kernels'
 * host code on generated files and on real photographs. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ringfeed_shards.h"

#include "backend/gpujpeg.h"
#include "base/hash.h"
#include "decode/jpeg_restart.h"
#include "jpegutil.h"
#include "loaders/sync_index.h"
#include "testutil.h"

/* The entry of one file, its points copied out of the decoder (malloc'ed, in e->points). */
static rf_sync_entry build(rf_decoder *d, const uint8_t *j, size_t len, uint64_t off)
{
    rf_sync_entry e = {.off = off};
    rf_err err = {0};
    ck_assert_int_eq(rf_decode_sync_entry(d, j, len, &e, &err), 0);
    if (e.npoints) {
        uint8_t *p = malloc((size_t)e.npoints * RF_SYNC_POINT);
        memcpy(p, e.points, (size_t)e.npoints * RF_SYNC_POINT);
        e.points = p;
    }
    return e;
}

/* Decode `seeds` crops of j through its entry (which must be used) and without it, and on the
 * CPU path at full scale: all three the same bytes. Returns the segments that skipped MCUs. */
static uint32_t check_indexed(rf_decoder *d, const uint8_t *j, size_t len, const rf_sync_entry *e,
                              uint64_t seeds, const char *what)
{
    size_t cap = 4u << 20;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH);
    uint8_t *cpu = malloc(224 * 224 * 3), *gi = malloc(224 * 224 * 3), *gw = malloc(224 * 224 * 3);
    test_place pl = {pkt, gi, cap};
    uint32_t skipped = 0;
    for (uint64_t seed = 0; seed < seeds; seed++) {
        rf_transform tr = mixed_t(seed);
        rf_decode_info ic, ig;
        rf_err err = {0};
        uint32_t bytes = 0, bad = 0;
        rf_decoder_set_sync(d, e);
        ck_assert_msg(rf_decode_packet(d, j, len, &tr, NULL, seed, 0, place_fixed, &pl, &bytes, &ig,
                                       &err) == 0, "%s: %s", what, err.msg);
        ck_assert_msg(rf_decoder_sync_result(d) == RF_SYNC_USED, "%s seed %llu: index not used",
                      what, (unsigned long long)seed);
        const rf_gj_packet *p = (const rf_gj_packet *)pkt;
        ck_assert(bytes > 0 && p->plain == 1);
        const rf_gj_seg *sg = (const rf_gj_seg *)(pkt + p->off_span);
        for (uint32_t k = 0; k < p->nintervals; k++)
            skipped += sg[k].skip > 0;
        int st = rf_gj_decode_host(pkt, scratch, gi, &bad);
        ck_assert_msg(st == 0, "%s: %s in segment %u", what, rf_gj_status_text(st), bad);
        /* the walker's packet of the same crop */
        pl.px = gw;
        ck_assert_int_eq(rf_decode_packet(d, j, len, &tr, NULL, seed, 0, place_fixed, &pl, &bytes,
                                          NULL, &err), 0);
        ck_assert_int_eq(rf_decoder_sync_result(d), RF_SYNC_UNUSED);
        ck_assert_int_eq(rf_gj_decode_host(pkt, scratch, gw, &bad), 0);
        pl.px = gi;
        ck_assert_msg(rf_decode_transform(d, j, len, &tr, seed, cpu, &ic, &err) == 0, "%s",
                      err.msg);
        size_t n = (size_t)tr.height * tr.width * 3, i = 0;
        while (i < n && cpu[i] == gi[i])
            i++;
        ck_assert_msg(i == n, "%s seed %llu: byte %zu is %u from the index, %u on the CPU path "
                      "(crop %u,%u %ux%u)", what, (unsigned long long)seed, i, gi[i], cpu[i],
                      ic.crop_x, ic.crop_y, ic.crop_w, ic.crop_h);
        ck_assert(memcmp(gw, cpu, n) == 0);
        ck_assert_uint_eq(ig.crop_x, ic.crop_x);
        ck_assert_uint_eq(ig.flipped, ic.flipped);
    }
    free(pkt), free(scratch), free(cpu), free(gi), free(gw);
    return skipped;
}

typedef struct shape {
    uint32_t w, h;
    enc_opts o;
    int coding;
} shape;

/* Every sampling the kernels take, odd and tiny sizes, wide and tall files, standard and
 * optimized tables: each file gets points, and every crop decoded from them is the CPU
 * path's, as is the walker's. */
START_TEST(indexed_packets_match_cpu_full_scale)
{
    static const shape S[] = {
        {407, 351, {3, 90, 0, 1}, ENC_STANDARD}, {500, 375, {3, 90, 0, 0}, ENC_OPTIMIZE},
        {97, 1000, {3, 85, 0, 1}, ENC_STANDARD}, {1000, 61, {1, 90, 0, 0}, ENC_OPTIMIZE},
        {333, 501, {3, 90, 0, 2}, ENC_STANDARD}, {801, 600, {3, 75, 0, 1}, ENC_OPTIMIZE},
        {61, 47, {3, 90, 0, 1}, ENC_STANDARD},   {5, 7, {3, 90, 0, 1}, ENC_OPTIMIZE},
        {211, 143, {1, 95, 0, 0}, ENC_STANDARD}, {259, 187, {3, 95, 0, 2}, ENC_OPTIMIZE},
    };
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    uint32_t skipped = 0;
    for (size_t s = 0; s < sizeof S / sizeof S[0]; s++) {
        size_t len;
        uint8_t *j = make_jpeg_ex(S[s].w, S[s].h, S[s].o, S[s].coding, 70 + s, &len);
        rf_sync_entry e = build(d, j, len, 0);
        char what[64];
        snprintf(what, sizeof what, "%ux%u shape %zu", S[s].w, S[s].h, s);
        ck_assert_msg(e.status == RF_SYNC_POINTS, "%s: %s", what, rf_sync_status_name(e.status));
        ck_assert_uint_eq(e.npoints, e.rows * rf_sync_per_row(&e));
        ck_assert_uint_eq(e.hash, rf_xxh64(j, len));
        skipped += check_indexed(d, j, len, &e, 40, what);
        free((void *)e.points), free(j);
    }
    ck_assert_msg(skipped > 0, "no segment started left of its region");
    rf_decoder_destroy(d);
}
END_TEST

typedef struct indexed_photos {
    rf_decoder *dec;
    uint64_t file_bytes, index_bytes;
    uint32_t stuffed;
} indexed_photos;

static void indexed_photo(void *ctx, const uint8_t *j, size_t n, enc_opts o, const char *what)
{
    (void)o;
    indexed_photos *ip = ctx;
    rf_sync_entry e = build(ip->dec, j, n, 0);
    ck_assert_uint_eq(e.status, RF_SYNC_POINTS);
    for (uint32_t i = 0; i < e.npoints; i++) {
        uint32_t bit;
        int32_t pred[3];
        rf_sync_point(&e, i, &bit, pred);
        ip->stuffed += j[bit / 8] == 0xFF || j[bit / 8 + 1] == 0xFF;
    }
    check_indexed(ip->dec, j, n, &e, 16, what);
    ip->file_bytes += n;
    ip->index_bytes += RF_SYNC_ENTRY + (uint64_t)e.npoints * RF_SYNC_POINT;
    free((void *)e.points);
}

/* photo_crops' real photographs: the points start inside and next to stuffed bytes, the crops
 * decode to the CPU path's bytes, and the index is under 2% of the files' bytes. */
START_TEST(indexed_packets_photos)
{
    indexed_photos ip = {rf_decoder_create(NULL), 0, 0, 0};
    rf_decoder_set_max_scale_denom(ip.dec, 1);
    uint32_t files = photo_crops("indexed_packets_photos", indexed_photo, &ip);
    if (files) {
        fprintf(stderr, "indexed_packets_photos: %u files, %llu bytes, index %.2f%%\n", files,
                (unsigned long long)ip.file_bytes,
                100.0 * (double)ip.index_bytes / (double)ip.file_bytes);
        ck_assert_uint_ge(files, 2);
        ck_assert_msg(ip.stuffed > 0, "no point at or next to a stuffed byte");
        ck_assert_msg(ip.index_bytes * 50 <= ip.file_bytes, "index %llu bytes for %llu of files",
                      (unsigned long long)ip.index_bytes, (unsigned long long)ip.file_bytes);
    }
    rf_decoder_destroy(ip.dec);
}
END_TEST

/* A file overwritten with \xff\x00 pairs from `at` on (stuffed bytes: every point of the
 * corrupt part lands on one). */
static void stuff_from(uint8_t *j, size_t len, size_t at)
{
    for (size_t i = at; i + 1 < len - 2; i += 2)
        j[i] = 0xFF, j[i + 1] = 0x00;
}

/* Which files get points and which say why not: progressive, arithmetic-coded and restart-
 * marked files need none, a PNG is no JPEG, CMYK is not the kernels', damaged data and a cut
 * file are unreadable (the CPU judges them each time). */
START_TEST(build_statuses)
{
    rf_decoder *d = rf_decoder_create(NULL);
    size_t len;
    uint64_t tlen;
    struct {
        uint8_t *j;
        size_t len;
        uint32_t want;
        const char *what;
    } c[8];
    int n = 0;
    c[n].j = make_jpeg(300, 200, (enc_opts){3, 85, 1, 1}, 1, &len);
    c[n].len = len, c[n].want = RF_SYNC_NEEDS_NONE, c[n++].what = "progressive";
    c[n].j = make_jpeg_ex(300, 200, (enc_opts){3, 85, 0, 1}, ENC_ARITH, 2, &len);
    c[n].len = len, c[n].want = RF_SYNC_NEEDS_NONE, c[n++].what = "arithmetic";
    uint8_t *plain = make_jpeg(300, 200, (enc_opts){3, 85, 0, 1}, 3, &len);
    char why[128];
    void *rst = NULL;
    ck_assert_int_eq(rf_jpeg_add_restarts(plain, len, 4, 1, &rst, &tlen, why, sizeof why), 0);
    c[n].j = rst, c[n].len = tlen, c[n].want = RF_SYNC_NEEDS_NONE, c[n++].what = "restarts";
    static const uint8_t png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    c[n].j = malloc(sizeof png), memcpy(c[n].j, png, sizeof png);
    c[n].len = sizeof png, c[n].want = RF_SYNC_NEEDS_NONE, c[n++].what = "png";
    c[n].j = make_jpeg(120, 90, (enc_opts){4, 90, 0, 0}, 4, &len);
    c[n].len = len, c[n].want = RF_SYNC_UNSUPPORTED, c[n++].what = "cmyk";
    c[n].j = make_jpeg(300, 200, (enc_opts){3, 85, 0, 1}, 5, &len);
    stuff_from(c[n].j, len, len / 2);
    c[n].len = len, c[n].want = RF_SYNC_UNREADABLE, c[n++].what = "damaged";
    c[n].j = malloc(len), memcpy(c[n].j, plain, len);
    c[n].len = len * 2 / 3, c[n].want = RF_SYNC_UNREADABLE, c[n++].what = "cut";
    c[n].j = plain, c[n].len = len, c[n].want = RF_SYNC_POINTS, c[n++].what = "plain";
    for (int i = 0; i < n; i++) {
        rf_sync_entry e = build(d, c[i].j, c[i].len, 512 * (uint64_t)i);
        ck_assert_msg(e.status == c[i].want, "%s: %s, not %s", c[i].what,
                      rf_sync_status_name(e.status), rf_sync_status_name(c[i].want));
        ck_assert_uint_eq(e.off, 512 * (uint64_t)i);
        ck_assert_uint_eq(e.len, c[i].len);
        ck_assert(e.status == RF_SYNC_POINTS ? e.npoints > 0 : e.npoints == 0);
        free((void *)e.points);
        if (c[i].j != rst)
            free(c[i].j);
    }
    rf_free(rst);
    rf_decoder_destroy(d);
}
END_TEST

/* An entry that does not fit the file it is given (another file's grid, a point past the
 * end) is not used: the packer walks, says so, and the pixels are the CPU path's. */
START_TEST(entry_that_does_not_fit_is_walked)
{
    rf_decoder *d = rf_decoder_create(NULL);
    rf_decoder_set_max_scale_denom(d, 1);
    size_t la, lb;
    uint8_t *a = make_jpeg(400, 300, (enc_opts){3, 90, 0, 1}, 7, &la);
    uint8_t *b = make_jpeg(416, 300, (enc_opts){3, 90, 0, 1}, 8, &lb);
    rf_sync_entry ea = build(d, a, la, 0), eb = build(d, b, lb, 0);
    rf_sync_entry wrong_len = ea;
    wrong_len.len = la + 1;
    uint8_t *far = malloc((size_t)ea.npoints * RF_SYNC_POINT);
    memcpy(far, ea.points, (size_t)ea.npoints * RF_SYNC_POINT);
    for (uint32_t i = ea.npoints / 2; i < ea.npoints; i++) /* the lower half: past the end */
        rf_sync_put_point(far + (size_t)i * RF_SYNC_POINT, (uint32_t)(la * 8 + 80 + i),
                          (int32_t[3]){0, 0, 0});
    rf_sync_entry past = ea;
    past.points = far;
    const rf_sync_entry *bad[] = {&eb, &wrong_len, &past};
    size_t cap = 4u << 20;
    uint8_t *pkt = malloc(cap), *scratch = malloc(RF_GJ_SCRATCH);
    uint8_t *gi = malloc(224 * 224 * 3), *cpu = malloc(224 * 224 * 3);
    test_place pl = {pkt, gi, cap};
    for (size_t k = 0; k < 3; k++)
        for (uint64_t seed = 0; seed < 12; seed++) {
            rf_transform tr = random_t(224);
            tr.crop = RF_CROP_CENTER, tr.flip_prob = -1; /* the middle rows: the bad point */
            if (seed % 2)
                tr = mixed_t(seed);
            uint32_t bytes = 0, bi = 0;
            rf_err err = {0};
            rf_decoder_set_sync(d, bad[k]);
            ck_assert_int_eq(rf_decode_packet(d, a, la, &tr, NULL, seed, 0, place_fixed, &pl,
                                              &bytes, NULL, &err), 0);
            uint32_t res = rf_decoder_sync_result(d);
            if (k < 2 || seed % 2 == 0)
                ck_assert_msg(res == RF_SYNC_STALE, "entry %zu seed %llu: %u", k,
                              (unsigned long long)seed, res);
            ck_assert_int_eq(rf_gj_decode_host(pkt, scratch, gi, &bi), 0);
            ck_assert_int_eq(rf_decode_transform(d, a, la, &tr, seed, cpu, NULL, &err), 0);
            ck_assert(res != RF_SYNC_STALE ||
                      memcmp(gi, cpu, (size_t)tr.height * tr.width * 3) == 0);
        }
    free(pkt), free(scratch), free(gi), free(cpu), free(far);
    free((void *)ea.points), free((void *)eb.points), free(a), free(b);
    rf_decoder_destroy(d);
}
END_TEST

/* ---- the format --------------------------------------------------------------------------- */

/* A sidecar of n entries from generated files at offsets 65536 apart, statuses mixed. */
static uint8_t *make_sidecar(rf_decoder *d, uint32_t n, size_t *len, rf_sync_builder *b)
{
    *b = (rf_sync_builder){0};
    for (uint32_t i = 0; i < n; i++) {
        size_t jl;
        enc_opts o = {3, 80, i % 3 == 2, 1};
        uint8_t *j = make_jpeg(64 + 16 * i, 48 + 8 * i, o, 90 + i, &jl);
        rf_sync_entry e = build(d, j, jl, 65536 * (uint64_t)(n - 1 - i)); /* out of order */
        ck_assert_int_eq(rf_sync_builder_add(b, &e), 0);
        free((void *)e.points), free(j);
    }
    uint8_t *f;
    ck_assert_int_eq(rf_sync_builder_bytes(b, 65536 * (uint64_t)n, &f, len), 0);
    return f;
}

/* Built, written and read back: sorted by offset, every field and point as built, lookups by
 * offset find each entry and nothing else; a later entry for an offset replaces the earlier. */
START_TEST(format_round_trip)
{
    rf_decoder *d = rf_decoder_create(NULL);
    rf_sync_builder b;
    size_t len;
    uint8_t *f = make_sidecar(d, 9, &len, &b);
    rf_sync_index ix;
    char why[200];
    ck_assert_msg(rf_sync_load(f, len, &ix, why, sizeof why) == 0, "%s", why);
    ck_assert_uint_eq(ix.entries, 9);
    ck_assert_uint_eq(ix.shard_bytes, 65536 * 9);
    uint32_t with_points = 0;
    for (uint32_t i = 0; i < 9; i++) {
        rf_sync_entry e, e2;
        rf_sync_entry_at(&ix, i, &e);
        ck_assert_uint_eq(e.off, 65536 * (uint64_t)i);
        ck_assert_int_eq(rf_sync_find(&ix, e.off, &e2), 1);
        ck_assert_uint_eq(e2.hash, e.hash);
        ck_assert_int_eq(rf_sync_find(&ix, e.off + 1, &e2), 0);
        with_points += e.status == RF_SYNC_POINTS;
        ck_assert_uint_eq(e.status, (8 - i) % 3 == 2 ? RF_SYNC_NEEDS_NONE : RF_SYNC_POINTS);
    }
    ck_assert_uint_eq(with_points, 6);
    /* a newer entry for offset 0 wins, and the file is written atomically */
    rf_sync_entry e;
    rf_sync_entry_at(&ix, 0, &e);
    e.hash ^= 1;
    ck_assert_int_eq(rf_sync_builder_add(&b, &e), 0);
    char *dir = rf_test_mkdtemp("sync"), path[512];
    snprintf(path, sizeof path, "%s/s.tar%s", dir, RF_SYNC_EXT);
    ck_assert_int_eq(rf_sync_builder_write(&b, 65536 * 9, path), 0);
    rf_sync_index ix2;
    ck_assert_msg(rf_sync_load_file(path, &ix2, why, sizeof why) == 0, "%s", why);
    rf_sync_entry e2;
    ck_assert_int_eq(rf_sync_find(&ix2, 0, &e2), 1);
    ck_assert_uint_eq(e2.hash, e.hash);
    ck_assert_uint_eq(ix2.entries, 9);
    snprintf(path, sizeof path, "%s/none%s", dir, RF_SYNC_EXT);
    ck_assert_int_eq(rf_sync_load_file(path, &ix2, why, sizeof why), 1);
    rf_sync_free(&ix);
    rf_sync_builder_free(&b);
    rf_test_shell("rm -rf '%s'", dir);
    free(dir);
    rf_decoder_destroy(d);
}
END_TEST

/* Rehash a sidecar after an edit, so only the check under test can refuse it. */
static void rehash(uint8_t *f, size_t len)
{
    uint64_t body = rf_xxh64(f + RF_SYNC_HEADER, len - RF_SYNC_HEADER), head;
    memcpy(f + 40, &body, 8);
    head = rf_xxh64(f, 56);
    memcpy(f + 56, &head, 8);
}

/* Every kind of damage is refused whole, with what is wrong and its byte offset: a flipped bit
 * in the header, in an entry or in a point, a cut file, another version, and (rehashed, so
 * only the structure can tell) entries out of order, a point count that does not match the
 * grid, and an unknown status. */
START_TEST(format_damage_refused)
{
    rf_decoder *d = rf_decoder_create(NULL);
    rf_sync_builder b;
    size_t len;
    uint8_t *f = make_sidecar(d, 6, &len, &b);
    rf_sync_builder_free(&b);
    static const struct {
        size_t at;
        uint8_t xor;
        int rehash;
        const char *want;
    } D[] = {
        {20, 1, 0, "damaged header"},
        {RF_SYNC_HEADER + 3, 4, 0, "damaged entries or points"},
        {0, 0x10, 0, "not a sync-point index"},
        {8, 2, 0, "version 3 at byte 8"},
        {RF_SYNC_HEADER + RF_SYNC_ENTRY + 2, 0x40, 1, "out of order"},
        {RF_SYNC_HEADER + RF_SYNC_ENTRY + 32, 1, 1, "do not match its MCU grid"},
        {RF_SYNC_HEADER + 36, 9, 1, "unknown entry status"},
    };
    for (size_t k = 0; k < sizeof D / sizeof D[0] + 2; k++) {
        size_t n = len;
        uint8_t *c = malloc(len);
        memcpy(c, f, len);
        const char *want;
        if (k < sizeof D / sizeof D[0]) {
            c[D[k].at] ^= D[k].xor;
            if (D[k].rehash)
                rehash(c, len);
            want = D[k].want;
        } else if (k == sizeof D / sizeof D[0]) {
            c[len - 3] ^= 0x80; /* a point */
            want = "damaged entries or points";
        } else {
            n = len - RF_SYNC_POINT; /* cut */
            want = "length does not match";
        }
        rf_sync_index ix;
        char why[200] = "";
        ck_assert_msg(rf_sync_load(c, n, &ix, why, sizeof why) == -1, "damage %zu accepted", k);
        ck_assert_msg(strstr(why, want) && strstr(why, "byte"), "damage %zu: '%s', not '%s'", k,
                      why, want);
    }
    free(f);
    rf_decoder_destroy(d);
}
END_TEST

/* ---- the sidecar beside a shard ------------------------------------------------------------ */

/* Sample i's JPEG: every fourth progressive, the rest baseline, sizes varying. */
static const void *member_jpeg(uint32_t i, const char *ext, size_t *len, void *ctx)
{
    uint8_t **keep = ctx;
    if (strcmp(ext, "jpg") != 0)
        return NULL;
    free(keep[i]);
    keep[i] = make_jpeg(96 + 24 * (i % 5), 80 + 16 * (i % 3), (enc_opts){3, 85, i % 4 == 3, 1},
                        300 + i, len);
    return keep[i];
}

static char *member_shard(const char *dir, uint32_t n)
{
    static const char *const exts[] = {"jpg"};
    uint8_t *keep[32] = {0};
    char *shard = rf_test_make_member_shard(dir, n, exts, 1, member_jpeg, keep);
    for (uint32_t i = 0; i < 32; i++)
        free(keep[i]);
    return shard;
}

static rf_sync_summary write_index(const char *shard)
{
    rf_sync_summary m;
    char err[600];
    rf_sync_summary_init(&m);
    ck_assert_msg(rf_shard_write_sync_index(shard, NULL, &m, err, sizeof err) == 0, "%s", err);
    return m;
}

static rf_sync_summary check_index(const char *shard, int want_rc)
{
    rf_sync_summary m;
    char err[600] = "";
    rf_sync_summary_init(&m);
    int rc = rf_shard_check_sync_index(shard, NULL, &m, err, sizeof err);
    ck_assert_msg(rc == want_rc, "check: %d (%s), not %d", rc, err, want_rc);
    if (want_rc == RF_EINDEX)
        ck_assert_msg(strstr(err, ".sync") && strstr(err, "byte"), "%s", err);
    return m;
}

/* The sidecar as users meet it: written beside a shard without touching it; a second write
 * keeps every entry; a member rewritten in place is one stale entry, found by the check and
 * rebuilt by the next write; a shard grown by more samples has its new members missing, and
 * only they are built; a damaged sidecar is refused with its offset and rebuilt whole. */
START_TEST(sidecar_write_and_check)
{
    char *dir = rf_test_mkdtemp("syncw"), cmd[1200];
    char *shard = member_shard(dir, 12);
    char sync[600];
    ck_assert_int_eq(rf_shard_sync_path(shard, sync, sizeof sync), 0);
    check_index(shard, 1); /* none yet */
    size_t before_len;
    uint8_t *before = rf_test_read_file(shard, &before_len);
    rf_sync_summary m = write_index(shard);
    ck_assert_uint_eq(m.jpegs, 12);
    ck_assert_uint_eq(m.indexed, 9);
    ck_assert_uint_eq(m.needs_none, 3);
    ck_assert_uint_eq(m.reused, 0);
    ck_assert_uint_eq(m.index_bytes * 50 < m.shard_bytes, 1);
    size_t after_len;
    uint8_t *after = rf_test_read_file(shard, &after_len);
    ck_assert(after_len == before_len && memcmp(before, after, before_len) == 0);
    free(after);
    m = write_index(shard);
    ck_assert_uint_eq(m.reused, 12);
    m = check_index(shard, 0);
    ck_assert_uint_eq(m.indexed, 9);
    ck_assert_uint_eq(m.stale + m.missing, 0);

    /* member 5 rewritten in place: a byte of its data changed */
    uint64_t off = rf_test_member_offset(shard, "00000005.jpg") + 512 + 300;
    snprintf(cmd, sizeof cmd, "printf '\\x55' | dd of='%s' bs=1 seek=%llu conv=notrunc "
             "status=none", shard, (unsigned long long)off);
    ck_assert_int_eq(rf_test_shell("%s", cmd), 0);
    m = check_index(shard, 0);
    ck_assert_uint_eq(m.stale, 1);
    m = write_index(shard);
    ck_assert_uint_eq(m.stale, 1);
    ck_assert_uint_eq(m.reused, 11);
    m = check_index(shard, 0);
    ck_assert_uint_eq(m.stale, 0);

    /* the same samples and two more: the old sidecar beside the grown shard */
    char *dir2 = rf_test_mkdtemp("syncw2");
    char *grown = member_shard(dir2, 14), sync2[600];
    ck_assert_int_eq(rf_shard_sync_path(grown, sync2, sizeof sync2), 0);
    rf_shard_write_sync_index(shard, NULL, NULL, NULL, 0);
    ck_assert_int_eq(rf_test_shell("cp '%s' '%s'", sync, sync2), 0);
    m = check_index(grown, 0);
    ck_assert_uint_eq(m.missing, 2);
    ck_assert_uint_eq(m.stale, 1); /* member 5 differs from the rewritten one */
    m = write_index(grown);
    ck_assert_uint_eq(m.reused, 11);
    ck_assert_uint_eq(m.jpegs, 14);

    /* damage: refused by the check with where; the next write builds it again */
    ck_assert_int_eq(rf_test_shell("printf '\\x01' | dd of='%s' bs=1 seek=100 conv=notrunc "
                                   "status=none", sync2), 0);
    check_index(grown, RF_EINDEX);
    m = write_index(grown);
    ck_assert_uint_eq(m.reused, 0);
    ck_assert_uint_eq(m.jpegs, 14);
    check_index(grown, 0);
    free(before), free(shard), free(grown);
    rf_test_shell("rm -rf '%s' '%s'", dir, dir2);
    free(dir), free(dir2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sync");
    TCase *tc = tcase_create("sync");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, indexed_packets_match_cpu_full_scale);
    tcase_add_test(tc, indexed_packets_photos);
    tcase_add_test(tc, build_statuses);
    tcase_add_test(tc, entry_that_does_not_fit_is_walked);
    tcase_add_test(tc, format_round_trip);
    tcase_add_test(tc, format_damage_refused);
    tcase_add_test(tc, sidecar_write_and_check);
    suite_add_tcase(s, tc);
    return rf_test_run_suite(s);
}
