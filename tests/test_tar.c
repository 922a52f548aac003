/* test_tar.c — tar parsing, the WebDataset format, its index, pattern expansion and labels.
 *
 * Good shards are written by GNU tar itself in ustar, gnu and pax formats (they must load
 * identically); malformed ones are hand-built block by block, one defect each, so every
 * rejection is attributable to exactly the field under test, or made as users make them (GNU
 * tar and Python's tarfile joined with cat, emptied). Where the loader refuses a shard,
 * inspection (rf_shard_inspect) is checked to report the same words. */
#include <check.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loaders/dataset.h"
#include "ringfeed_shards.h"
#include "loaders/tar.h"
#include "loaders/tar_index.h"
#include "testutil.h"

/* ---- helpers ---------------------------------------------------------------------------- */

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    if (len)
        ck_assert_uint_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

static char *pathf(const char *dir, const char *name)
{
    char *p = malloc(strlen(dir) + strlen(name) + 2);
    sprintf(p, "%s/%s", dir, name);
    return p;
}

/* A fake JPEG: SOI, deterministic bytes, EOI. The loader never decodes here. */
static uint8_t *fake_jpeg(uint32_t seed, size_t len)
{
    uint8_t *b = malloc(len);
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < len; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b[i] = (uint8_t)x;
    }
    b[0] = 0xff, b[1] = 0xd8, b[len - 2] = 0xff, b[len - 1] = 0xd9;
    return b;
}

/* Growing byte buffer for hand-built archives. */
typedef struct tbuf {
    uint8_t *p;
    size_t len;
} tbuf;

static void tb_put(tbuf *t, const void *d, size_t n)
{
    t->p = realloc(t->p, t->len + n + 1);
    memcpy(t->p + t->len, d, n);
    t->len += n;
}

static void tb_zero(tbuf *t, size_t n)
{
    t->p = realloc(t->p, t->len + n + 1);
    memset(t->p + t->len, 0, n);
    t->len += n;
}

static void mkhdr(uint8_t *b, const char *name, uint64_t size, char type)
{
    memset(b, 0, 512);
    strncpy((char *)b, name, 100);
    memcpy(b + 100, "0000644", 8);
    memcpy(b + 108, "0000000", 8);
    memcpy(b + 116, "0000000", 8);
    snprintf((char *)b + 124, 12, "%011" PRIo64, size);
    memcpy(b + 136, "14000000000", 12);
    b[156] = (uint8_t)type;
    memcpy(b + 257, "ustar", 6);
    memcpy(b + 263, "00", 2);
    rf_test_tar_checksum(b);
}

/* Append a member (header, data, padding). */
static size_t tb_member(tbuf *t, const char *name, const void *data, size_t n, char type)
{
    uint8_t h[512];
    size_t at = t->len;
    mkhdr(h, name, n, type);
    tb_put(t, h, 512);
    if (n)
        tb_put(t, data, n);
    tb_zero(t, rf_tar_round_block(n) - n);
    return at;
}

static void tb_end(tbuf *t) { tb_zero(t, 1024); }

static char *save(const char *dir, const char *name, const tbuf *t)
{
    char *p = pathf(dir, name);
    write_file(p, t->p, t->len);
    return p;
}

/* Load paths with the tar format; returns the code and leaves ds filled (caller frees). */
static int load(rf_dataset *ds, const char *path, uint64_t max, rf_err *e)
{
    memset(ds, 0, sizeof *ds);
    char *paths[1] = {(char *)path};
    return rf_format_tar.open(ds, paths, 1, max, e);
}

static int load_fails(const char *path, int code, const char *needle)
{
    rf_dataset ds;
    rf_err e = {0};
    int rc = load(&ds, path, 0, &e);
    rf_dataset_free(&ds);
    ck_assert_msg(rc == code, "%s: rc %d, want %d (%s)", path, rc, code, e.msg);
    ck_assert_msg(strstr(e.msg, needle) != NULL, "message \"%s\" lacks \"%s\"", e.msg, needle);
    return rc;
}

static uint8_t *read_span(const rf_dataset *ds, const rf_sample *s)
{
    uint8_t *b = malloc(s->length + 1);
    ck_assert_int_eq(pread(ds->files[s->file].fd, b, s->length, (off_t)s->offset), (ssize_t)s->length);
    return b;
}

/* ---- the GNU tar fixture ---------------------------------------------------------------- */

#define NSAMP 9
#define LONGDIR "a-directory-name-that-is-long-enough/and-another-level-of-directories-here/and-a-third"
#define LONGBASE "sample-with-a-basename-longer-than-one-hundred-characters-which-ustar-cannot-split-anywhere-at-all-x"

typedef struct fixture {
    char *dir, *src;
    char *keys[NSAMP];
    uint8_t *jpg[NSAMP];
    size_t jpg_len[NSAMP];
    int label[NSAMP]; /* -1: no .cls member */
} fixture;

static void fx_sample(fixture *fx, int i, const char *key, size_t len, int label, FILE *list)
{
    fx->keys[i] = strdup(key);
    fx->jpg[i] = fake_jpeg((uint32_t)i + 1, len);
    fx->jpg_len[i] = len;
    fx->label[i] = label;
    char rel[512], *p;
    snprintf(rel, sizeof rel, "%s.jpg", key);
    p = pathf(fx->src, rel);
    write_file(p, fx->jpg[i], len);
    free(p);
    fprintf(list, "%s\n", rel);
    if (label >= 0) {
        char txt[32];
        snprintf(rel, sizeof rel, "%s.cls", key);
        snprintf(txt, sizeof txt, "%d\n", label);
        p = pathf(fx->src, rel);
        write_file(p, txt, strlen(txt));
        free(p);
        fprintf(list, "%s\n", rel);
    }
    snprintf(rel, sizeof rel, "%s.json", key); /* a third member that is neither */
    p = pathf(fx->src, rel);
    write_file(p, "{}", 2);
    free(p);
    fprintf(list, "%s\n", rel);
}

/* long_base: include a basename over 100 characters (not representable in plain ustar). */
static void fx_make(fixture *fx, int long_base)
{
    memset(fx, 0, sizeof *fx);
    fx->dir = rf_test_mkdtemp("tar");
    fx->src = pathf(fx->dir, "src");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s/" LONGDIR "' '%s/sub' '%s/sub.d'", fx->src, fx->src, fx->src);
    ck_assert_int_eq(system(cmd), 0);
    char *listp = pathf(fx->dir, "list");
    FILE *list = fopen(listp, "w");
    static const size_t lens[NSAMP] = {3, 511, 512, 513, 100, 4000, 20000, 1024, 77};
    for (int i = 0; i < 5; i++) {
        char key[64];
        snprintf(key, sizeof key, "s%04d", i);
        fx_sample(fx, i, key, lens[i], i == 2 ? -1 : i * 7, list);
    }
    fprintf(list, "sub\n"); /* a directory member between samples: ignored */
    snprintf(cmd, sizeof cmd, "ln -s s0000.jpg '%s/link.jpg'", fx->src);
    ck_assert_int_eq(system(cmd), 0);
    fprintf(list, "link.jpg\n"); /* a symlink member: ignored, never followed */
    fx_sample(fx, 5, LONGDIR "/deep-sample", lens[5], 55, list); /* path > 100 characters */
    fx_sample(fx, 6, "sub.d/x", lens[6], 66, list); /* a dot in a directory is not the key's */
    fx_sample(fx, 7, long_base ? LONGDIR "/" LONGBASE : "sub/s7", lens[7], 77, list);
    fx_sample(fx, 8, "s0008", lens[8], 88, list);
    fclose(list);
    free(listp);
}

static void fx_free(fixture *fx)
{
    for (int i = 0; i < NSAMP; i++)
        free(fx->keys[i]), free(fx->jpg[i]);
    free(fx->src);
    free(fx->dir);
}

static char *fx_tar(const fixture *fx, const char *format)
{
    char name[64], cmd[8192];
    snprintf(name, sizeof name, "%s.tar", format);
    char *out = pathf(fx->dir, name);
    snprintf(cmd, sizeof cmd,
             "tar --format=%s --no-recursion --owner=0 --group=0 -cf '%s' -C '%s' -T '%s/list'",
             format, out, fx->src, fx->dir);
    ck_assert_int_eq(system(cmd), 0);
    return out;
}

/* Every sample: key as written, the located payload equals the input, the label parses. */
static void check_loaded(const fixture *fx, const rf_dataset *ds)
{
    ck_assert_uint_eq(ds->nsamples, NSAMP);
    for (uint64_t i = 0; i < ds->nsamples; i++) {
        const rf_sample *s = &ds->samples[i];
        const char *key = ds->keys + s->key;
        ck_assert_str_eq(key, fx->keys[i]);
        ck_assert_uint_eq(s->flags & RF_SAMPLE_TAR, RF_SAMPLE_TAR);
        ck_assert_int_eq(s->label, -1);
        uint8_t *span = read_span(ds, s);
        uint32_t doff, dlen, dhdr, loff, llen, lhdr;
        rf_err e = {0};
        int rc = rf_tar_locate(span, s->length, key, RF_TAR_IMAGE_EXTS, NULL, &doff, &dlen, &dhdr,
                               &loff, &llen, &lhdr, &e);
        ck_assert_msg(rc == 0, "locate %s: %s", key, e.msg);
        ck_assert_uint_eq(dlen, fx->jpg_len[i]);
        ck_assert_int_eq(memcmp(span + doff, fx->jpg[i], dlen), 0);
        /* the scan's hints equal what locate finds in the bytes */
        ck_assert_uint_eq(doff, s->data_off);
        ck_assert_uint_eq(dlen, s->data_len);
        ck_assert_uint_eq(dhdr, s->data_hdr);
        ck_assert_uint_eq(llen, s->label_len);
        if (fx->label[i] < 0) {
            ck_assert_uint_eq(llen, 0);
            ck_assert_uint_eq(loff, 0); /* no label member */
        } else {
            int32_t lab;
            ck_assert_uint_eq(loff, s->label_off);
            ck_assert_int_eq(rf_parse_label(span + loff, llen, &lab), 0);
            ck_assert_int_eq(lab, fx->label[i]);
        }
        free(span);
    }
}

START_TEST(gnu_tar_formats_load_identically)
{
    fixture fx;
    fx_make(&fx, 0);
    static const char *formats[] = {"ustar", "gnu", "pax"};
    for (int f = 0; f < 3; f++) {
        char *shard = fx_tar(&fx, formats[f]);
        rf_dataset ds;
        rf_err e = {0};
        int rc = load(&ds, shard, 0, &e);
        ck_assert_msg(rc == 0, "%s: %s", formats[f], e.msg);
        check_loaded(&fx, &ds);
        rf_dataset_free(&ds);
        free(shard);
    }
    fx_free(&fx);
}
END_TEST

/* Inspection's problems' messages, one a line. */
typedef struct link_problems {
    char msg[4096];
    size_t len;
} link_problems;

static int on_link_problem(void *ctx, const rf_inspect_problem *p)
{
    link_problems *c = ctx;
    c->len += (size_t)snprintf(c->msg + c->len, sizeof c->msg - c->len, "%s\n", p->message);
    c->len = c->len < sizeof c->msg ? c->len : sizeof c->msg - 1;
    return 0;
}

/* Links written by GNU tar: a file stored under two names (a hard link: the second is a link
 * member) and a symlink to an image. Neither is followed, so their samples have no image, and
 * the error says which member is a link and how to write the shard instead; so does
 * inspection (which also finds the first file's fake JPEG bad). Written with --hard-dereference --dereference the shard loads, every sample
 * with the bytes of the file its name reached. */
START_TEST(gnu_tar_links_named)
{
    char *dir = rf_test_mkdtemp("tar-links"), cmd[4096];
    uint8_t *j = fake_jpeg(3, 700);
    static const char *const files[] = {"a.jpg", "a.cls", "b.cls", "c.cls"};
    for (int i = 0; i < 4; i++) {
        char *p = pathf(dir, files[i]);
        write_file(p, i ? "1" : (const char *)j, i ? 1 : 700);
        free(p);
    }
    snprintf(cmd, sizeof cmd, "cd '%s' && ln a.jpg b.jpg && ln -s a.jpg c.jpg", dir);
    ck_assert_int_eq(system(cmd), 0);
    static const struct { const char *opts, *name, *says; } cases[] = {
        {"", "hard.tar", "sample b at offset 3072 has no image member (jpg,jpeg,png,webp); its "
         "members have the extensions cls; its member b.jpg at offset 2560 is a hard link, "
         "which is not followed (write the shard with tar --hard-dereference)"},
        {"--hard-dereference", "sym.tar", "sample c at offset 5632 has no image member "
         "(jpg,jpeg,png,webp); its members have the extensions cls; its member c.jpg at offset "
         "5120 is a symbolic link, which is not followed (write the shard with tar "
         "--dereference)"},
        {"--hard-dereference --dereference", "deref.tar", NULL},
    };
    for (size_t i = 0; i < 3; i++) {
        char *shard = pathf(dir, cases[i].name);
        snprintf(cmd, sizeof cmd, "tar --format=gnu %s -cf '%s' -C '%s' a.jpg a.cls b.jpg b.cls "
                 "c.jpg c.cls", cases[i].opts, shard, dir);
        ck_assert_int_eq(system(cmd), 0);
        if (cases[i].says) {
            load_fails(shard, RF_EFORMAT, cases[i].says);
            link_problems c = {0};
            rf_inspect_options o;
            rf_inspect_options_init(&o);
            rf_inspect_summary sum;
            rf_inspect_summary_init(&sum);
            rf_shard_inspect(shard, &o, on_link_problem, NULL, &c, &sum);
            ck_assert_msg(strstr(c.msg, strstr(cases[i].says, "its members have")), "%s", c.msg);
            /* image bytes are summed over the samples that have an image, and counted */
            ck_assert_uint_eq(sum.with_image, i + 1);
            ck_assert_uint_eq(sum.image_bytes, 700 * (i + 1));
        } else {
            rf_dataset ds;
            rf_err e = {0};
            ck_assert_msg(load(&ds, shard, 0, &e) == 0, "%s", e.msg);
            ck_assert_uint_eq(ds.nsamples, 3);
            for (uint64_t k = 0; k < 3; k++) {
                const rf_sample *sm = &ds.samples[k];
                uint8_t *span = read_span(&ds, sm);
                ck_assert_uint_eq(sm->data_len, 700);
                ck_assert_int_eq(memcmp(span + sm->data_off, j, 700), 0);
                free(span);
            }
            rf_dataset_free(&ds);
        }
        free(shard);
    }
    free(j);
    free(dir);
}
END_TEST

START_TEST(long_names_gnu_and_pax)
{
    fixture fx;
    fx_make(&fx, 1);
    static const char *formats[] = {"gnu", "pax"};
    for (int f = 0; f < 2; f++) {
        char *shard = fx_tar(&fx, formats[f]);
        rf_dataset ds;
        rf_err e = {0};
        int rc = load(&ds, shard, 0, &e);
        ck_assert_msg(rc == 0, "%s: %s", formats[f], e.msg);
        check_loaded(&fx, &ds);
        ck_assert_uint_gt(strlen(ds.keys + ds.samples[7].key), 100);
        rf_dataset_free(&ds);
        free(shard);
    }
    fx_free(&fx);
}
END_TEST

/* Loads of the same shard, by scan and by index, give byte-identical tables. */
static void same_tables(const rf_dataset *a, const rf_dataset *b)
{
    ck_assert_uint_eq(a->nsamples, b->nsamples);
    for (uint64_t i = 0; i < a->nsamples; i++) {
        const rf_sample *x = &a->samples[i], *y = &b->samples[i];
        ck_assert_str_eq(a->keys + x->key, b->keys + y->key);
        ck_assert_uint_eq(x->offset, y->offset);
        ck_assert_uint_eq(x->length, y->length);
        ck_assert_uint_eq(x->data_off, y->data_off);
        ck_assert_uint_eq(x->data_len, y->data_len);
        ck_assert_uint_eq(x->data_hdr, y->data_hdr);
        ck_assert_uint_eq(x->label_off, y->label_off);
        ck_assert_uint_eq(x->label_len, y->label_len);
        ck_assert_uint_eq(x->flags, y->flags);
        ck_assert_int_eq(x->label, y->label);
    }
}

START_TEST(index_read_equals_scan)
{
    fixture fx;
    fx_make(&fx, 1);
    static const char *formats[] = {"gnu", "pax"};
    for (int f = 0; f < 2; f++) {
        char *shard = fx_tar(&fx, formats[f]);
        rf_dataset scan, idx;
        rf_err e = {0};
        ck_assert_int_eq(load(&scan, shard, 0, &e), 0);
        char ipath[4096];
        ck_assert_int_eq(rf_tar_find_index(shard, ipath, sizeof ipath), 0);
        snprintf(ipath, sizeof ipath, "%.*s.idx", (int)(strlen(shard) - 4), shard);
        ck_assert_msg(rf_tar_write_index(shard, ipath, &e) == 0, "%s", e.msg);
        char found[4096];
        ck_assert_int_eq(rf_tar_find_index(shard, found, sizeof found), 1);
        ck_assert_str_eq(found, ipath);
        size_t n;
        char *text = (char *)rf_test_read_file(ipath, &n);
        ck_assert_int_eq(strncmp(text, "v1.2 9\n", 7), 0);
        free(text);
        int rc = load(&idx, shard, 0, &e);
        ck_assert_msg(rc == 0, "%s", e.msg);
        same_tables(&scan, &idx);
        check_loaded(&fx, &idx);
        rf_dataset_free(&scan);
        rf_dataset_free(&idx);
        free(shard);
    }
    fx_free(&fx);
}
END_TEST

/* ---- index that disagrees with its shard ------------------------------------------------ */

/* A shard of n plain samples (key.jpg + key.cls) and its index text, for mutation. */
static char *plain_shard(const char *dir, const char *name, int n, tbuf *t)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < n; i++) {
        char nm[64], lab[16];
        uint8_t *j = fake_jpeg((uint32_t)i, 300 + 100 * (size_t)i);
        snprintf(nm, sizeof nm, "k%03d.jpg", i);
        tb_member(t, nm, j, 300 + 100 * (size_t)i, '0');
        snprintf(nm, sizeof nm, "k%03d.cls", i);
        snprintf(lab, sizeof lab, "%d", i);
        tb_member(t, nm, lab, strlen(lab), '0');
        free(j);
    }
    tb_end(t);
    return save(dir, name, t);
}

static void index_case(const char *dir, const char *text, const char *needle)
{
    tbuf t;
    char *shard = plain_shard(dir, "bad.tar", 20, &t);
    char *ip = pathf(dir, "bad.idx");
    write_file(ip, text, strlen(text));
    rf_dataset ds;
    rf_err e = {0};
    int rc = load(&ds, shard, 0, &e);
    rf_dataset_free(&ds);
    ck_assert_msg(rc == RF_EINDEX, "rc %d (%s) for index:\n%s", rc, e.msg, text);
    ck_assert_msg(strstr(e.msg, ip) && strstr(e.msg, needle), "message \"%s\" lacks \"%s\"",
                  e.msg, needle);
    unlink(ip);
    free(ip);
    free(shard);
    free(t.p);
}

/* Make the good index text for plain_shard(20), then apply one textual mutation. */
static char *good_index(const char *dir)
{
    tbuf t;
    char *shard = plain_shard(dir, "bad.tar", 20, &t);
    char *ip = pathf(dir, "good.idx");
    rf_err e = {0};
    ck_assert_msg(rf_tar_write_index(shard, ip, &e) == 0, "%s", e.msg);
    size_t n;
    char *text = (char *)rf_test_read_file(ip, &n);
    text = realloc(text, n + 1);
    text[n] = 0;
    unlink(ip);
    free(ip);
    free(shard);
    free(t.p);
    return text;
}

static char *replace(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    ck_assert_ptr_nonnull(at);
    char *r = malloc(strlen(s) + strlen(to) + 1);
    sprintf(r, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return r;
}

START_TEST(index_disagreeing_is_detected)
{
    char *dir = rf_test_mkdtemp("tar-idx");
    char *good = good_index(dir);
    /* sanity: the good index loads */
    {
        tbuf t;
        char *shard = plain_shard(dir, "ok.tar", 20, &t);
        char *ip = pathf(dir, "ok.idx");
        write_file(ip, good, strlen(good));
        rf_dataset ds;
        rf_err e = {0};
        ck_assert_msg(load(&ds, shard, 0, &e) == 0, "%s", e.msg);
        ck_assert_uint_eq(ds.nsamples, 20);
        rf_dataset_free(&ds);
        free(ip), free(shard), free(t.p);
    }
    char *m;
    index_case(dir, (m = replace(good, "v1.2 20", "v1.2 21")), "line 1"), free(m);
    index_case(dir, (m = replace(good, "v1.2 20", "v1.1 20")), "v1.1"), free(m);
    index_case(dir, (m = replace(good, "v1.2 20", "v9 20")), "line 1"), free(m);
    /* a wrong size in a middle sample: its neighbour no longer follows it, so it is read */
    index_case(dir, (m = replace(good, " 1000 k007.jpg", " 400 k007.jpg")), "line 9"), free(m);
    /* a size that crosses into the next member */
    index_case(dir, (m = replace(good, " 1000 k007.jpg", " 1200 k007.jpg")), "line 9"), free(m);
    /* a name that disagrees with the shard's header (first sample is always checked) */
    index_case(dir, (m = replace(good, "k000.cls", "k000.txt")), "line 2"), free(m);
    index_case(dir, (m = replace(good, "cls 1024 ", "cls 1025 ")), "line 2"), free(m);
    {
        char *m1 = replace(good, "k000.jpg", "z000.jpg"), *m2 = replace(m1, "k000.cls", "z000.cls");
        index_case(dir, m2, "header at offset 0 names k000.jpg");
        free(m1), free(m2);
    }
    index_case(dir, (m = replace(good, "jpg 0 300 k000.jpg", "jpg 0 300 k001.jpg")), "line 2"),
        free(m);
    index_case(dir, (m = replace(good, "jpg 0 300", "jpg 0 9999999")), "line 2"), free(m);
    index_case(dir, (m = replace(good, "jpg 0 300", "jpg 0 3x0")), "line 2"), free(m);
    /* offsets that go backwards */
    index_case(dir, (m = replace(good, "jpg 2048 400", "jpg 1024 400")), "line 3"), free(m);
    free(good);
    free(dir);
}
END_TEST

/* An index larger than the loader reads (1 GiB; a sparse file here) is RF_EINDEX before any
 * memory is taken for it, and the message starts with the index's path and names the limit. */
START_TEST(index_over_limit_is_refused)
{
    char *dir = rf_test_mkdtemp("tar-idx-big");
    tbuf t;
    char *shard = plain_shard(dir, "big.tar", 4, &t);
    char *ip = pathf(dir, "big.idx");
    write_file(ip, "v1.2 4\n", 7);
    ck_assert_int_eq(truncate(ip, (off_t)(1ll << 30) + 1), 0);
    rf_dataset ds;
    rf_err e = {0};
    int rc = load(&ds, shard, 0, &e);
    rf_dataset_free(&ds);
    ck_assert_msg(rc == RF_EINDEX, "rc %d (%s)", rc, e.msg);
    ck_assert_msg(strncmp(e.msg, ip, strlen(ip)) == 0 && strstr(e.msg, "larger than 1073741824"),
                  "%s", e.msg);
    ck_assert_int_eq(unlink(ip), 0);
    free(ip), free(shard), free(t.p);
    free(dir);
}
END_TEST

/* ---- hand-built malformed archives ------------------------------------------------------ */

START_TEST(bad_checksum_names_file_and_offset)
{
    char *dir = rf_test_mkdtemp("tar-bad");
    tbuf t = {0};
    uint8_t j[100] = {0xff, 0xd8};
    tb_member(&t, "a.jpg", j, sizeof j, '0');
    size_t at = tb_member(&t, "b.jpg", j, sizeof j, '0');
    t.p[at + 10] ^= 1; /* flip a bit in the name: the checksum no longer matches */
    tb_end(&t);
    char *p = save(dir, "train-0003.tar", &t);
    char want[4200];
    snprintf(want, sizeof want, "%s: bad header checksum at offset 1024", p);
    load_fails(p, RF_EFORMAT, want);
    free(p), free(t.p);
    free(dir);
}
END_TEST

START_TEST(signed_checksum_accepted)
{
    uint8_t b[512];
    mkhdr(b, "x\xe9.jpg", 0, '0');
    /* rewrite the checksum as the historic signed sum */
    memset(b + 148, ' ', 8);
    int sum = 0;
    for (int i = 0; i < 512; i++)
        sum += (signed char)b[i];
    snprintf((char *)b + 148, 8, "%06o", sum);
    rf_err e = {0};
    ck_assert_int_eq(rf_tar_check_header(b, &e), 0);
    rf_test_tar_checksum(b);
    ck_assert_int_eq(rf_tar_check_header(b, &e), 0);
    b[148] = '9';
    ck_assert_int_eq(rf_tar_check_header(b, &e), RF_EFORMAT);
}
END_TEST

START_TEST(truncated_member)
{
    char *dir = rf_test_mkdtemp("tar-trunc");
    tbuf t = {0};
    uint8_t *j = fake_jpeg(1, 10000);
    tb_member(&t, "a.jpg", j, 600, '0');
    size_t at = tb_member(&t, "b.jpg", j, 10000, '0');
    t.len = at + 512 + 2000; /* the data stops early */
    char *p = save(dir, "t.tar", &t);
    char want[64];
    snprintf(want, sizeof want, "at offset %zu", at);
    load_fails(p, RF_EFORMAT, "truncated member b.jpg");
    load_fails(p, RF_EFORMAT, want);
    /* a header cut in the middle */
    t.len = at + 100;
    free(p);
    p = save(dir, "t2.tar", &t);
    load_fails(p, RF_EFORMAT, "truncated header");
    free(p), free(j), free(t.p);
    free(dir);
}
END_TEST

START_TEST(garbage_numeric_fields)
{
    char *dir = rf_test_mkdtemp("tar-num");
    uint8_t b[512];
    rf_err e = {0};
    mkhdr(b, "a.jpg", 10, '0');
    memcpy(b + 124, "0000001x012", 11);
    rf_test_tar_checksum(b);
    ck_assert_int_eq(rf_tar_check_header(b, &e), RF_EFORMAT);
    ck_assert_str_eq(e.msg, "bad size field");
    mkhdr(b, "a.jpg", 10, '0');
    memcpy(b + 124, "00000 01012", 11); /* digits after a terminator */
    rf_test_tar_checksum(b);
    ck_assert_int_eq(rf_tar_check_header(b, &e), RF_EFORMAT);
    mkhdr(b, "a.jpg", 10, '0');
    memcpy(b + 100, "0006-44", 7);
    rf_test_tar_checksum(b);
    ck_assert_int_eq(rf_tar_check_header(b, &e), RF_EFORMAT);
    ck_assert_str_eq(e.msg, "bad mode field");
    /* the largest 11-digit octal size */
    mkhdr(b, "a.jpg", 0, '0');
    memcpy(b + 124, "77777777777", 11); /* 8 GiB - 1: large but legal */
    rf_test_tar_checksum(b);
    ck_assert_int_eq(rf_tar_check_header(b, &e), 0);
    /* in a file: the message has path and offset */
    tbuf t = {0};
    tb_member(&t, "a.jpg", "\xff\xd8", 2, '0');
    size_t at = tb_member(&t, "b.jpg", "\xff\xd8", 2, '0');
    memcpy(t.p + at + 124, "0000000002z", 11);
    rf_test_tar_checksum(t.p + at);
    tb_end(&t);
    char *p = save(dir, "g.tar", &t);
    load_fails(p, RF_EFORMAT, "bad size field at offset 1024");
    free(p), free(t.p);
    /* numbers: leading spaces, space or NUL terminators, full-width fields */
    uint64_t v;
    ck_assert_int_eq(rf_tar_parse_number((const uint8_t *)"  17 \0\0\0", 8, &v), 0);
    ck_assert_uint_eq(v, 15);
    ck_assert_int_eq(rf_tar_parse_number((const uint8_t *)"77777777", 8, &v), 0);
    ck_assert_uint_eq(v, 077777777);
    ck_assert_int_eq(rf_tar_parse_number((const uint8_t *)"\0\0\0\0", 4, &v), 0);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(rf_tar_parse_number((const uint8_t *)"12 3", 4, &v), -1);
    ck_assert_int_eq(rf_tar_parse_number((const uint8_t *)"8", 1, &v), -1);
    free(dir);
}
END_TEST

START_TEST(base256_size)
{
    char *dir = rf_test_mkdtemp("tar-b256");
    tbuf t = {0};
    uint8_t *j = fake_jpeg(3, 700);
    size_t at = tb_member(&t, "k.jpg", j, 700, '0');
    tb_end(&t);
    uint8_t *f = t.p + at + 124;
    memset(f, 0, 12);
    f[0] = 0x80;
    f[10] = 700 >> 8;
    f[11] = 700 & 0xff;
    rf_test_tar_checksum(t.p + at);
    char *p = save(dir, "b.tar", &t);
    rf_dataset ds;
    rf_err e = {0};
    ck_assert_msg(load(&ds, p, 0, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(ds.nsamples, 1);
    ck_assert_uint_eq(ds.samples[0].data_len, 700);
    uint8_t *span = read_span(&ds, &ds.samples[0]);
    ck_assert_int_eq(memcmp(span + ds.samples[0].data_off, j, 700), 0);
    free(span);
    rf_dataset_free(&ds);
    /* negative base-256 */
    f[0] = 0xff;
    rf_test_tar_checksum(t.p + at);
    free(p);
    p = save(dir, "neg.tar", &t);
    load_fails(p, RF_EFORMAT, "bad size field at offset 0");
    /* positive but 2^41 */
    memset(f, 0, 12);
    f[0] = 0x80;
    f[6] = 0x02;
    rf_test_tar_checksum(t.p + at);
    free(p);
    p = save(dir, "huge.tar", &t);
    load_fails(p, RF_EFORMAT, "exceeds the limit");
    free(p), free(j), free(t.p);
    free(dir);
}
END_TEST

/* A pax header with body `body` before member `name`. */
static void tb_pax(tbuf *t, const char *body, size_t n, char type)
{
    tb_member(t, "PaxHeaders/x", body, n, type);
}

static void pax_case(const char *dir, const char *body, const char *needle)
{
    tbuf t = {0};
    tb_pax(&t, body, strlen(body), 'x');
    tb_member(&t, "short.jpg", "\xff\xd8", 2, '0');
    tb_end(&t);
    char *p = save(dir, "pax.tar", &t);
    load_fails(p, RF_EFORMAT, needle);
    free(p), free(t.p);
}

START_TEST(pax_records_strict)
{
    char *dir = rf_test_mkdtemp("tar-pax");
    pax_case(dir, "99999999999 path=a.jpg\n", "bad pax record length at offset 0");
    pax_case(dir, "20 path=a.jpg\n", "length does not match");
    pax_case(dir, "15 path=a.jpg\n", "length does not match"); /* lands past the newline */
    pax_case(dir, "12 pathajpg\n", "without key=value");
    pax_case(dir, "x path=a.jpg\n", "bad pax record length");
    pax_case(dir, "11 size=1x\n", "bad pax size");
    pax_case(dir, "23 size=99999999999999\n", "bad pax size");
    pax_case(dir, "21 GNU.sparse.size=1\n", "sparse");
    /* a pax header over the limit */
    tbuf t = {0};
    size_t big = RF_TAR_PAX_MAX + 1;
    char *body = malloc(big);
    memset(body, 'a', big);
    tb_pax(&t, body, big, 'x');
    tb_member(&t, "short.jpg", "\xff\xd8", 2, '0');
    tb_end(&t);
    char *p = save(dir, "pbig.tar", &t);
    load_fails(p, RF_EFORMAT, "pax header too large");
    free(p), free(t.p), free(body);
    /* a good pax path and size override; a global header is ignored */
    memset(&t, 0, sizeof t);
    tb_pax(&t, "18 path=ignored.x\n", 18, 'g');
    tb_pax(&t, "21 path=dir/good.jpg\n", 21, 'x');
    tb_member(&t, "dir/trunc.jpg", "\xff\xd8\xff\xd9", 4, '0');
    tb_end(&t);
    p = save(dir, "pgood.tar", &t);
    rf_dataset ds;
    rf_err e = {0};
    ck_assert_msg(load(&ds, p, 0, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(ds.nsamples, 1);
    ck_assert_str_eq(ds.keys, "dir/good");
    ck_assert_uint_eq(ds.samples[0].offset, 0); /* the span starts at the global header */
    rf_dataset_free(&ds);
    free(p), free(t.p);
    free(dir);
}
END_TEST

START_TEST(gnu_long_name_limits)
{
    char *dir = rf_test_mkdtemp("tar-gnu");
    tbuf t = {0};
    size_t big = 100000;
    char *name = malloc(big);
    memset(name, 'n', big);
    tb_member(&t, "././@LongLink", name, big, 'L');
    tb_member(&t, "short.jpg", "\xff\xd8", 2, '0');
    tb_end(&t);
    char *p = save(dir, "long.tar", &t);
    load_fails(p, RF_EFORMAT, "GNU long name too long at offset 0");
    free(p), free(t.p);
    /* too many extension records */
    memset(&t, 0, sizeof t);
    for (int i = 0; i < RF_TAR_EXT_RECORDS_MAX + 2; i++)
        tb_member(&t, "././@LongLink", "a.jpg", 6, 'L');
    tb_member(&t, "short.jpg", "\xff\xd8", 2, '0');
    tb_end(&t);
    p = save(dir, "many.tar", &t);
    load_fails(p, RF_EFORMAT, "too many extended header records");
    free(p), free(t.p), free(name);
    free(dir);
}
END_TEST

START_TEST(end_of_archive_variants)
{
    char *dir = rf_test_mkdtemp("tar-end");
    tbuf t = {0};
    tb_member(&t, "a.jpg", "\xff\xd8", 2, '0');
    tb_member(&t, "b.jpg", "\xff\xd8", 2, '0');
    char *p = save(dir, "noend.tar", &t); /* EOF on a block boundary */
    rf_dataset ds;
    rf_err e = {0};
    ck_assert_msg(load(&ds, p, 0, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(ds.nsamples, 2);
    rf_dataset_free(&ds);
    free(p);
    tb_zero(&t, 512); /* a single end block */
    p = save(dir, "oneend.tar", &t);
    ck_assert_msg(load(&ds, p, 0, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(ds.nsamples, 2);
    rf_dataset_free(&ds);
    free(p);
    tb_member(&t, "c.jpg", "\xff\xd8", 2, '0'); /* a lone zero block, then a member */
    p = save(dir, "lone.tar", &t);
    load_fails(p, RF_EFORMAT, "lone zero block inside the archive at offset 2048");
    free(p);
    t.len = 1024 + 100; /* EOF off a block boundary */
    p = save(dir, "cut.tar", &t);
    load_fails(p, RF_EFORMAT, "truncated header at offset 1024");
    free(p), free(t.p);
    free(dir);
}
END_TEST

/* ---- what follows the end of the archive; shards without samples ------------------------ */

/* path without its last `cut` bytes, then suffix (malloc'ed). */
static char *resuffix(const char *path, size_t cut, const char *suffix)
{
    size_t n = strlen(path) - cut;
    char *p = malloc(n + strlen(suffix) + 1);
    sprintf(p, "%.*s%s", (int)n, path, suffix);
    return p;
}

/* rf_shard_inspect of path: its return code and its first problem (inspection and the loader
 * must refuse the same shards with the same words). */
typedef struct first_problem {
    uint64_t n, offset;
    int code;
    char msg[1024];
} first_problem;

static int keep_first(void *ctx, const rf_inspect_problem *p)
{
    first_problem *f = ctx;
    if (f->n++ == 0) {
        f->code = p->code;
        f->offset = p->offset;
        snprintf(f->msg, sizeof f->msg, "%s", p->message);
    }
    return 0;
}

static int inspect_first(const char *path, first_problem *f, rf_inspect_summary *s)
{
    memset(f, 0, sizeof *f);
    rf_inspect_summary_init(s);
    rf_inspect_options o;
    rf_inspect_options_init(&o);
    o.check_jpeg = 0; /* the fake JPEGs here are not decodable: structure only */
    o.label_source = RF_LABEL_NONE; /* and not every fixture sample has a label */
    return rf_shard_inspect(path, &o, keep_first, NULL, f, s);
}

/* The loader refuses path with `code` and a message holding `needle`; inspection reports the
 * loader's very message (after its "<path>: offset <N>: " prefix) at offset `at`. */
static void both_refuse(const char *path, int code, const char *needle, uint64_t at)
{
    rf_dataset ds;
    rf_err e = {0};
    int rc = load(&ds, path, 0, &e);
    rf_dataset_free(&ds);
    ck_assert_msg(rc == code && strstr(e.msg, needle), "%s: rc %d (%s), want %d with \"%s\"",
                  path, rc, e.msg, code, needle);
    first_problem f;
    rf_inspect_summary s;
    ck_assert_int_eq(inspect_first(path, &f, &s), code);
    ck_assert_int_eq(f.code, code);
    ck_assert_uint_eq(f.offset, at);
    const char *loader_what = e.msg + strlen(path) + 2; /* the loader's text after "<path>: " */
    ck_assert_msg(strstr(f.msg, loader_what), "inspect said \"%s\", the loader \"%s\"", f.msg,
                  e.msg);
}

/* A new directory with k<i>.jpg (a fake JPEG of 300 + 50 i bytes) and k<i>.cls for i < n in
 * its src/, for tar and tarfile to pack. */
static char *src_dir(const char *tag, int n)
{
    char *dir = rf_test_mkdtemp(tag);
    ck_assert_int_eq(rf_test_shell("mkdir -p %s/src", dir), 0);
    for (int i = 0; i < n; i++) {
        char name[64], lab[16];
        snprintf(name, sizeof name, "src/k%d.jpg", i);
        char *p = pathf(dir, name);
        uint8_t *j = fake_jpeg((uint32_t)i, 300 + 50 * (size_t)i);
        write_file(p, j, 300 + 50 * (size_t)i);
        free(p), free(j);
        snprintf(name, sizeof name, "src/k%d.cls", i);
        snprintf(lab, sizeof lab, "%d", i);
        p = pathf(dir, name);
        write_file(p, lab, strlen(lab));
        free(p);
    }
    return dir;
}

/* `cat a.tar b.tar` hides b's members behind a's end-of-archive marker: every reader stops
 * there. Made by GNU tar and by Python's tarfile (both pad to 10240-byte records, so b starts
 * at 10240), refused by the loader and inspection alike, naming the shard, the marker's offset
 * and the first byte after it; zero padding is fine, and tar --concatenate is the fix. */
START_TEST(data_after_end_of_archive_refused)
{
    char *dir = src_dir("tar-cat", 4);
    ck_assert_int_eq(rf_test_shell("cd %s/src && tar --format=gnu -cf ../a.tar k0.jpg k0.cls k1.jpg "
                                   "k1.cls && tar --format=gnu -cf ../b.tar k2.jpg k2.cls k3.jpg "
                                   "k3.cls && cat ../a.tar ../b.tar > ../gnu.tar", dir), 0);
    ck_assert_int_eq(rf_test_shell(
        "cd %s/src && python3 -c 'import tarfile, sys\n"
        "for out, ks in ((\"../pa.tar\", \"01\"), (\"../pb.tar\", \"23\")):\n"
        "    with tarfile.open(out, \"w\") as t:\n"
        "        for k in ks:\n"
        "            t.add(\"k%%s.jpg\" %% k); t.add(\"k%%s.cls\" %% k)' && "
        "cat ../pa.tar ../pb.tar > ../py.tar", dir), 0);
    static const char *joined[] = {"gnu.tar", "py.tar"};
    for (int k = 0; k < 2; k++) {
        char *p = pathf(dir, joined[k]), want[4400];
        /* a's four members take two blocks each (tarfile adds a pax header to each): its
         * marker is at 4096 (8192) */
        snprintf(want, sizeof want, "%s: data after the end-of-archive marker at offset %d: "
                 "non-zero bytes at offset 10240 (a tar header, member k2.jpg)", p,
                 k ? 8192 : 4096);
        both_refuse(p, RF_EFORMAT, want, 10240);
        rf_err e = {0};
        char *ip = pathf(dir, "x.idx");
        ck_assert_int_eq(rf_tar_write_index(p, ip, &e), RF_EFORMAT);
        ck_assert_msg(strstr(e.msg, want), "%s", e.msg);
        /* with the first archive's index beside it, the same error: the shard's, not the
         * index's */
        char *first = pathf(dir, k ? "pa.tar" : "a.tar"), *beside = resuffix(p, 4, ".idx");
        ck_assert_msg(rf_tar_write_index(first, beside, &e) == 0, "%s", e.msg);
        both_refuse(p, RF_EFORMAT, want, 10240);
        unlink(beside);
        free(first), free(beside), free(ip), free(p);
    }
    /* the padding alone loads; one stray byte in it is named */
    char *a = pathf(dir, "a.tar");
    rf_dataset ds;
    rf_err e = {0};
    ck_assert_msg(load(&ds, a, 0, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(ds.nsamples, 2);
    rf_dataset_free(&ds);
    ck_assert_int_eq(rf_test_shell("cd %s && cp a.tar stray.tar && printf x | dd of=stray.tar "
                                   "bs=1 seek=7000 conv=notrunc 2>/dev/null", dir), 0);
    char *stray = pathf(dir, "stray.tar");
    both_refuse(stray, RF_EFORMAT, "at offset 4096: non-zero bytes at offset 7000;", 7000);
    /* joined the right way, all four samples are there */
    ck_assert_int_eq(rf_test_shell("cd %s && cp a.tar ab.tar && tar -Af ab.tar b.tar", dir), 0);
    char *ab = pathf(dir, "ab.tar");
    ck_assert_msg(load(&ds, ab, 0, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(ds.nsamples, 4);
    rf_dataset_free(&ds);
    free(a), free(stray), free(ab);
    free(dir);
}
END_TEST

/* A shard without a sample is refused, even next to good ones: an empty file, an empty archive
 * (GNU tar's: 10240 zero bytes) and an archive of directories only; inspection agrees. */
START_TEST(shard_without_samples_refused)
{
    char *dir = rf_test_mkdtemp("tar-empty");
    ck_assert_int_eq(rf_test_shell("mkdir -p %s/src/d && cd %s && : > empty.tar && "
                                   "tar -cf zero.tar -T /dev/null && tar --no-recursion -cf "
                                   "dirs.tar -C src d", dir, dir), 0);
    static const char *name[] = {"empty.tar", "zero.tar", "dirs.tar"};
    static const char *what[] = {"no samples: the file is empty (0 bytes)",
                                 "no samples: an empty archive (10240 bytes, all zero)",
                                 "no samples: the archive's 1 members are all directories"};
    tbuf t;
    char *good = plain_shard(dir, "good.tar", 3, &t);
    for (int k = 0; k < 3; k++) {
        char *p = pathf(dir, name[k]), want[4400];
        snprintf(want, sizeof want, "%s: %s", p, what[k]);
        both_refuse(p, RF_EFORMAT, want, 0);
        const char *pats[2] = {good, p};
        rf_config c = rf_test_host_config(pats, good, 32);
        c.shards = pats;
        c.shard_count = 2;
        rf_loader *ld = NULL;
        char err[512];
        ck_assert_int_eq(rf_loader_create(&c, &ld, err, sizeof err), RF_EFORMAT);
        ck_assert_msg(strstr(err, want), "%s", err);
        free(p);
    }
    free(good), free(t.p);
    free(dir);
}
END_TEST

/* ---- an index must cover its shard ------------------------------------------------------- */

/* The loader refuses shard with RF_EINDEX naming its index, the shard, `needle` and the fix;
 * inspection reports the loader's words at offset `at`, as a problem of the index file. */
static void index_refused(const char *shard, const char *idx, const char *needle, uint64_t at)
{
    rf_dataset ds;
    rf_err e = {0};
    int rc = load(&ds, shard, 0, &e);
    rf_dataset_free(&ds);
    ck_assert_msg(rc == RF_EINDEX, "%s: rc %d (%s)", shard, rc, e.msg);
    ck_assert_msg(strncmp(e.msg, idx, strlen(idx)) == 0 && strstr(e.msg, shard) &&
                      strstr(e.msg, needle) && strstr(e.msg, "delete it"),
                  "message \"%s\" lacks %s, %s or \"%s\"", e.msg, idx, shard, needle);
    first_problem f;
    rf_inspect_summary s;
    ck_assert_int_eq(inspect_first(shard, &f, &s), RF_EINDEX);
    ck_assert(s.has_index && !s.index_ok);
    ck_assert_uint_eq(f.offset, at);
    const char *what = e.msg + strlen(idx) + 2;
    ck_assert_msg(strncmp(f.msg, idx, strlen(idx)) == 0 && strstr(f.msg, what),
                  "inspect said \"%s\", the loader \"%s\"", f.msg, e.msg);
}

/* Loads of shard with its index: the same samples as a scan, the same non-regular members
 * counted, and at most max_reads headers read to check the index. */
static void index_loads(const char *shard, const char *idx, uint64_t max_reads)
{
    rf_dataset scan, viaidx;
    rf_err e = {0};
    char *moved = resuffix(idx, 0, ".off"); /* moved away, the loader scans the shard */
    ck_assert_int_eq(rename(idx, moved), 0);
    ck_assert_msg(load(&scan, shard, 0, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rename(moved, idx), 0);
    ck_assert_msg(load(&viaidx, shard, 0, &e) == 0, "%s", e.msg);
    same_tables(&scan, &viaidx);
    ck_assert_uint_eq(scan.nonregular, viaidx.nonregular);
    rf_tar_index_stats st;
    int fd = open(shard, O_RDONLY);
    struct stat sb;
    ck_assert_int_eq(fstat(fd, &sb), 0);
    ck_assert_msg(rf_tar_index_read(idx, shard, fd, (uint64_t)sb.st_size, 0, 0, NULL, NULL, &st,
                                    &e) == 0, "%s", e.msg);
    ck_assert_msg(st.headers_read <= max_reads, "%" PRIu64 " headers read, want <= %" PRIu64,
                  st.headers_read, max_reads);
    close(fd);
    first_problem f;
    rf_inspect_summary s;
    ck_assert_msg(inspect_first(shard, &f, &s) == 0, "%s", f.msg);
    ck_assert(s.has_index && s.index_ok);
    rf_dataset_free(&scan);
    rf_dataset_free(&viaidx);
    free(moved);
}

/* An index written before members were appended (GNU tar -r, Python's tarfile mode "a") covers
 * only the start of its shard: the first appended member is named with its offset. */
START_TEST(index_of_appended_shard_refused)
{
    char *dir = src_dir("tar-append", 8);
    ck_assert_int_eq(rf_test_shell("cd %s/src && tar -cf ../g.tar k0.jpg k0.cls k1.jpg k1.cls "
                                   "k2.jpg k2.cls k3.jpg k3.cls", dir), 0);
    ck_assert_int_eq(rf_test_shell(
        "cd %s/src && python3 -c 'import tarfile\n"
        "with tarfile.open(\"../p.tar\", \"w\") as t:\n"
        "    for k in \"0123\": t.add(\"k%%s.jpg\" %% k); t.add(\"k%%s.cls\" %% k)'", dir), 0);
    static const char *name[] = {"g", "p"};
    for (int k = 0; k < 2; k++) {
        char tar[64], idxn[64];
        snprintf(tar, sizeof tar, "%s.tar", name[k]);
        snprintf(idxn, sizeof idxn, "%s.idx", name[k]);
        char *shard = pathf(dir, tar), *idx = pathf(dir, idxn);
        rf_err e = {0};
        ck_assert_msg(rf_tar_write_index(shard, idx, &e) == 0, "%s", e.msg);
        index_loads(shard, idx, 20);
        free(shard), free(idx);
    }
    ck_assert_int_eq(rf_test_shell("cd %s/src && tar -rf ../g.tar k4.jpg k4.cls k5.jpg k5.cls && "
                                   "python3 -c 'import tarfile\n"
                                   "with tarfile.open(\"../p.tar\", \"a\") as t:\n"
                                   "    for k in \"4567\": t.add(\"k%%s.jpg\" %% k); "
                                   "t.add(\"k%%s.cls\" %% k)'", dir), 0);
    /* four samples of two members, each of two blocks (four with tarfile's pax headers) */
    static const uint64_t appended_at[] = {8192, 16384};
    for (int k = 0; k < 2; k++) {
        char tar[64], idxn[64], want[128];
        snprintf(tar, sizeof tar, "%s.tar", name[k]);
        snprintf(idxn, sizeof idxn, "%s.idx", name[k]);
        char *shard = pathf(dir, tar), *idx = pathf(dir, idxn);
        snprintf(want, sizeof want, "line 5: the shard goes on after the index's last member: "
                 "its member k4.jpg at offset %" PRIu64 " is not in the index", appended_at[k]);
        index_refused(shard, idx, want, appended_at[k]);
        free(shard), free(idx);
    }
    free(dir);
}
END_TEST

/* Lines deleted or duplicated, and indexes of other shards: each refused at create, naming the
 * index, the line and the offset, as inspection does. */
START_TEST(index_not_matching_its_shard_refused)
{
    char *dir = rf_test_mkdtemp("tar-idxedit");
    char *good = good_index(dir); /* of plain_shard(20): k000..k019, line 2 + i for k<i> */
    tbuf t;
    char *shard = plain_shard(dir, "bad.tar", 20, &t), *idx = pathf(dir, "bad.idx");
    free(t.p);
    /* line 9 (k007) deleted, the count made to agree: k007's members are in no line */
    char *line9 = good;
    for (int k = 1; k < 9; k++)
        line9 = strchr(line9, '\n') + 1;
    char *line10 = strchr(line9, '\n') + 1;
    char *m = malloc(strlen(good) + 1);
    sprintf(m, "v1.2 19%.*s%s", (int)(line9 - good - 7), good + 7, line10);
    write_file(idx, m, strlen(m));
    index_refused(shard, idx, "line 9: the shard's member k007.jpg at offset 16384 is not in "
                  "the index (it comes before k008.jpg)", 16384);
    free(m);
    /* line 9 twice in a row, or again at the end */
    m = malloc(2 * strlen(good) + 1);
    sprintf(m, "v1.2 21%.*s%.*s%s", (int)(line10 - good - 7), good + 7, (int)(line10 - line9),
            line9, line10);
    write_file(idx, m, strlen(m));
    index_refused(shard, idx, "line 10: member k007.jpg: same key as the previous line", 0);
    sprintf(m, "v1.2 21%s%.*s", good + 7, (int)(line10 - line9), line9);
    write_file(idx, m, strlen(m));
    index_refused(shard, idx, "line 22: member k007.jpg: offset 16384 overlaps the previous "
                  "member", 0);
    free(m);
    /* the index of a shard with the same names and sizes, but only its first 12 samples: all
     * it says is true, and 8 samples would be missing */
    char *small = plain_shard(dir, "small.tar", 12, &t), *small_idx = pathf(dir, "small.idx");
    free(t.p);
    rf_err e = {0};
    ck_assert_msg(rf_tar_write_index(small, small_idx, &e) == 0, "%s", e.msg);
    ck_assert_int_eq(rename(small_idx, idx), 0);
    index_refused(shard, idx, "line 13: the shard goes on after the index's last member: its "
                  "member k012.jpg at offset 31232 is not in the index", 31232);
    /* the index of another generated shard: other names */
    char *gen = rf_test_mkdtemp("tar-idxgen");
    ck_assert_int_eq(rf_test_make_shards(gen, 2, 100, 3, 1, 1, 32), 0);
    char *s0 = pathf(gen, "shard-0000.tar"), *i0 = pathf(gen, "shard-0000.idx");
    char *i1 = pathf(gen, "shard-0001.idx");
    /* the good index is cheap to check: 8 spot-checked samples of two members (the first and
     * the last among them), then the end-of-archive marker */
    index_loads(s0, i0, 2 * 8 + 1);
    ck_assert_int_eq(rename(i1, i0), 0);
    index_refused(s0, i0, "line 2: member 00000100.jpg: the shard's header at offset 0 names "
                  "00000000.jpg", 0);
    free(s0), free(i0), free(i1), free(gen);
    free(small), free(small_idx), free(shard), free(idx), free(good);
    free(dir);
}
END_TEST

/* DALI's wds2idx writes the offset of each member's data (tar --block-number, or tarfile's
 * offset_data), ringfeed the offset of its first header block: both load as a scan does, on
 * GNU tar's shards with long names (pax and GNU records), a directory and a symlink. */
START_TEST(index_with_data_offsets_loads)
{
    fixture fx;
    fx_make(&fx, 1);
    static const char *formats[] = {"gnu", "pax"};
    for (int f = 0; f < 2; f++) {
        char *shard = fx_tar(&fx, formats[f]), *idx = resuffix(shard, 4, ".idx");
        ck_assert_int_eq(rf_test_shell(
            "python3 -c 'import tarfile, sys\n"
            "lines, last = [], None\n"
            "for m in tarfile.open(sys.argv[1]):\n"
            "    if not m.isreg(): continue\n"
            "    slash = m.name.rfind(\"/\") + 1\n"
            "    dot = m.name.find(\".\", slash)\n"
            "    key, ext = m.name[:dot], m.name[dot + 1:]\n"
            "    if key != last: lines.append([]); last = key\n"
            "    lines[-1].append(\"%%s %%d %%d %%s\" %% (ext, m.offset_data, m.size, m.name))\n"
            "open(sys.argv[2], \"w\").write(\"v1.2 %%d\\n\" %% len(lines) + "
            "\"\".join(\" \".join(l) + \"\\n\" for l in lines))' %s %s", shard, idx), 0);
        index_loads(shard, idx, 64);
        rf_dataset ds;
        rf_err e = {0};
        ck_assert_msg(load(&ds, shard, 0, &e) == 0, "%s", e.msg);
        check_loaded(&fx, &ds);
        rf_dataset_free(&ds);
        /* ringfeed's own index of the same shard */
        ck_assert_msg(rf_tar_write_index(shard, idx, &e) == 0, "%s", e.msg);
        index_loads(shard, idx, 64);
        free(idx), free(shard);
    }
    fx_free(&fx);
}
END_TEST

START_TEST(webdataset_grouping)
{
    char *dir = rf_test_mkdtemp("tar-wds");
    tbuf t = {0};
    tb_member(&t, "a.jpg", "\xff\xd8", 2, '0');
    tb_member(&t, "d/", NULL, 0, '5');
    tb_member(&t, "a.cls", "3", 1, '0'); /* a directory inside a run does not end it */
    tb_member(&t, "b.jpg", "\xff\xd8", 2, '0');
    tb_member(&t, "a.jpg", "\xff\xd8", 2, '0'); /* a reappears: a separate sample */
    tb_member(&t, "dev", NULL, 0, '3');
    tb_end(&t);
    char *p = save(dir, "g.tar", &t);
    rf_dataset ds;
    rf_err e = {0};
    ck_assert_msg(load(&ds, p, 0, &e) == 0, "%s", e.msg);
    ck_assert_uint_eq(ds.nsamples, 3);
    ck_assert_str_eq(ds.keys + ds.samples[0].key, "a");
    ck_assert_str_eq(ds.keys + ds.samples[1].key, "b");
    ck_assert_str_eq(ds.keys + ds.samples[2].key, "a");
    ck_assert_uint_eq(ds.samples[0].label_len, 1);
    ck_assert_uint_eq(ds.samples[0].length, 2048 + 1); /* to the end of a.cls' data */
    ck_assert_uint_eq(ds.max_span, 2049);
    rf_dataset_free(&ds);
    free(p), free(t.p);
    /* a sample without an image member */
    memset(&t, 0, sizeof t);
    tb_member(&t, "a.jpg", "\xff\xd8", 2, '0');
    tb_member(&t, "b.cls", "1", 1, '0');
    tb_end(&t);
    p = save(dir, "noimg.tar", &t);
    load_fails(p, RF_EFORMAT, "sample b at offset 1024 has no image member (jpg,jpeg,png,webp); "
               "its members have the extensions cls; a sample's members must be consecutive "
               "(GNU tar stores a folder in directory order without --sort=name");
    free(p), free(t.p);
    /* ... because its image is a link, which is not followed: the error says so */
    for (int hard = 0; hard < 2; hard++) {
        memset(&t, 0, sizeof t);
        tb_member(&t, "a.jpg", "\xff\xd8", 2, '0');
        tb_member(&t, "a.cls", "1", 1, '0');
        tb_member(&t, "b.jpg", NULL, 0, hard ? '1' : '2');
        tb_member(&t, "b.cls", "1", 1, '0');
        tb_end(&t);
        p = save(dir, "linkimg.tar", &t);
        load_fails(p, RF_EFORMAT, hard ? "sample b at offset 2560 has no image member "
                   "(jpg,jpeg,png,webp); its members have the extensions cls; its member b.jpg "
                   "at offset 2048 is a hard link, which is not followed (write the shard with "
                   "tar --hard-dereference)"
                                       : "its member b.jpg at offset 2048 is a symbolic link, "
                   "which is not followed (write the shard with tar --dereference)");
        free(p), free(t.p);
    }
    /* a span over max_sample_bytes */
    memset(&t, 0, sizeof t);
    uint8_t *j = fake_jpeg(1, 5000);
    tb_member(&t, "big.jpg", j, 5000, '0');
    tb_end(&t);
    p = save(dir, "big.tar", &t);
    rf_dataset d2;
    ck_assert_int_eq(load(&d2, p, 4096, &e), RF_ELIMIT);
    ck_assert_ptr_nonnull(strstr(e.msg, "sample big at offset 0"));
    rf_dataset_free(&d2);
    free(p), free(t.p), free(j);
    /* split_key */
    const char *ext;
    ck_assert_uint_eq(rf_tar_split_key("dir.v1/abc.seg.png", &ext), 10);
    ck_assert_str_eq(ext, "seg.png");
    ck_assert_uint_eq(rf_tar_split_key("noext", &ext), 5);
    ck_assert_str_eq(ext, "");
    ck_assert_int_eq(rf_tar_ext_in("JPG", RF_TAR_IMAGE_EXTS), 1);
    ck_assert_int_eq(rf_tar_ext_in("png", RF_TAR_IMAGE_EXTS), 1);
    ck_assert_int_eq(rf_tar_ext_in("gif", RF_TAR_IMAGE_EXTS), 0);
    ck_assert_int_eq(rf_tar_ext_in("jp", RF_TAR_IMAGE_EXTS), 0);
    /* the preference order: jpg first, webp last, any case; not listed: 0 */
    ck_assert_uint_eq(rf_tar_ext_rank("JPG", RF_TAR_IMAGE_EXTS), 1);
    ck_assert_uint_eq(rf_tar_ext_rank("webp", RF_TAR_IMAGE_EXTS), 4);
    ck_assert_uint_eq(rf_tar_ext_rank("png", "webp,PNG"), 2);
    ck_assert_uint_eq(rf_tar_ext_rank("png", "jpg"), 0);
    free(dir);
}
END_TEST

START_TEST(locate_rejects_foreign_and_corrupt_spans)
{
    tbuf t = {0};
    tb_member(&t, "k.jpg", "\xff\xd8\xff\xd9", 4, '0');
    tb_member(&t, "k.cls", " 12\n", 4, '0');
    uint32_t doff, dlen, dhdr, loff, llen, lhdr;
    rf_err e = {0};
    size_t len = 1024 + 512 + 4;
#define LOCATE(n, key)                                                                        \
    rf_tar_locate(t.p, n, key, NULL, NULL, &doff, &dlen, &dhdr, &loff, &llen, &lhdr, &e)
    ck_assert_int_eq(LOCATE(len, "k"), 0);
    ck_assert_uint_eq(doff, 512);
    ck_assert_uint_eq(dlen, 4);
    ck_assert_uint_eq(loff, 1536);
    ck_assert_uint_eq(llen, 4);
    ck_assert_uint_eq(lhdr, 1024);
    /* no label member: offset 0; an empty one: its real offset, 0 bytes */
    ck_assert_int_eq(LOCATE(1024, "k"), 0);
    ck_assert_uint_eq(loff, 0);
    ck_assert_uint_eq(llen, 0);
    tbuf u = {0};
    tb_member(&u, "k.jpg", "\xff\xd8\xff\xd9", 4, '0');
    tb_member(&u, "k.cls", "", 0, '0');
    ck_assert_int_eq(rf_tar_locate(u.p, 1536, "k", NULL, NULL, &doff, &dlen, &dhdr, &loff, &llen,
                                   &lhdr, &e), 0);
    ck_assert_uint_eq(loff, 1536);
    ck_assert_uint_eq(llen, 0);
    ck_assert_uint_eq(lhdr, 1024);
    free(u.p);
    ck_assert_int_eq(LOCATE(len, "j"), RF_EFORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "k.jpg at span offset 0"));
    ck_assert_int_eq(LOCATE(len - 1, "k"), RF_EFORMAT);
    ck_assert_ptr_nonnull(strstr(e.msg, "truncated member k.cls"));
    t.p[1024 + 3] ^= 4;
    ck_assert_int_eq(LOCATE(len, "k"), RF_EFORMAT);
    ck_assert_str_eq(e.msg, "bad header checksum at span offset 1024");
#undef LOCATE
    free(t.p);
}
END_TEST

/* ---- patterns and labels ---------------------------------------------------------------- */

static void touch(const char *dir, const char *name)
{
    char *p = pathf(dir, name);
    write_file(p, "", 0);
    free(p);
}

START_TEST(pattern_expansion)
{
    char *dir = rf_test_mkdtemp("tar-pat");
    for (int i = 0; i < 12; i++) {
        char n[64];
        snprintf(n, sizeof n, "train-%06d.tar", i);
        touch(dir, n);
    }
    touch(dir, "val-a.tar");
    touch(dir, "val-b.tar");
    char pat[4][4200];
    snprintf(pat[0], sizeof pat[0], "%s/train-{000009..000011}.tar", dir);
    snprintf(pat[1], sizeof pat[1], "%s/val-*.tar", dir);
    snprintf(pat[2], sizeof pat[2], "%s/{val-a,train-00000[01]}.tar", dir);
    snprintf(pat[3], sizeof pat[3], "%s/train-000000.tar", dir);
    const char *pp[4] = {pat[0], pat[1], pat[2], pat[3]};
    char **out;
    uint32_t n;
    rf_err e = {0};
    ck_assert_msg(rf_expand_patterns(pp, 4, &out, &n, &e) == 0, "%s", e.msg);
    static const char *want[] = {"train-000009.tar", "train-000010.tar", "train-000011.tar",
                                 "val-a.tar", "val-b.tar", "val-a.tar", "train-000000.tar",
                                 "train-000001.tar", "train-000000.tar"};
    ck_assert_uint_eq(n, 9);
    for (uint32_t i = 0; i < n; i++) {
        const char *base = strrchr(out[i], '/') + 1;
        ck_assert_str_eq(base, want[i]);
    }
    rf_free_paths(out, n);
    /* descending range, no padding */
    char d[4200];
    snprintf(d, sizeof d, "%s/train-00000{2..0}.tar", dir);
    pp[0] = d;
    ck_assert_int_eq(rf_expand_patterns(pp, 1, &out, &n, &e), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(strrchr(out[0], '/') + 1, "train-000002.tar");
    rf_free_paths(out, n);
    /* a pattern matching nothing names itself */
    snprintf(d, sizeof d, "%s/nothing-*.tar", dir);
    ck_assert_int_eq(rf_expand_patterns(pp, 1, &out, &n, &e), RF_ENOFILES);
    ck_assert_ptr_nonnull(strstr(e.msg, d));
    snprintf(d, sizeof d, "%s/train-{000010..000013}.tar", dir);
    ck_assert_int_eq(rf_expand_patterns(pp, 1, &out, &n, &e), RF_ENOFILES);
    ck_assert_ptr_nonnull(strstr(e.msg, "train-000012.tar"));
    static const char *bad[] = {"x{1..}.tar", "x{a}.tar", "x{1..2.tar", "x}.tar", "x{1..a}.tar"};
    for (int i = 0; i < 5; i++) {
        snprintf(d, sizeof d, "%s/%s", dir, bad[i]);
        ck_assert_msg(rf_expand_patterns(pp, 1, &out, &n, &e) == RF_EINVAL, "%s", bad[i]);
    }
    snprintf(d, sizeof d, "%s/x{0..99999999}.tar", dir);
    ck_assert_int_eq(rf_expand_patterns(pp, 1, &out, &n, &e), RF_ELIMIT);
    free(dir);
}
END_TEST

/* Labels as WebDataset writers leave them ("5", "5\n") parse; everything else says why not:
 * a label is a decimal integer 0..INT32_MAX, never signed (folder lists refuse negative ones
 * too, and -1 means "no label" in a batch). */
START_TEST(label_parsing)
{
    int32_t v = 0;
#define OK(s, want)                                                                         \
    do {                                                                                       \
        ck_assert_int_eq(rf_parse_label((const uint8_t *)s, sizeof s - 1, &v), 0);             \
        ck_assert_int_eq(v, want);                                                             \
    } while (0)
#define BAD(s, why) ck_assert_int_eq(rf_parse_label((const uint8_t *)s, sizeof s - 1, &v), why)
    OK("17", 17);
    OK("17\n", 17);
    OK(" 17 ", 17);
    OK("\t0\r\n", 0);
    OK("\v5\f", 5);
    OK("2147483647", 2147483647);
    OK("007", 7);
    OK("000000000000000000042", 42);
    BAD("", RF_LABEL_FAULT_EMPTY);
    BAD("  \n", RF_LABEL_FAULT_EMPTY);
    BAD("-5", RF_LABEL_FAULT_NEGATIVE);
    BAD("-1\n", RF_LABEL_FAULT_NEGATIVE);
    BAD("-2147483648", RF_LABEL_FAULT_NEGATIVE);
    BAD("2147483648", RF_LABEL_FAULT_OVERFLOW);
    BAD("99999999999", RF_LABEL_FAULT_OVERFLOW);
    BAD("999999999999999999999999999999", RF_LABEL_FAULT_OVERFLOW);
    BAD("1 2", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("12a", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("99999999999x", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("+3", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("-", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("-x", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("1.0", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("0x10", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("1\0", RF_LABEL_FAULT_NOT_INTEGER);
    BAD("cat", RF_LABEL_FAULT_NOT_INTEGER);
#undef OK
#undef BAD
    /* rf_check_label's words: which fault, the member, and the offset when given */
    rf_err e = {0};
    ck_assert_int_eq(rf_check_label("a/k", (const uint8_t *)"4\n", 2, 1536, &v, &e), 0);
    ck_assert_int_eq(v, 4);
    static const struct {
        const char *text, *want;
    } bad[] = {{"", "label member a/k.cls at offset 1536 is empty"},
               {"-3", "label member a/k.cls at offset 1536 holds \"-3\", a negative number"},
               {"n017\n", "holds \"n017\\x0a\", not a decimal integer"},
               {"4294967296", "holds \"4294967296\", a number over 2147483647"},
               {" \n", "holds \" \\x0a\", only whitespace"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(rf_check_label("a/k", (const uint8_t *)bad[i].text, strlen(bad[i].text),
                                        1536, &v, &e), RF_ELABEL);
        ck_assert_msg(strstr(e.msg, bad[i].want) && strstr(e.msg, "0..2147483647"), "%s", e.msg);
    }
    ck_assert_int_eq(rf_check_label("k", NULL, 5000, RF_LABEL_NO_OFFSET, &v, &e), RF_ELABEL);
    ck_assert_str_eq(e.msg,
                     "label member k.cls is 5000 bytes, over the 1024-byte limit of a label");
    ck_assert_int_eq(rf_label_missing("k", RF_TAR_LABEL_EXT, 0, &e), RF_ELABEL);
    ck_assert_str_eq(e.msg, "sample k at offset 0 has no label member (k.cls); set label_source "
                            "RF_LABEL_NONE (Python label=None, --no-labels) for unlabelled data");
}
END_TEST

/* The JSON label reader alone: the whole document is checked (strict RFC 8259), the path is
 * followed through objects only, and each fault says where. */
START_TEST(json_label_reader)
{
    static const struct {
        const char *text, *path;
        int fault;
        int32_t label;
        uint64_t at;
    } c[] = {
        {"{\"a\":3}", "a", 0, 3, 5},
        {"{\"a\":{\"b\":{\"c\":0}}}", "a.b.c", 0, 0, 15},
        {"{\"a\":-0}", "a", 0, 0, 5},
        {"{\"x\":[{\"a\":1}],\"a\":4}", "a", 0, 4, 19},
        {"{\"a\\\"b\":2,\"a\":4}", "a", 0, 4, 14},             /* an escaped quote in a key */
        {"{\"\\u00e9\":2}", "\xc3\xa9", 0, 2, 10},               /* é by escape, path in UTF-8 */
        {"{\"\\ud83d\\ude00\":6}", "\xf0\x9f\x98\x80", 0, 6, 16}, /* a surrogate pair */
        {"{\"x\":1,\"x\":2,\"a\":4}", "a", 0, 4, 17},           /* duplicates off the path */
        {"{\"a\":[1]}", "a.b", RF_JSON_FAULT_MISSING, 0, 0},      /* arrays are not followed */
        {"{\"a\":1}", "a.b", RF_JSON_FAULT_MISSING, 0, 0},
        {"[1]", "a", RF_JSON_FAULT_MISSING, 0, 0},
        {"{\"a\":true}", "a", RF_JSON_FAULT_BOOL, 0, 5},
        {"{\"a\":null}", "a", RF_JSON_FAULT_NULL, 0, 5},
        {"{\"a\":{}}", "a", RF_JSON_FAULT_OBJECT, 0, 5},
        {"{\"a\":05}", "a", RF_JSON_FAULT_SYNTAX, 0, 6},         /* a leading zero */
        {"{\"a\":1} x", "a", RF_JSON_FAULT_SYNTAX, 0, 8},
        {"{\"a\":1", "a", RF_JSON_FAULT_SYNTAX, 0, 6},
        {"", "a", RF_JSON_FAULT_SYNTAX, 0, 0},
        {"{\"a\":\"\x01\"}", "a", RF_JSON_FAULT_SYNTAX, 0, 6},   /* a raw control byte */
        {"{\"a\":\"\\ud83d\"}", "a", RF_JSON_FAULT_SYNTAX, 0, 12}, /* a lone surrogate */
        {"{\"a\":\"\\q\"}", "a", RF_JSON_FAULT_SYNTAX, 0, 7},
        {"{\"a\":1.}", "a", RF_JSON_FAULT_SYNTAX, 0, 7},
        {"{\"a\":tru}", "a", RF_JSON_FAULT_SYNTAX, 0, 5},
        {"{'a':1}", "a", RF_JSON_FAULT_SYNTAX, 0, 1},
        {"{\"a\":1,\"a\":1}", "a", RF_JSON_FAULT_SYNTAX, 0, 7},   /* a duplicate on the path */
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        int32_t v = -7;
        rf_json_result r;
        int f = rf_json_find_label((const uint8_t *)c[i].text, strlen(c[i].text), c[i].path, &v,
                                   &r);
        ck_assert_msg(f == c[i].fault && r.at == c[i].at, "case %zu: fault %d at %llu (%s)", i,
                      f, (unsigned long long)r.at, r.syntax ? r.syntax : "");
        if (!f)
            ck_assert_int_eq(v, c[i].label);
    }
    /* a string over the limit, as written */
    char *big = malloc(RF_JSON_STRING_MAX + 32);
    int n = snprintf(big, 32, "{\"a\":\"");
    memset(big + n, 'x', RF_JSON_STRING_MAX + 1);
    memcpy(big + n + RF_JSON_STRING_MAX + 1, "\"}", 2);
    rf_json_result r;
    int32_t v;
    ck_assert_int_eq(rf_json_find_label((const uint8_t *)big, (size_t)n + RF_JSON_STRING_MAX + 3,
                                        "a", &v, &r), RF_JSON_FAULT_SYNTAX);
    ck_assert_str_eq(r.syntax, "a string over the 4096-byte limit");
    free(big);
}
END_TEST

/* The grouping the loader and inspection share: a sample is a run of members with one key; its
 * image is the member whose extension comes first in image_exts (a later member with a more
 * preferred extension takes the role, one with a less preferred or the same one does not); its
 * first label member is the label, later ones get no role; a key that comes back after
 * another begins a new sample; the span runs from the first header to the last data. */
START_TEST(group_members_into_samples)
{
    static const struct { const char *name; int starts, role; } m[] = {
        {"d/a.jpg", 1, RF_TAR_ROLE_IMAGE}, {"d/a.cls", 0, RF_TAR_ROLE_LABEL},
        {"d/a.x.txt", 0, RF_TAR_ROLE_OTHER}, {"d/b.webp", 1, RF_TAR_ROLE_IMAGE},
        {"d/b.JPEG", 0, RF_TAR_ROLE_IMAGE}, {"d/b.png", 0, RF_TAR_ROLE_OTHER},
        {"d/b.jpg", 0, RF_TAR_ROLE_IMAGE}, {"d/b.jpeg", 0, RF_TAR_ROLE_OTHER},
        {"d/b.cls", 0, RF_TAR_ROLE_LABEL}, {"d/b.cls", 0, RF_TAR_ROLE_OTHER},
        {"d/a.jpg", 1, RF_TAR_ROLE_IMAGE}, {"c.cls", 1, RF_TAR_ROLE_LABEL},
    };
    rf_tar_group g = {0};
    uint64_t off = 0;
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++, off += 2048) {
        ck_assert_int_eq(rf_tar_group_starts(&g, m[i].name), m[i].starts);
        if (m[i].starts && i == 3) { /* sample a is complete: three members, up to a.x.txt's data */
            ck_assert_str_eq(g.key, "d/a");
            ck_assert_uint_eq(g.members, 3);
            ck_assert_uint_eq(g.start, 0);
            ck_assert_uint_eq(g.end, 4096 + 512 + 100);
            ck_assert(g.has_img && g.has_lbl && g.img_data == 512 && g.lbl_hdr == 2048);
        }
        if (m[i].starts)
            g.open = 0;
        ck_assert_int_eq(rf_tar_group_add(&g, m[i].name, off, off + 512, 100), m[i].role);
        ck_assert(g.open);
        if (i == 7) /* d/b.jpeg did not replace d/b.jpg (at offset 6 * 2048) */
            ck_assert(g.img_rank == 1 && g.img_hdr == 6 * 2048);
    }
    ck_assert_str_eq(g.key, "c");
    ck_assert_uint_eq(g.members, 1);
    ck_assert(!g.has_img && g.has_lbl);
}
END_TEST

/* The key rule the shard writer applies and the image list's keys follow: no dot in the
 * basename, no empty basename, no whitespace, control byte or DEL anywhere. */
START_TEST(key_rule)
{
    ck_assert(rf_tar_key_ok("n01440764/n01440764_10026"));
    ck_assert(rf_tar_key_ok("a.b/c"));
    ck_assert(!rf_tar_key_ok("a/b.c"));
    ck_assert(!rf_tar_key_ok(""));
    ck_assert(!rf_tar_key_ok("a/"));
    ck_assert(!rf_tar_key_ok("a b"));
    ck_assert(!rf_tar_key_ok("a\tb"));
    ck_assert(!rf_tar_key_ok("a\x7f"));
    ck_assert(rf_tar_key_ok("caf\xc3\xa9"));
}
END_TEST

/* Where an index is looked for and written: "X.idx" for "X.tar" first, then "X.tar.idx";
 * "SHARD.idx" for other names. rf_shard_index_path gives the name to write when none exists. */
START_TEST(index_names)
{
    char *dir = rf_test_mkdtemp("tar-idxname");
    char *tar = pathf(dir, "a.tar"), *other = pathf(dir, "b.shard");
    char *idx = pathf(dir, "a.idx"), *tidx = pathf(dir, "a.tar.idx"), buf[700], *want;
    ck_assert_int_eq(rf_shard_index_path(tar, buf, sizeof buf), 0);
    ck_assert_str_eq(buf, idx);
    ck_assert_int_eq(rf_shard_index_path(other, buf, sizeof buf), 0);
    want = pathf(dir, "b.shard.idx");
    ck_assert_str_eq(buf, want);
    free(want);
    write_file(tidx, "", 0);
    ck_assert_int_eq(rf_shard_index_path(tar, buf, sizeof buf), 1);
    ck_assert_str_eq(buf, tidx);
    write_file(idx, "", 0);
    ck_assert_int_eq(rf_tar_find_index(tar, buf, sizeof buf), 1);
    ck_assert_str_eq(buf, idx);
    ck_assert_int_eq(rf_shard_index_path(tar, buf, strlen(tar) + 4), RF_EINVAL);
    ck_assert_int_eq(rf_tar_index_name("x.tar", buf, 5), -1);
    ck_assert_int_eq(rf_tar_index_name("x.tar", buf, 6), 0);
    ck_assert_str_eq(buf, "x.idx");
    free(tar), free(other), free(idx), free(tidx), free(dir);
}
END_TEST

/* Inspection's samples, collected: key, first header offset, span. */
typedef struct seen_samples {
    char key[8][200];
    uint64_t offset[8], span[8];
    uint32_t n;
} seen_samples;

static int on_seen(void *ctx, const rf_inspect_sample *s)
{
    seen_samples *v = ctx;
    ck_assert_uint_lt(v->n, 8);
    snprintf(v->key[v->n], sizeof v->key[0], "%s", s->key);
    v->offset[v->n] = s->offset;
    v->span[v->n++] = s->span_bytes;
    return 0;
}

/* Shards as users write them (Python's tarfile in pax format with a directory member and a
 * 120-byte key, webdataset's TarWriter) are grouped alike by the loader, by inspection and by
 * the loader reading the index rf_tar_write_index made: the same keys, offsets and spans in the
 * same order, a key that comes back after another key being two samples each time. */
START_TEST(user_shards_group_alike)
{
    char *dir = rf_test_mkdtemp("tar-user");
    char *py = pathf(dir, "py.tar"), *wd = pathf(dir, "wds.tar");
    ck_assert_int_eq(rf_test_shell(
        "python3 -c \"import tarfile,io\n"
        "t=tarfile.open('%s','w',format=tarfile.PAX_FORMAT)\n"
        "def add(n,d=None):\n"
        "  i=tarfile.TarInfo(n)\n"
        "  if d is None: i.type=tarfile.DIRTYPE; t.addfile(i); return\n"
        "  i.size=len(d); t.addfile(i,io.BytesIO(d))\n"
        "k='d/'+'k'*120\n"
        "add('d'); add(k+'.jpg',b'x'*700); add(k+'.cls',b'3'); add(k+'.json',b'{}')\n"
        "add('b.jpeg',b'y'*10); add('b.cls',b'1'); add('c.jpg',b'z'*5000); add('b.jpg',b'w')\n"
        "t.close()\"", py), 0);
    if (rf_test_shell("python3 -c 'import webdataset' 2>/dev/null") == 0)
        ck_assert_int_eq(rf_test_shell(
            "python3 -c \"import webdataset as wds\n"
            "with wds.TarWriter('%s') as w:\n"
            "  for i in range(3): w.write({'__key__': 's%%d' %% i, 'jpg': b'j'*(100+i), "
            "'cls': b'%%d' %% i})\"", wd), 0);
    else
        fprintf(stderr, "webdataset not installed: its shard is not tested\n");
    const char *shards[] = {py, wd};
    uint32_t want[] = {4, 3};
    for (int f = 0; f < 2; f++) {
        if (access(shards[f], F_OK) != 0)
            continue;
        seen_samples seen = {0};
        rf_inspect_options o;
        rf_inspect_options_init(&o);
        o.check_jpeg = 0;
        rf_shard_inspect(shards[f], &o, NULL, on_seen, &seen, NULL);
        char *idx = NULL;
        for (int pass = 0; pass < 2; pass++) { /* a scan, then the index it writes */
            rf_dataset ds;
            rf_err e = {0};
            ck_assert_msg(load(&ds, shards[f], 0, &e) == 0, "%s", e.msg);
            ck_assert_uint_eq(ds.nsamples, want[f]);
            ck_assert_uint_eq(seen.n, want[f]);
            for (uint32_t i = 0; i < seen.n; i++) {
                ck_assert_str_eq(ds.keys + ds.samples[i].key, seen.key[i]);
                ck_assert_uint_eq(ds.samples[i].offset, seen.offset[i]);
                ck_assert_uint_eq(ds.samples[i].length, seen.span[i]);
            }
            rf_dataset_free(&ds);
            char buf[700];
            rf_shard_index_path(shards[f], buf, sizeof buf);
            idx = strdup(buf);
            ck_assert_msg(pass || rf_tar_write_index(shards[f], idx, &e) == 0, "%s", e.msg);
            if (pass)
                unlink(idx);
            free(idx);
        }
    }
    free(py), free(wd), free(dir);
}
END_TEST

/* Both index writers produce the same bytes for the same shard: the shard writer's index (made
 * as it writes) and rf_tar_write_index's (made by a scan), for ustar/pax and GNU shards with
 * long names and an unlabelled sample. The text is pinned for a two-sample shard. */
START_TEST(index_writers_agree)
{
    char *dir = rf_test_mkdtemp("tar-idxw");
    char longkey[160], err[256];
    memset(longkey, 'n', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = 0;
    const char *keys[] = {"a", longkey, "b/c"};
    for (uint32_t fmt = RF_SHARD_PAX; fmt <= RF_SHARD_GNU; fmt++) {
        char *tar = pathf(dir, fmt ? "gnu.tar" : "pax.tar"), *idx = pathf(dir, "w.idx");
        char *scanned = pathf(dir, "s.idx");
        rf_shard_writer *w = NULL;
        ck_assert_int_eq(rf_shard_writer_open(tar, idx, fmt, &w, err, sizeof err), 0);
        for (int32_t i = 0; i < 3; i++)
            ck_assert_int_eq(rf_shard_writer_add(w, keys[i], "jpg", "xyz", 3, i == 1 ? -1 : i), 0);
        ck_assert_int_eq(rf_shard_writer_close(w, err, sizeof err), 0);
        rf_err e = {0};
        ck_assert_msg(rf_tar_write_index(tar, scanned, &e) == 0, "%s", e.msg);
        size_t a, b;
        uint8_t *wa = rf_test_read_file(idx, &a), *sb = rf_test_read_file(scanned, &b);
        ck_assert_uint_eq(a, b);
        ck_assert_int_eq(memcmp(wa, sb, a), 0);
        ck_assert_int_eq(memcmp(wa, "v1.2 3\njpg 0 3 a.jpg cls 1024 1 a.cls\njpg 2048 3 ", 48), 0);
        free(wa), free(sb), free(tar), free(idx), free(scanned);
    }
    free(dir);
}
END_TEST

/* The registry lists each format once and finds it by rf_config.source and by name; a source
 * no format reads and a format written for another version of the ops table are refused with
 * a message naming them. */
START_TEST(format_registry)
{
    rf_err e = {0};
    ck_assert_ptr_eq(rf_format_for_source(RF_SOURCE_TAR, &e), &rf_format_tar);
    ck_assert_ptr_eq(rf_format_for_source(RF_SOURCE_FOLDER, &e), &rf_format_folder);
    ck_assert_ptr_eq(rf_format_for_source(RF_SOURCE_TOKENS, &e), &rf_format_tokens);
    ck_assert_ptr_eq(rf_format_by_name("tar"), &rf_format_tar);
    ck_assert_ptr_eq(rf_format_by_name("folder"), &rf_format_folder);
    ck_assert_ptr_eq(rf_format_by_name("tokens"), &rf_format_tokens);
    ck_assert_ptr_null(rf_format_by_name("zip"));
    ck_assert_ptr_null(rf_format_for_source(99, &e));
    ck_assert_int_eq(e.code, RF_EINVAL);
    ck_assert_str_eq(e.msg, "no shard format reads source 99");
    rf_dataset ds = {0};
    char *none[] = {"x.tar"};
    ck_assert_int_eq(rf_format_open(99, &ds, none, 1, 0, &e), RF_EINVAL);
    ck_assert_uint_eq(ds.nfiles, 0);
    rf_format_ops old = rf_format_tar;
    old.abi = RF_FORMAT_ABI + 1;
    ck_assert_int_eq(rf_format_check(&old, &e), RF_EINVAL);
    char want[160];
    snprintf(want, sizeof want, "shard format tar was written for format ops version %u; this "
             "library has version %u", RF_FORMAT_ABI + 1, RF_FORMAT_ABI);
    ck_assert_str_eq(e.msg, want);
    ck_assert_int_eq(rf_format_check(&rf_format_folder, &e), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("tar");
    TCase *tc = tcase_create("tar");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gnu_tar_formats_load_identically);
    tcase_add_test(tc, gnu_tar_links_named);
    tcase_add_test(tc, long_names_gnu_and_pax);
    tcase_add_test(tc, index_read_equals_scan);
    tcase_add_test(tc, index_disagreeing_is_detected);
    tcase_add_test(tc, bad_checksum_names_file_and_offset);
    tcase_add_test(tc, signed_checksum_accepted);
    tcase_add_test(tc, truncated_member);
    tcase_add_test(tc, garbage_numeric_fields);
    tcase_add_test(tc, base256_size);
    tcase_add_test(tc, pax_records_strict);
    tcase_add_test(tc, gnu_long_name_limits);
    tcase_add_test(tc, end_of_archive_variants);
    tcase_add_test(tc, data_after_end_of_archive_refused);
    tcase_add_test(tc, shard_without_samples_refused);
    tcase_add_test(tc, index_of_appended_shard_refused);
    tcase_add_test(tc, index_not_matching_its_shard_refused);
    tcase_add_test(tc, index_with_data_offsets_loads);
    tcase_add_test(tc, webdataset_grouping);
    tcase_add_test(tc, locate_rejects_foreign_and_corrupt_spans);
    tcase_add_test(tc, pattern_expansion);
    tcase_add_test(tc, label_parsing);
    tcase_add_test(tc, json_label_reader);
    tcase_add_test(tc, index_over_limit_is_refused);
    tcase_add_test(tc, format_registry);
    tcase_add_test(tc, index_writers_agree);
    tcase_add_test(tc, group_members_into_samples);
    tcase_add_test(tc, key_rule);
    tcase_add_test(tc, index_names);
    tcase_add_test(tc, user_shards_group_alike);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return rf_test_run_suite(suite());
}
