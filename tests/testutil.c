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

int rf_test_make_shards(const char *dir, uint32_t nshards, uint32_t nsamples, uint32_t classes,
                        uint64_t seed, int write_index, uint32_t max_side)
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
    cfg.max_side = max_side;
    cfg.write_index = write_index;
    cfg.label_mode = RF_GEN_LABEL_MODULO;
    char msg[256];
    int rc = rf_gen_run(&cfg, NULL, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "rf_test_make_shards(%s): %s\n", dir, msg);
    return rc;
}
