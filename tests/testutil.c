/* testutil.c — see testutil.h. */
#include "testutil.h"

#include "gen.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *rf_test_mkdtemp(const char *tag)
{
    const char *base = getenv("RF_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0755);
    size_t n = strlen(base) + strlen(tag) + 32;
    char *p = malloc(n);
    /* Kept reachable from a static table for the process' life, so LeakSanitizer does not
     * report fixture paths that tests hold until they exit. */
    static char **made;
    static size_t nmade, capmade;
    if (nmade == capmade) {
        capmade = capmade ? capmade * 2 : 16;
        made = realloc(made, capmade * sizeof *made);
    }
    made[nmade++] = p;
    snprintf(p, n, "%s/rf-%s-XXXXXX", base, tag);
    if (!mkdtemp(p)) {
        perror("mkdtemp");
        abort();
    }
    return p;
}

uint8_t *rf_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1); /* NUL-terminated too, for text files */
    if (fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        fclose(f);
        return NULL;
    }
    fclose(f);
    b[n] = 0;
    *len = (size_t)n;
    return b;
}

static int make_shards(const char *dir, uint32_t nshards, uint32_t nsamples, uint32_t classes,
                       uint64_t seed, int write_index, uint32_t min_side, uint32_t max_side,
                       int restart)
{
    char pattern[4096];
    snprintf(pattern, sizeof pattern, "%s/shard-%%04u.tar", dir);
    rf_gen_config cfg;
    rf_gen_config_init(&cfg);
    cfg.output = pattern;
    cfg.images = (uint64_t)nshards * nsamples;
    cfg.per_shard = nsamples;
    cfg.classes = classes ? classes : 1;
    cfg.seed = seed;
    cfg.threads = 2;
    cfg.min_side = min_side;
    cfg.max_side = max_side;
    cfg.write_index = write_index;
    cfg.label_mode = RF_GEN_LABEL_MODULO;
    cfg.restart = restart;
    char msg[256];
    int rc = rf_gen_run(&cfg, NULL, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "rf_test_make_shards(%s): %s\n", dir, msg);
    return rc;
}

int rf_test_make_shards(const char *dir, uint32_t nshards, uint32_t nsamples, uint32_t classes,
                        uint64_t seed, int write_index, uint32_t max_side)
{
    return make_shards(dir, nshards, nsamples, classes, seed, write_index, 0, max_side, 0);
}

int rf_test_make_restart_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                uint32_t classes, uint64_t seed, uint32_t max_side)
{
    return make_shards(dir, nshards, nsamples, classes, seed, 1, 0, max_side, 1);
}

int rf_test_make_big_restart_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                    uint64_t seed)
{
    return make_shards(dir, nshards, nsamples, 10, seed, 1, 700, 1000, 1);
}

/* truncate: zero the second half of the entropy-coded data and the EOI; else 0xA5 fill */
static int damage(const char *path, uint32_t nth, char *key, size_t keylen, int truncate)
{
    size_t len;
    uint8_t *b = rf_test_read_file(path, &len);
    if (!b)
        return -1;
    uint32_t seen = 0;
    for (size_t p = 0; p + 4 < len; p++) {
        if (b[p] != 0xFF || b[p + 1] != 0xDA || seen++ != nth)
            continue;
        /* the entropy-coded data: from the end of the SOS header to the EOI (the first FF D9:
         * inside the data an FF is followed by 00 or a restart marker) */
        size_t start = p + 2 + ((size_t)b[p + 2] << 8 | b[p + 3]), eoi = start;
        while (eoi + 1 < len && !(b[eoi] == 0xFF && b[eoi + 1] == 0xD9))
            eoi++;
        if (truncate) {
            size_t from = start + (eoi - start) / 2;
            memset(b + from, 0, (eoi + 2 < len ? eoi + 2 : len) - from);
        } else {
            for (size_t q = start; q < eoi; q++) {
                if (b[q] == 0xFF) {
                    q++; /* the stuffed 00 or the restart marker's second byte stays */
                    continue;
                }
                b[q] = 0xA5;
            }
        }
        /* the member: the last tar header before the SOS */
        size_t h = p / 512 * 512;
        while (h > 0 && memcmp(b + h + 257, "ustar", 5) != 0)
            h -= 512;
        snprintf(key, keylen, "%.100s", (const char *)b + h);
        char *dot = strrchr(key, '.');
        if (dot)
            *dot = 0;
        rf_test_write_file(path, b, len);
        free(b);
        return 0;
    }
    free(b);
    return -1;
}

int rf_test_damage_entropy(const char *path, uint32_t nth, char *key, size_t keylen)
{
    return damage(path, nth, key, keylen, 0);
}

int rf_test_truncate_jpeg(const char *path, uint32_t nth, char *key, size_t keylen)
{
    return damage(path, nth, key, keylen, 1);
}

rf_config rf_test_host_config(const char **pat, const char *pattern, uint32_t image_size)
{
    rf_config c;
    rf_config_init(&c);
    *pat = pattern;
    c.shards = pat;
    c.shard_count = 1;
    if (image_size)
        c.image_size = image_size;
    c.device_kind = RF_DEVICE_HOST;
    return c;
}

rf_loader *rf_test_create_ok(const rf_config *c)
{
    rf_loader *ld = NULL;
    char err[512] = "";
    int rc = rf_loader_create(c, &ld, err, sizeof err);
    ck_assert_msg(rc == 0, "create failed: %d %s", rc, err);
    return ld;
}

int rf_test_run_suite_mode(Suite *s, enum print_output mode)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, mode);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

int rf_test_run_suite(Suite *s)
{
    return rf_test_run_suite_mode(s, CK_NORMAL);
}

void rf_test_write_file(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len) {
        fprintf(stderr, "rf_test_write_file(%s) failed\n", path);
        abort();
    }
    fclose(f);
}

int rf_test_threads(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    if (f)
        fclose(f);
    return n;
}

void rf_test_tar_checksum(uint8_t *h)
{
    memset(h + 148, ' ', 8);
    unsigned sum = 0;
    for (int i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}
