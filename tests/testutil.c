/* testutil.c — see testutil.h. */
#include "testutil.h"

#include "gen.h"
#include "synth.h"
#include "loaders/dataset.h"
#include "loaders/tar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Test files are shards and images of a few MiB; the limit only keeps a runaway one from
 * taking all memory. */
#define RF_TEST_FILE_BYTES_MAX (1ull << 32)

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
    char *b = NULL;
    uint64_t n = 0;
    if (rf_read_whole(path, "a test file", RF_EFORMAT, RF_TEST_FILE_BYTES_MAX, &b, &n, NULL))
        return NULL;
    *len = (size_t)n;
    return (uint8_t *)b;
}

long long rf_test_resident_bytes(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) || st.st_size == 0) {
        close(fd);
        return -1;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    size_t pages = ((size_t)st.st_size + 4095) / 4096;
    unsigned char *vec = malloc(pages);
    long long r = 0;
    if (m == MAP_FAILED || !vec || mincore(m, (size_t)st.st_size, vec)) {
        r = -1;
    } else {
        for (size_t i = 0; i < pages; i++)
            r += vec[i] & 1;
        r *= 4096;
    }
    if (m != MAP_FAILED)
        munmap(m, (size_t)st.st_size);
    free(vec);
    return r;
}

long long rf_test_evict(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    return rf_test_resident_bytes(path);
}

static int make_shards(const char *dir, uint32_t nshards, uint32_t nsamples, uint32_t classes,
                       uint64_t seed, int write_index, uint32_t min_side, uint32_t max_side,
                       int restart, uint32_t trailer)
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
    cfg.trailer_bytes = trailer;
    char msg[256];
    int rc = rf_gen_run(&cfg, NULL, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "rf_test_make_shards(%s): %s\n", dir, msg);
    return rc;
}

int rf_test_make_shards(const char *dir, uint32_t nshards, uint32_t nsamples, uint32_t classes,
                        uint64_t seed, int write_index, uint32_t max_side)
{
    return make_shards(dir, nshards, nsamples, classes, seed, write_index, 0, max_side, 0, 0);
}

int rf_test_make_restart_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                uint32_t classes, uint64_t seed, uint32_t max_side)
{
    return make_shards(dir, nshards, nsamples, classes, seed, 1, 0, max_side, 1, 0);
}

int rf_test_make_big_restart_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                    uint64_t seed)
{
    return make_shards(dir, nshards, nsamples, 10, seed, 1, 700, 1000, 1, 0);
}

int rf_test_make_trailer_shards(const char *dir, uint32_t nshards, uint32_t nsamples,
                                uint32_t classes, uint64_t seed, uint32_t max_side,
                                uint32_t trailer)
{
    return make_shards(dir, nshards, nsamples, classes, seed, 1, 0, max_side, 0, trailer);
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

int rf_test_threads_named(const char *name, int prefix, long *vcsw)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    long sw = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], comm[32] = "", line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* ended meanwhile */
        int ok = fgets(comm, sizeof comm, f) != NULL;
        fclose(f);
        comm[strcspn(comm, "\n")] = 0;
        if (!ok || (prefix ? strncmp(comm, name, strlen(name)) : strcmp(comm, name)) != 0)
            continue;
        n++;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        long v;
        for (f = fopen(path, "r"); f && fgets(line, sizeof line, f);)
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1)
                sw += v;
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    if (vcsw)
        *vcsw = sw;
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

int rf_test_limit_file_size(uint64_t bytes)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_FSIZE, &rl) != 0)
        return -errno;
    rl.rlim_cur = bytes ? (rlim_t)bytes : rl.rlim_max;
    signal(SIGXFSZ, bytes ? SIG_IGN : SIG_DFL);
    return setrlimit(RLIMIT_FSIZE, &rl) != 0 ? -errno : 0;
}

static int write_proc(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = write(fd, text, strlen(text));
    int rc = n == (ssize_t)strlen(text) ? 0 : -errno;
    close(fd);
    return rc;
}

/* A mount namespace of our own; without CAP_SYS_ADMIN, inside a user namespace where this
 * user is root (the maps must be written before anything else happens in it). */
static int own_mount_namespace(void)
{
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWNS) == 0)
        return 0;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0)
        return -errno;
    char map[64];
    int rc = write_proc("/proc/self/setgroups", "deny");
    snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
    if (rc == 0)
        rc = write_proc("/proc/self/uid_map", map);
    snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
    return rc ? rc : write_proc("/proc/self/gid_map", map);
}

int rf_test_private_tmpfs(const char *dir, uint64_t bytes)
{
    int rc = own_mount_namespace();
    if (rc)
        return rc;
    /* Private propagation: the tmpfs must not appear in the namespace the tests came from. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return -errno;
    char opts[64];
    snprintf(opts, sizeof opts, "size=%llu", (unsigned long long)bytes);
    return mount("tmpfs", dir, "tmpfs", 0, opts) != 0 ? -errno : 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *rf_test_list_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    char *names[1024];
    size_t n = 0, len = 1;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < 1024) {
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
            names[n++] = strdup(de->d_name);
            len += strlen(de->d_name) + 1;
        }
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_name);
    char *out = malloc(len), *p = out;
    *p = 0;
    for (size_t i = 0; i < n; i++) {
        p += sprintf(p, "%s\n", names[i]);
        free(names[i]);
    }
    return out;
}

int rf_test_shell(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof cmd)
        return -1;
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

char *rf_test_make_member_shard(const char *dir, uint32_t n, const char *const *exts,
                                uint32_t nexts, rf_test_member_fn member, void *ctx)
{
    size_t cap = strlen(dir) + 64;
    char *src = malloc(cap), *list = malloc(cap), *tar = malloc(cap), *file = malloc(cap);
    snprintf(src, cap, "%s/src", dir);
    snprintf(list, cap, "%s/members.txt", dir);
    snprintf(tar, cap, "%s/shard-0000.tar", dir);
    mkdir(src, 0755);
    FILE *lf = fopen(list, "w");
    uint8_t rgb[64 * 48 * 3];
    for (uint32_t i = 0; i < n && lf; i++) {
        uint8_t *jpg;
        size_t len;
        rf_synth_image(900 + i, 64, 48, rgb);
        if (rf_synth_jpeg(rgb, 64, 48, 90, 0, &jpg, &len) != 0)
            abort();
        snprintf(file, cap, "%s/%08u.jpg", src, i);
        rf_test_write_file(file, jpg, len);
        free(jpg);
        fprintf(lf, "%08u.jpg\n", i);
        for (uint32_t x = 0; x < nexts; x++) {
            const void *data = member(i, exts[x], &len, ctx);
            if (!data)
                continue;
            snprintf(file, cap, "%s/%08u.%s", src, i, exts[x]);
            rf_test_write_file(file, data, len);
            fprintf(lf, "%08u.%s\n", i, exts[x]);
        }
    }
    if (!lf || fclose(lf) != 0)
        abort();
    char cmd[3 * 4096];
    snprintf(cmd, sizeof cmd, "tar --format=gnu --no-recursion --owner=0 --group=0 -cf '%s' "
             "-C '%s' -T '%s'", tar, src, list);
    if (system(cmd) != 0) {
        fprintf(stderr, "rf_test_make_member_shard: %s failed\n", cmd);
        abort();
    }
    free(src), free(list), free(file);
    return tar;
}

/* rf_test_make_label_shard_ext's members: labels[i] as sample i's label member, NULL for
 * none. */
static const void *label_member(uint32_t i, const char *ext, size_t *len, void *ctx)
{
    const char *const *labels = ctx;
    (void)ext;
    if (labels[i])
        *len = strlen(labels[i]);
    return labels[i];
}

char *rf_test_make_label_shard(const char *dir, const char *const *labels, uint32_t n)
{
    return rf_test_make_label_shard_ext(dir, "cls", labels, n);
}

char *rf_test_make_label_shard_ext(const char *dir, const char *ext, const char *const *labels,
                                   uint32_t n)
{
    const char *const exts[] = {ext};
    return rf_test_make_member_shard(dir, n, exts, 1, label_member, (void *)labels);
}

uint64_t rf_test_member_offset(const char *tar, const char *name)
{
    struct stat st;
    int fd = open(tar, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0)
        abort();
    rf_tar_scanner sc;
    rf_err e = {0};
    rf_tar_member *m = malloc(sizeof *m); /* ~4 KiB */
    uint64_t at = UINT64_MAX;
    if (rf_tar_scanner_init(&sc, fd, tar, (uint64_t)st.st_size, &e) != 0)
        abort();
    while (at == UINT64_MAX && rf_tar_next(&sc, m, &e) == 1)
        if (strcmp(m->name, name) == 0)
            at = m->header_offset;
    rf_tar_scanner_free(&sc);
    free(m);
    close(fd);
    return at;
}

uint32_t rf_test_nearest(double at, double size, uint32_t n, uint32_t o, uint32_t extent)
{
    /* Pillow's ImagingScaleAffine: xo = a[2] + a[0] / 2, then xo += a[0] per output pixel,
     * a[0] = (box[2] - box[0]) / xsize, each pixel COORD(xo) */
    double a0 = ((at + size) - at) / n, xo = at + a0 * 0.5;
    for (uint32_t i = 0; i < o; i++)
        xo += a0;
    int64_t v = xo < 0.0 ? -1 : (int64_t)xo;
    return v < 0 ? 0 : v >= (int64_t)extent ? extent - 1 : (uint32_t)v;
}

int rf_test_drain_rc(rf_loader *ld)
{
    rf_batch *b;
    int rc;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END)
        if (rc == 0)
            ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
    return rc;
}

rf_stats rf_test_drain(rf_loader *ld)
{
    int rc = rf_test_drain_rc(ld);
    ck_assert_msg(rc == RF_DONE, "rf_loader_next: %d %s", rc, rf_last_error(ld));
    rf_stats st;
    rf_stats_init(&st);
    ck_assert_int_eq(rf_loader_stats(ld, &st), 0);
    return st;
}

int rf_test_poll_stats(rf_loader *ld, rf_stats *st, int (*done)(const rf_stats *, const void *),
                       const void *ctx)
{
    for (int i = 0;; i++) {
        rf_stats_init(st);
        rf_loader_stats(ld, st);
        if (done(st, ctx))
            return 1;
        if (i == 3000)
            return 0;
        usleep(10000);
    }
}

static int engines_settled(const rf_stats *st, const void *ctx)
{
    (void)ctx;
    return st->hw_engines != RF_HW_ENGINES_OPENING;
}

uint32_t rf_test_wait_engines(rf_loader *ld)
{
    rf_stats st;
    ck_assert_msg(rf_test_poll_stats(ld, &st, engines_settled, NULL),
                  "the hardware decoders still opening after 30 s");
    return st.hw_engines;
}

void rf_test_sched_perturb(void *ctx, uint64_t seq, uint32_t *gpu, uint32_t *hw)
{
    if (ctx)
        (*(uint32_t *)ctx)++;
    uint64_t h = (seq + 1) * 0x9e3779b97f4a7c15ull;
    *gpu = (uint32_t)((h >> 20) % 1001);
    *hw = (uint32_t)((h >> 40) % (*gpu + 1));
}

void rf_test_jpeg_strip(uint8_t *j, size_t *len, uint8_t m)
{
    size_t p = 2;
    while (p + 4 <= *len && j[p] == 0xFF && j[p + 1] != 0xDA) {
        size_t seg = 2 + ((size_t)j[p + 2] << 8 | j[p + 3]);
        if (j[p + 1] == m) {
            memmove(j + p, j + p + seg, *len - p - seg);
            *len -= seg;
        } else {
            p += seg;
        }
    }
}

void rf_test_jpeg_set_size(uint8_t *j, size_t len, uint16_t w, uint16_t h)
{
    for (size_t i = 2; i + 9 < len; i++)
        if (j[i] == 0xFF && j[i + 1] == 0xC0) {
            j[i + 5] = h >> 8, j[i + 6] = h & 0xFF, j[i + 7] = w >> 8, j[i + 8] = w & 0xFF;
            return;
        }
    ck_abort_msg("no SOF0");
}

void rf_test_jpegs_open(rf_test_jpegs *s, const char *pattern)
{
    rf_err e = {0};
    rf_dataset ds;
    char **paths = NULL;
    uint32_t np = 0;
    memset(&ds, 0, sizeof ds);
    ck_assert_int_eq(rf_expand_patterns(&pattern, 1, &paths, &np, &e), 0);
    ck_assert_int_eq(rf_format_tar.open(&ds, paths, np, 64 << 20, &e), 0);
    s->n = ds.nsamples;
    s->jpeg = calloc(s->n, sizeof *s->jpeg);
    s->len = calloc(s->n, sizeof *s->len);
    for (uint64_t id = 0; id < s->n; id++) {
        const rf_sample *sm = &ds.samples[id];
        uint8_t *span = malloc(sm->length);
        ck_assert_int_eq(pread(ds.files[sm->file].fd, span, sm->length, (off_t)sm->offset),
                         (ssize_t)sm->length);
        uint32_t doff, dlen, dhdr, loff, llen, lhdr;
        ck_assert_int_eq(rf_tar_locate(span, sm->length, ds.keys + sm->key, "jpg", NULL, &doff,
                                       &dlen, &dhdr, &loff, &llen, &lhdr, &e), 0);
        s->jpeg[id] = malloc(dlen);
        memcpy(s->jpeg[id], span + doff, dlen);
        s->len[id] = dlen;
        free(span);
    }
    rf_dataset_free(&ds);
    rf_free_paths(paths, np);
}

void rf_test_jpegs_close(rf_test_jpegs *s)
{
    for (uint64_t id = 0; id < s->n; id++)
        free(s->jpeg[id]);
    free(s->jpeg), free(s->len);
}
