/* ringfeed-pack — turn a class-folder tree (or a `path label` list) into WebDataset tar shards
 * with a DALI v1.2 index beside each. Uses the public API only (ringfeed.h, ringfeed_shards.h).
 *
 * DESIGN. The image list (rf_image_list_open) fixes files, labels and keys; --shuffle permutes
 * that order with a seeded Fisher-Yates before sharding. Reader threads claim sample numbers in
 * order, read whole files and check their JPEG headers into a window of WINDOW_PER_THREAD slots
 * per thread; the main thread is the one writer and takes slots strictly in sample order, so
 * the shards are byte-identical whatever --threads is. Readers block when they run a window
 * ahead of the writer (memory is bounded by window x --max-file-bytes), the writer blocks on
 * the next slot. A shard is closed before a sample would make it exceed --shard-size (a
 * sample larger than that gets a shard of its own). Bad files are reported with their path
 * and skipped, or stop the run with --strict; entries the walk could not read (dangling or
 * looping symlinks, FIFOs and devices named .jpg) are bad files too, and a file is checked to
 * be regular before it is read. The shard writer is atomic, so a shard appears under its name
 * only complete; a run that fails (a write error such as ENOSPC, or --strict) gives its
 * unfinished shard up, and the shards before it stay. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ringfeed.h"
#include "ringfeed_shards.h"

#include "pack.h"
#include "pack_sync.h"

#define PROGRESS_NS 250000000ull


typedef struct slot {
    int ready;
    int rc;               /* 0, or the error that makes this file bad */
    uint8_t *data;
    uint64_t len;
    uint64_t in_len;      /* the file's size (len differs after --restart's rewrite) */
    int kept;             /* --restart left it as it is (RF_JPEG_RESTART_KEPT) */
    char msg[600];
} slot;

typedef struct packer {
    const opts *o;
    rf_image_list *list;
    uint64_t *order, n;
    slot *slots;
    uint64_t window;
    uint64_t claim, written;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t cv_ready, cv_space;
    /* output pattern split around its one integer conversion */
    char prefix[PACK_PATH_MAX], suffix[PACK_PATH_MAX];
    int width, zero;
    pack_sync *sync;      /* --sync-index: closed shards go here */
} packer;

typedef struct totals {
    uint64_t files, bad, shards, in_bytes, out_bytes;
    uint64_t unreadable;  /* of bad: entries the walk could not read (rf_image_list_unreadable) */
    uint64_t restart_kept; /* --restart: incomplete progressive JPEGs kept as they were */
    double seconds;
    pack_sync_totals sync; /* --sync-index */
} totals;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}



/* Split the output pattern around exactly one %d/%i/%u conversion (flags '0', width); "%%"
 * is a literal percent. Formatting ourselves avoids a printf with a user-supplied format. */
static int split_pattern(packer *p, const char *pat)
{
    size_t np = 0, ns = 0;
    int found = 0;
    for (const char *c = pat; *c; c++) {
        char *dst = found ? p->suffix : p->prefix;
        size_t *n = found ? &ns : &np;
        if (*n + 2 >= PACK_PATH_MAX)
            return -1;
        if (c[0] == '%' && c[1] == '%') {
            dst[(*n)++] = '%';
            c++;
            continue;
        }
        if (c[0] != '%') {
            dst[(*n)++] = *c;
            continue;
        }
        if (found)
            return -1;
        c++;
        p->zero = *c == '0';
        while (*c == '0')
            c++;
        p->width = 0;
        while (*c >= '0' && *c <= '9' && p->width < 100)
            p->width = p->width * 10 + (*c++ - '0');
        if (*c != 'd' && *c != 'i' && *c != 'u')
            return -1;
        found = 1;
    }
    p->prefix[np] = 0;
    p->suffix[ns] = 0;
    return found ? 0 : -1;
}

static void shard_paths(const packer *p, uint64_t k, char *tar, char *idx)
{
    char num[32];
    snprintf(num, sizeof num, p->zero ? "%0*" PRIu64 : "%*" PRIu64, p->width, k);
    snprintf(tar, PACK_PATH_MAX, "%s%s%s", p->prefix, num, p->suffix);
    rf_shard_index_path(tar, idx, PACK_PATH_MAX);
}

/* mkdir -p of the folder that holds `path`. */
static int make_parent(const char *path)
{
    char dir[PACK_PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = 0;
    for (char *c = dir + 1; *c; c++) {
        if (*c != '/')
            continue;
        *c = 0;
        if (mkdir(dir, 0777) != 0 && errno != EEXIST)
            return -errno;
        *c = '/';
    }
    return mkdir(dir, 0777) != 0 && errno != EEXIST ? -errno : 0;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t x = (*s += 0x9e3779b97f4a7c15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Seeded Fisher-Yates; bounded draws by rejection so every permutation is equally likely. */
static void shuffle(uint64_t *v, uint64_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (uint64_t i = n; i > 1; i--) {
        uint64_t lim = UINT64_MAX - UINT64_MAX % i, r;
        do
            r = splitmix(&s);
        while (r >= lim);
        uint64_t j = r % i, t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

/* ---- readers ---------------------------------------------------------------------------- */

static int read_file(const char *path, uint64_t max, uint8_t **out, uint64_t *len, char *msg,
                     size_t cap)
{
    /* O_NONBLOCK: a FIFO put in the file's place since the walk must not hang open(); it is
     * then refused as not regular. Reads of a regular file ignore the flag. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        snprintf(msg, cap, "%s: %s", path, strerror(e));
        if (fd >= 0)
            close(fd);
        return -e;
    }
    uint64_t size = (uint64_t)st.st_size;
    uint8_t *buf = NULL;
    int rc = 0;
    if (!S_ISREG(st.st_mode)) {
        snprintf(msg, cap, "%s: not a regular file; not read", path);
        rc = RF_EFORMAT;
    } else if (size > max) {
        snprintf(msg, cap, "%s: %" PRIu64 " bytes, over --max-file-bytes %" PRIu64, path, size, max);
        rc = RF_ELIMIT;
    } else if (!(buf = malloc(size ? size : 1))) {
        snprintf(msg, cap, "%s: no memory for %" PRIu64 " bytes", path, size);
        rc = RF_ENOMEM;
    }
    uint64_t got = 0;
    while (rc == 0 && got < size) {
        ssize_t r = pread(fd, buf + got, size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(msg, cap, "%s: read failed at offset %" PRIu64 ": %s", path, got,
                     r < 0 ? strerror(errno) : "file shrank");
            rc = RF_EIO;
        } else {
            got += (uint64_t)r;
        }
    }
    close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = size;
    return 0;
}

static void *reader_main(void *arg)
{
    packer *p = arg;
    rf_jpeg_checker *jc = rf_jpeg_checker_create();
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->stop && p->claim < p->n && p->claim >= p->written + p->window)
            pthread_cond_wait(&p->cv_space, &p->mu);
        if (p->stop || p->claim >= p->n) {
            pthread_mutex_unlock(&p->mu);
            break;
        }
        uint64_t i = p->claim++;
        pthread_mutex_unlock(&p->mu);

        slot r = {0};
        const char *path = rf_image_list_path(p->list, p->order[i]);
        char why[512];
        if (!jc) {
            r.rc = RF_ENOMEM;
            snprintf(r.msg, sizeof r.msg, "%s: no memory for a JPEG decoder", path);
        } else {
            r.rc = read_file(path, p->o->max_file_bytes, &r.data, &r.len, r.msg, sizeof r.msg);
            r.in_len = r.len;
        }
        if (r.rc == 0 && (r.rc = rf_jpeg_check(jc, r.data, r.len, NULL, NULL, NULL, why,
                                                sizeof why)) != 0)
            snprintf(r.msg, sizeof r.msg, "%s: offset 0: bad image: %s", path, why);
        /* Restart markers are a JPEG's (the check above passed: its SOI is there). */
        if (r.rc == 0 && p->o->restart && r.data[0] == 0xFF && r.data[1] == 0xD8) {
            void *t;
            uint64_t tlen;
            r.rc = rf_jpeg_add_restarts(r.data, r.len, p->o->restart_interval, 1, &t, &tlen, why,
                                        sizeof why);
            if (r.rc == RF_JPEG_RESTART_KEPT) { /* its pixels depend on being progressive */
                r.rc = 0;
                r.kept = 1;
            } else if (r.rc) {
                snprintf(r.msg, sizeof r.msg, "%s: offset 0: cannot add restart markers: %s",
                         path, why);
            } else {
                free(r.data);
                r.data = t, r.len = tlen;
            }
        }
        pthread_mutex_lock(&p->mu);
        slot *s = &p->slots[i % p->window];
        *s = r;
        s->ready = 1;
        pthread_cond_broadcast(&p->cv_ready);
        pthread_mutex_unlock(&p->mu);
    }
    rf_jpeg_checker_destroy(jc);
    return NULL;
}

/* ---- the writer (main thread) ----------------------------------------------------------- */

typedef struct writer {
    packer *p;
    rf_shard_writer *w;
    uint64_t shard;       /* next shard number */
    char tar[PACK_PATH_MAX], idx[PACK_PATH_MAX];
    uint64_t files, in_bytes; /* of the open shard: totals once it is closed */
    totals *t;
} writer;

static int close_shard(writer *wr)
{
    if (!wr->w)
        return 0;
    char err[600];
    uint64_t b = rf_shard_writer_bytes(wr->w) + 1024;
    int rc = rf_shard_writer_close(wr->w, err, sizeof err);
    wr->w = NULL;
    if (rc) {
        fprintf(stderr, "ringfeed-pack: %s\n", err);
        return rc;
    }
    wr->t->shards++;
    wr->t->out_bytes += b;
    if (wr->p->sync && pack_sync_add(wr->p->sync, wr->tar)) {
        fprintf(stderr, "ringfeed-pack: out of memory\n");
        return 1;
    }
    wr->t->files += wr->files;
    wr->t->in_bytes += wr->in_bytes;
    wr->files = wr->in_bytes = 0;
    return 0;
}

/* The run failed with a shard open: give it up rather than leave part of it under a shard's
 * name (the writer removes its temporary files). */
static void abort_shard(writer *wr)
{
    if (!wr->w)
        return;
    rf_shard_writer_abort(wr->w);
    wr->w = NULL;
    fprintf(stderr, "ringfeed-pack: %s: not written (the run stopped with this shard "
            "unfinished; its %" PRIu64 " samples are not counted)\n", wr->tar, wr->files);
    wr->files = wr->in_bytes = 0;
}

/* The member extension of a file: its own when it is one the loader takes by default (jpg,
 * jpeg, png, webp, any case: kept as spelled), else "jpg" (a list entry of another name). */
static const char *member_ext(const char *path)
{
    static const char *const known[] = {"jpg", "jpeg", "png", "webp"};
    const char *base = strrchr(path, '/'), *dot = strrchr(base ? base : path, '.');
    for (size_t i = 0; dot && i < sizeof known / sizeof known[0]; i++)
        if (strcasecmp(dot + 1, known[i]) == 0)
            return dot + 1;
    return "jpg";
}

static int write_sample(writer *wr, uint64_t id, const slot *s)
{
    packer *p = wr->p;
    const char *key = rf_image_list_key(p->list, id);
    const char *ext = member_ext(rf_image_list_path(p->list, id));
    int32_t label = rf_image_list_label(p->list, id);
    uint64_t need = rf_shard_sample_bytes(key, ext, s->len, label, p->o->format);
    char err[600];
    int rc = 0;
    if (wr->w && rf_shard_writer_samples(wr->w) > 0 &&
        rf_shard_writer_bytes(wr->w) + need + 1024 > p->o->shard_bytes)
        rc = close_shard(wr);
    if (rc == 0 && !wr->w) {
        if (wr->shard - p->o->first_shard >= PACK_SHARDS_MAX) {
            fprintf(stderr, "ringfeed-pack: more than %u shards\n", PACK_SHARDS_MAX);
            return RF_ELIMIT;
        }
        shard_paths(p, wr->shard++, wr->tar, wr->idx);
        if ((rc = make_parent(wr->tar)) != 0)
            fprintf(stderr, "ringfeed-pack: cannot create the folder of %s: %s\n", wr->tar,
                    strerror(-rc));
        else if ((rc = rf_shard_writer_open(wr->tar, wr->idx, p->o->format, &wr->w, err,
                                            sizeof err)) != 0)
            fprintf(stderr, "ringfeed-pack: %s\n", err);
    }
    if (rc == 0 && (rc = rf_shard_writer_add(wr->w, key, ext, s->data, s->len, label)) != 0) {
        const char *name = rc < 0 ? strerrorname_np(-rc) : NULL; /* "ENOSPC"; NULL: not errno */
        fprintf(stderr, "ringfeed-pack: %s: writing sample %s at offset %" PRIu64 ": %s%s%s%s\n",
                wr->tar, key, rf_shard_writer_bytes(wr->w), rf_strerror(rc), name ? " (" : "",
                name ? name : "", name ? ")" : "");
    }
    if (rc == 0) {
        wr->files++;
        wr->in_bytes += s->in_len;
    }
    return rc;
}

static void progress(const packer *p, const totals *t, uint64_t done, double t0, int final)
{
    double dt = now_s() - t0;
    fprintf(stderr, "\r%" PRIu64 "/%" PRIu64 " files  %" PRIu64 " shards  %.1f MB  %.1f MB/s%s",
            done, p->n, t->shards + (final ? 0 : 1), (double)t->in_bytes / 1e6,
            dt > 0 ? (double)t->in_bytes / 1e6 / dt : 0.0, final ? "\n" : "  ");
    fflush(stderr);
}

static int write_all(packer *p, totals *t)
{
    writer wr = {.p = p, .shard = p->o->first_shard, .t = t};
    int show = !p->o->quiet && isatty(STDERR_FILENO);
    double t0 = now_s(), last = t0;
    int rc = 0;
    for (uint64_t i = 0; i < p->n && rc == 0; i++) {
        pthread_mutex_lock(&p->mu);
        slot *s = &p->slots[i % p->window];
        while (!s->ready)
            pthread_cond_wait(&p->cv_ready, &p->mu);
        slot got = *s;
        pthread_mutex_unlock(&p->mu);

        if (got.rc) {
            t->bad++;
            fprintf(stderr, "%sringfeed-pack: %s: %s\n", show ? "\n" : "",
                    p->o->strict ? "error" : "skipping", got.msg);
            if (p->o->strict)
                rc = got.rc;
        } else {
            rc = write_sample(&wr, p->order[i], &got);
            t->restart_kept += (uint64_t)got.kept;
        }
        free(got.data);
        pthread_mutex_lock(&p->mu);
        s->ready = 0;
        s->data = NULL;
        p->written++;
        pthread_cond_broadcast(&p->cv_space);
        pthread_mutex_unlock(&p->mu);
        if (show && now_s() - last > PROGRESS_NS * 1e-9) {
            last = now_s();
            progress(p, t, i + 1, t0, 0);
        }
    }
    if (rc)
        abort_shard(&wr);
    else
        rc = close_shard(&wr);
    if (show)
        progress(p, t, p->written, t0, 1);
    return rc;
}

/* Entries the walk could not read (dangling or looping symlinks, FIFOs named .jpg) are bad
 * files like any other: each is named, then skipped and counted, or, with --strict, stops the
 * run before a shard is written. */
static int report_unreadable(const opts *o, const rf_image_list *l, totals *t)
{
    uint64_t n = rf_image_list_unreadable(l);
    for (uint64_t i = 0; i < n; i++)
        fprintf(stderr, "ringfeed-pack: %s: %s\n", o->strict ? "error" : "skipping",
                rf_image_list_unreadable_message(l, i));
    t->unreadable = n;
    t->bad += n;
    return o->strict && n ? -1 : 0;
}

/* Read and write every sample of the list: the reader threads and the one writer. */
static int pack_list(packer *p, totals *t)
{
    const opts *o = p->o;
    int rc = 0;
    p->window = (uint64_t)o->threads * WINDOW_PER_THREAD;
    p->order = malloc(p->n * sizeof *p->order);
    p->slots = calloc(p->window, sizeof *p->slots);
    pthread_t *th = calloc(o->threads, sizeof *th);
    if (!p->order || !p->slots || !th) {
        fprintf(stderr, "ringfeed-pack: no memory\n");
        rc = 1;
        goto out;
    }
    for (uint64_t i = 0; i < p->n; i++)
        p->order[i] = i;
    if (o->shuffle)
        shuffle(p->order, p->n, o->seed);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_ready, NULL);
    pthread_cond_init(&p->cv_space, NULL);
    uint32_t started = 0;
    for (; started < o->threads; started++)
        if (pthread_create(&th[started], NULL, reader_main, p) != 0)
            break;
    if (started == 0) {
        fprintf(stderr, "ringfeed-pack: cannot start threads\n");
        rc = 1;
    } else {
        rc = write_all(p, t) ? 1 : 0;
    }
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->cv_space);
    pthread_mutex_unlock(&p->mu);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    for (uint64_t i = 0; i < p->window; i++)
        free(p->slots[i].data);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv_ready);
    pthread_cond_destroy(&p->cv_space);
out:
    free(th);
    free(p->slots);
    free(p->order);
    return rc;
}

static int run(const opts *o, totals *t)
{
    packer p = {.o = o};
    char err[1024];
    if (split_pattern(&p, o->output) != 0) {
        fprintf(stderr, "ringfeed-pack: --output needs exactly one %%d/%%u conversion, e.g. "
                "'out/train-%%04d.tar' (got %s)\n", o->output);
        return 2;
    }
    double t0 = now_s();
    int rc = rf_image_list_open(o->input, &p.list, err, sizeof err);
    if (rc) {
        fprintf(stderr, "ringfeed-pack: %s\n", err);
        return 1;
    }
    p.n = rf_image_list_count(p.list);
    if (!o->quiet)
        fprintf(stderr, "ringfeed-pack: %" PRIu64 " images, %u classes, %" PRIu64
                " other files skipped, %" PRIu64 " unreadable, %" PRIu64
                " keys renamed to stay unique\n", p.n, rf_image_list_classes(p.list),
                rf_image_list_skipped(p.list), rf_image_list_unreadable(p.list),
                rf_image_list_renamed(p.list));
    if (o->sync && !(p.sync = pack_sync_start(o->threads, o->quiet))) {
        fprintf(stderr, "ringfeed-pack: no memory\n");
        rf_image_list_free(p.list);
        return 1;
    }
    rc = report_unreadable(o, p.list, t) != 0 ? 1 : pack_list(&p, t);
    if (p.sync && pack_sync_finish(p.sync, &t->sync))
        rc = 1;
    t->seconds = now_s() - t0;
    rf_image_list_free(p.list);
    return rc;
}


/* --restart's files kept as they are, said after the summary (none: ""). */
static const char *kept_note(const totals *t)
{
    static char note[200];
    if (!t->restart_kept)
        return "";
    snprintf(note, sizeof note, "; %" PRIu64 " progressive JPEGs kept as they were (their scans "
             "stop before every coefficient is complete: a rewrite would change their pixels)",
             t->restart_kept);
    return note;
}

int main(int argc, char **argv)
{
    opts o;
    if (pack_parse_args(argc, argv, &o) != 0) {
        pack_usage(stderr);
        return 2;
    }
    totals t = {0};
    if (o.shards) /* --sync-index for shards that exist */
        return pack_sync_only((const char *const *)o.shards, o.nshards, o.threads, o.quiet,
                              o.json);
    int rc = run(&o, &t);
    if (rc == 2)
        return 2;
    double mbs = t.seconds > 0 ? (double)t.in_bytes / 1e6 / t.seconds : 0;
    if (!o.quiet)
        fprintf(stderr, "ringfeed-pack: %s: %" PRIu64 " files (%" PRIu64 " bad, %" PRIu64
                " of them unreadable, %s) -> %" PRIu64 " shards, %.1f MB in, %.1f MB out, "
                "%.2f s, %.1f MB/s (%u threads)%s\n", rc ? "FAILED" : "done", t.files, t.bad,
                t.unreadable, o.strict ? "refused" : "skipped", t.shards,
                (double)t.in_bytes / 1e6, (double)t.out_bytes / 1e6, t.seconds, mbs, o.threads,
                kept_note(&t));
    if (o.sync)
        pack_sync_print(&t.sync, t.seconds, 0);
    if (o.json)
        printf("{\"ok\": %s, \"files\": %" PRIu64 ", \"bad\": %" PRIu64
               ", \"unreadable\": %" PRIu64 ", \"shards\": %" PRIu64 ", \"input_bytes\": %"
               PRIu64 ", \"output_bytes\": %" PRIu64 ", \"seconds\": %.4f, \"mb_per_s\": %.2f, "
               "\"threads\": %u, \"restart_kept\": %" PRIu64 "%s", rc ? "false" : "true",
               t.files, t.bad, t.unreadable, t.shards, t.in_bytes, t.out_bytes, t.seconds, mbs,
               o.threads, t.restart_kept, o.sync ? ", \"sync\": " : "}\n");
    if (o.json && o.sync)
        pack_sync_print(&t.sync, t.seconds, 1), printf("}\n");
    return rc ? 1 : 0;
}
