/* gen.c — see gen.h.
 *
 * DESIGN: `threads` workers and one writer (the calling thread) share a ring of Q = 4 x threads
 * slots. A worker claims the next sample index i under the lock, but only once i < written + Q
 * (so at most Q samples are rendered ahead of the writer: memory stays bounded whatever the
 * speed difference), renders and encodes it without the lock, and publishes the JPEG in slot
 * i % Q. The writer takes slots strictly in index order, so shard contents and boundaries are a
 * function of the config alone. Workers wait on `can_claim` (signalled when the writer frees a
 * slot), the writer on `ready` (signalled when any slot fills). On error or cancel, `stop` wakes
 * everyone; the writer joins the workers and frees what is left in the ring. */
#include "gen.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed_shards.h"
#include "synth.h"

#define GEN_THREADS_MAX 256
#define GEN_SLOTS_PER_THREAD 4
#define GEN_PATH_MAX 4096
/* Labels are written as rf_shard_writer_add's int32_t, which is also the loader's label type. */
#define GEN_CLASSES_MAX 2147483647u

uint64_t rf_gen_image_seed(uint64_t seed, uint64_t index)
{
    return rf_synth_mix64(rf_synth_mix64(seed ^ 0x696d616765ull) + index);
}

uint32_t rf_gen_label(uint64_t seed, uint64_t index, uint32_t classes)
{
    if (classes == 0)
        return 0;
    uint64_t h = rf_synth_mix64(rf_synth_mix64(seed ^ 0x6c6162656cull) + index);
    return (uint32_t)(((h >> 32) * (uint64_t)classes) >> 32);
}

int rf_gen_progressive(uint64_t seed, uint64_t index, double fraction)
{
    if (fraction <= 0.0)
        return 0;
    uint64_t h = rf_synth_mix64(rf_synth_mix64(seed ^ 0x70726f67ull) + index);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0) < fraction;
}

void rf_gen_size(uint64_t seed, uint64_t index, uint32_t min_side, uint32_t max_side,
                 uint32_t *width, uint32_t *height)
{
    uint32_t w, h;
    rf_synth_size(rf_gen_image_seed(seed, index), &w, &h);
    double lo = w < h ? w : h, hi = w < h ? h : w, scale = 1.0;
    if (min_side && lo < min_side)
        scale = (double)min_side / lo;
    if (max_side && hi * scale > max_side)
        scale = (double)max_side / hi;
    if (scale != 1.0) {
        w = (uint32_t)lround(w * scale);
        h = (uint32_t)lround(h * scale);
    }
    *width = w ? w : 1;
    *height = h ? h : 1;
}

void rf_gen_config_init(rf_gen_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->classes = 1000;
    cfg->per_shard = 1000;
    cfg->quality = 90;
    cfg->write_index = 1;
}

/* ---- the pipeline -------------------------------------------------------------------------- */

typedef struct {
    uint8_t *jpg; /* the encoded image, of format fmt */
    size_t len;
    int fmt;      /* RF_GEN_JPG, RF_GEN_PNG or RF_GEN_WEBP */
    uint32_t width, height, label;
    int progressive;
    int ready;
    int rc;
} gen_slot;

typedef struct {
    const rf_gen_config *cfg;
    pthread_mutex_t lock;
    pthread_cond_t can_claim, ready;
    uint64_t next;    /* next index to claim */
    uint64_t written; /* samples taken by the writer */
    uint32_t nslots;
    gen_slot *slots;
    int stop;
} gen_ctx;

static int encode(const rf_gen_config *cfg, gen_slot *s, const uint8_t *rgb, uint32_t w,
                  uint32_t h)
{
    if (s->fmt == RF_GEN_PNG)
        return rf_synth_png(rgb, w, h, RF_SYNTH_PNG_RGB8, &s->jpg, &s->len);
    if (s->fmt == RF_GEN_WEBP)
        return rf_synth_webp(rgb, w, h, cfg->quality, &s->jpg, &s->len);
    return rf_synth_jpeg(rgb, w, h, cfg->quality, s->progressive, &s->jpg, &s->len);
}

static void render(const rf_gen_config *cfg, uint64_t i, uint8_t **rgb, size_t *cap, gen_slot *s)
{
    uint32_t w, h;
    rf_gen_size(cfg->seed, i, cfg->min_side, cfg->max_side, &w, &h);
    s->width = w;
    s->height = h;
    s->label = cfg->label_mode == RF_GEN_LABEL_MODULO ? (uint32_t)(i % cfg->classes)
                                                      : rf_gen_label(cfg->seed, i, cfg->classes);
    s->fmt = cfg->format == RF_GEN_MIX ? (int)(i % 3) : cfg->format;
    s->progressive = s->fmt == RF_GEN_JPG && !cfg->restart &&
                     rf_gen_progressive(cfg->seed, i, cfg->progressive_fraction);
    size_t need = (size_t)w * h * 3;
    if (need > *cap) {
        uint8_t *p = realloc(*rgb, need);
        if (!p) {
            s->rc = -ENOMEM;
            return;
        }
        *rgb = p;
        *cap = need;
    }
    rf_synth_opts o = {.texture = cfg->texture, .classes = cfg->classes, .label = s->label};
    if (rf_synth_image_ex(rf_gen_image_seed(cfg->seed, i), w, h, &o, *rgb) != 0 ||
        encode(cfg, s, *rgb, w, h) != 0) {
        s->rc = -ENOMEM;
        return;
    }
    if (cfg->restart && s->fmt == RF_GEN_JPG) {
        void *t;
        uint64_t tlen;
        char why[256];
        if (rf_jpeg_add_restarts(s->jpg, s->len, 0, 0, &t, &tlen, why, sizeof why) != 0) {
            s->rc = -ENOMEM; /* our own encoder's output: only memory can fail here */
            return;
        }
        free(s->jpg);
        s->jpg = t, s->len = (size_t)tlen;
    }
    if (cfg->trailer_bytes && s->fmt == RF_GEN_JPG) {
        uint8_t *p = realloc(s->jpg, s->len + cfg->trailer_bytes);
        if (!p) {
            s->rc = -ENOMEM;
            return;
        }
        /* what follows a camera's EOI often starts like another JPEG (a preview, a gain map) */
        uint64_t x = rf_gen_image_seed(cfg->seed, i) | 1;
        for (uint32_t k = 0; k < cfg->trailer_bytes; k++, x = x * 6364136223846793005ull + 1)
            p[s->len + k] = k == 0 ? 0xFF : k == 1 ? 0xD8 : (uint8_t)(x >> 56);
        s->jpg = p, s->len += cfg->trailer_bytes;
    }
}

static void *worker(void *arg)
{
    gen_ctx *g = arg;
    uint8_t *rgb = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&g->lock);
    for (;;) {
        while (!g->stop && g->next < g->cfg->images && g->next >= g->written + g->nslots)
            pthread_cond_wait(&g->can_claim, &g->lock);
        if (g->stop || g->next >= g->cfg->images)
            break;
        uint64_t i = g->next++;
        pthread_mutex_unlock(&g->lock);
        gen_slot s = {0};
        render(g->cfg, i, &rgb, &cap, &s);
        pthread_mutex_lock(&g->lock);
        s.ready = 1;
        g->slots[i % g->nslots] = s;
        pthread_cond_broadcast(&g->ready);
    }
    pthread_mutex_unlock(&g->lock);
    free(rgb);
    return NULL;
}

static void setmsg(char *msg, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void setmsg(char *msg, size_t n, const char *fmt, ...)
{
    if (!msg || !n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, n, fmt, ap);
    va_end(ap);
}

/* The pattern must hold exactly one integer conversion (flags and width allowed) and may hold
 * "%%". Returns its conversion letter, or 0. */
static char pattern_conv(const char *p)
{
    char conv = 0;
    for (; *p; p++) {
        if (*p != '%')
            continue;
        if (p[1] == '%') {
            p++;
            continue;
        }
        p++;
        while (*p && strchr("0-+ #", *p))
            p++;
        while (*p >= '0' && *p <= '9')
            p++;
        if (!*p || !strchr("diuxXo", *p) || conv)
            return 0;
        conv = *p;
    }
    return conv;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static int shard_paths(const rf_gen_config *cfg, uint64_t shard, char *tar, char *idx)
{
    char conv = pattern_conv(cfg->output);
    int n = conv == 'd' || conv == 'i' ? snprintf(tar, GEN_PATH_MAX, cfg->output, (int)shard)
                                       : snprintf(tar, GEN_PATH_MAX, cfg->output, (unsigned)shard);
    if (n < 0 || n >= GEN_PATH_MAX - 8)
        return -ENAMETOOLONG;
    size_t len = (size_t)n;
    memcpy(idx, tar, len + 1);
    if (len > 4 && strcmp(tar + len - 4, ".tar") == 0)
        memcpy(idx + len - 4, ".idx", 5);
    else
        memcpy(idx + len, ".idx", 5);
    return 0;
}
#pragma GCC diagnostic pop

/* mkdir -p of the folder part of path. */
static int make_parent(const char *path)
{
    char buf[GEN_PATH_MAX];
    snprintf(buf, sizeof buf, "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0;
    *slash = '\0';
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The writer's state: the open shard and the running totals. */
typedef struct {
    const rf_gen_config *cfg;
    rf_shard_writer *tw;
    uint64_t shard;           /* shards opened so far */
    uint32_t in_shard;        /* samples in the open shard */
    char tar[GEN_PATH_MAX], idx[GEN_PATH_MAX];
    rf_gen_stats st;
    double t0;
} gen_writer;

/* Close the open shard (its message goes to msg on failure). */
static int close_shard(gen_writer *wr, char *msg, size_t msg_len)
{
    if (!wr->tw)
        return 0;
    uint64_t b = rf_shard_writer_bytes(wr->tw) + 1024; /* the two end blocks */
    int rc = rf_shard_writer_close(wr->tw, msg, msg_len);
    wr->tw = NULL;
    if (rc == 0) {
        wr->st.bytes += b;
        wr->st.shards++;
    }
    return rc;
}

/* Open the next shard (and its folder) when none is open. */
static int open_shard(gen_writer *wr, char *msg, size_t msg_len)
{
    const rf_gen_config *cfg = wr->cfg;
    int rc = shard_paths(cfg, cfg->first_shard + wr->shard, wr->tar, wr->idx);
    if (rc == 0)
        rc = make_parent(wr->tar);
    if (rc) {
        setmsg(msg, msg_len, "%s: %s", wr->tar, strerror(-rc));
        return rc;
    }
    rc = rf_shard_writer_open(wr->tar, cfg->write_index ? wr->idx : NULL,
                              (uint32_t)cfg->tar_format, &wr->tw, msg, msg_len);
    if (rc)
        return rc;
    wr->shard++;
    wr->in_shard = 0;
    return 0;
}

static int write_sample(gen_writer *wr, uint64_t i, const gen_slot *s, char *msg, size_t msg_len)
{
    const rf_gen_config *cfg = wr->cfg;
    char key[64];
    if (cfg->key_style == RF_GEN_KEY_CLASS_DIR)
        snprintf(key, sizeof key, "n%05u/%08llu", s->label, (unsigned long long)i);
    else
        snprintf(key, sizeof key, "%08llu", (unsigned long long)i);
    static const char *const ext[] = {"jpg", "png", "webp"};
    /* The shard's end-of-archive blocks (1024 bytes) must fit too. */
    uint64_t need = rf_shard_sample_bytes(key, ext[s->fmt], s->len, (int32_t)s->label,
                                          (uint32_t)cfg->tar_format) + 1024;
    int rotate = wr->tw && (cfg->shard_bytes
                                ? rf_shard_writer_bytes(wr->tw) + need > cfg->shard_bytes
                                : wr->in_shard >= cfg->per_shard);
    int rc = 0;
    if (rotate && (rc = close_shard(wr, msg, msg_len)) != 0)
        return rc;
    if (!wr->tw && (rc = open_shard(wr, msg, msg_len)) != 0)
        return rc;
    uint64_t at = rf_shard_writer_bytes(wr->tw);
    rc = rf_shard_writer_add(wr->tw, key, ext[s->fmt], s->jpg, s->len, (int32_t)s->label);
    if (rc) {
        setmsg(msg, msg_len, "%s: writing sample %s at byte offset %llu: %s", wr->tar, key,
               (unsigned long long)at, rf_strerror(rc));
        return rc;
    }
    wr->in_shard++;
    wr->st.images++;
    wr->st.jpeg_bytes += s->len;
    wr->st.sum_width += s->width;
    wr->st.sum_height += s->height;
    wr->st.progressive += (uint64_t)s->progressive;
    return 0;
}

static int check_config(const rf_gen_config *c, char *msg, size_t msg_len)
{
    if (!c->output || !pattern_conv(c->output)) {
        setmsg(msg, msg_len, "output pattern needs exactly one integer conversion, e.g. "
                             "'out/train-%%06d.tar'");
        return -EINVAL;
    }
    if (c->images == 0 || c->classes == 0 || c->classes > GEN_CLASSES_MAX || c->quality < 1 || c->quality > 100 ||
        c->threads > GEN_THREADS_MAX || (c->shard_bytes == 0 && c->per_shard == 0) ||
        !(c->progressive_fraction >= 0.0 && c->progressive_fraction <= 1.0) ||
        (c->max_side && c->max_side < 8) || c->texture < 0.0f ||
        (c->tar_format != RF_SHARD_PAX && c->tar_format != RF_SHARD_GNU) ||
        c->format < RF_GEN_JPG || c->format > RF_GEN_MIX || c->trailer_bytes > GEN_TRAILER_MAX) {
        setmsg(msg, msg_len, "invalid config: images, classes and per-shard must be > 0, classes "
                             "<= %u, quality 1..100, threads <= %d, progressive fraction 0..1, "
                             "max side >= 8, tar format pax or gnu, format jpg, png, webp or mix, "
                             "trailer <= %u bytes",
               GEN_CLASSES_MAX, GEN_THREADS_MAX, GEN_TRAILER_MAX);
        return -EINVAL;
    }
    return 0;
}

static uint32_t default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > GEN_THREADS_MAX ? GEN_THREADS_MAX : (uint32_t)n;
}

/* The writer loop: take slots in index order until done, failed or cancelled. */
static int drain(gen_ctx *g, gen_writer *wr, char *msg, size_t msg_len)
{
    const rf_gen_config *cfg = g->cfg;
    for (uint64_t i = 0; i < cfg->images; i++) {
        gen_slot *slot = &g->slots[i % g->nslots];
        pthread_mutex_lock(&g->lock);
        while (!slot->ready)
            pthread_cond_wait(&g->ready, &g->lock);
        gen_slot s = *slot;
        memset(slot, 0, sizeof *slot);
        g->written = i + 1;
        pthread_cond_broadcast(&g->can_claim);
        pthread_mutex_unlock(&g->lock);

        int rc = s.rc;
        if (rc)
            setmsg(msg, msg_len, "sample %llu: out of memory", (unsigned long long)i);
        else
            rc = write_sample(wr, i, &s, msg, msg_len);
        free(s.jpg);
        if (rc)
            return rc;
        wr->st.seconds = now_s() - wr->t0;
        if (cfg->progress && cfg->progress(cfg->progress_ctx, &wr->st)) {
            setmsg(msg, msg_len, "cancelled");
            return -ECANCELED;
        }
    }
    return 0;
}

int rf_gen_run(const rf_gen_config *cfg, rf_gen_stats *st, char *msg, size_t msg_len)
{
    setmsg(msg, msg_len, "ok");
    if (st)
        memset(st, 0, sizeof *st);
    int rc = check_config(cfg, msg, msg_len);
    if (rc)
        return rc;
    uint32_t nthreads = cfg->threads ? cfg->threads : default_threads();
    gen_ctx g = {.cfg = cfg, .nslots = nthreads * GEN_SLOTS_PER_THREAD};
    g.slots = calloc(g.nslots, sizeof *g.slots);
    pthread_t *tid = calloc(nthreads, sizeof *tid);
    gen_writer *wr = calloc(1, sizeof *wr);
    if (!g.slots || !tid || !wr) {
        free(g.slots);
        free(tid);
        free(wr);
        setmsg(msg, msg_len, "out of memory");
        return -ENOMEM;
    }
    wr->cfg = cfg;
    wr->t0 = now_s();
    pthread_mutex_init(&g.lock, NULL);
    pthread_cond_init(&g.can_claim, NULL);
    pthread_cond_init(&g.ready, NULL);
    uint32_t started = 0;
    for (; started < nthreads; started++)
        if (pthread_create(&tid[started], NULL, worker, &g) != 0)
            break;
    if (started == 0) {
        rc = -EAGAIN;
        setmsg(msg, msg_len, "cannot start worker threads");
    } else {
        rc = drain(&g, wr, msg, msg_len);
    }

    pthread_mutex_lock(&g.lock);
    g.stop = 1;
    pthread_cond_broadcast(&g.can_claim);
    pthread_mutex_unlock(&g.lock);
    for (uint32_t t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    for (uint32_t k = 0; k < g.nslots; k++)
        free(g.slots[k].jpg);
    /* A run that failed or was cancelled gives its open shard up rather than publish part of
     * it under a shard's name. */
    if (rc)
        rf_shard_writer_abort(wr->tw);
    else
        rc = close_shard(wr, msg, msg_len);
    wr->st.seconds = now_s() - wr->t0;
    if (st)
        *st = wr->st;
    pthread_cond_destroy(&g.ready);
    pthread_cond_destroy(&g.can_claim);
    pthread_mutex_destroy(&g.lock);
    free(g.slots);
    free(tid);
    free(wr);
    return rc;
}
