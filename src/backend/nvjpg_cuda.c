/* nvjpg_cuda.c — the hardware JPEG decoders through nvJPEG (nvjpg.h).
 *
 * DESIGN
 *  - No nvjpeg.h at build time: the few entry points used are declared here (nvJPEG 12/13's
 *    ABI) and looked up with dlsym, so the CUDA backend builds without the library.
 *  - One nvJPEG handle per loader; one decode state per copy stream, each with a mutex and
 *    arrays sized at open: the hot path allocates nothing, and nvJPEG's own buffers are
 *    preallocated for a batch at open.
 *  - nvjpegDecodeBatched writes its output when called, not in stream order, into scratch the
 *    pool may have just handed over from an earlier batch: each call first waits, on the host,
 *    for its stream (docs/gpu-decode.md, "Each call waits"). Streams still run at once.
 *  - Errors are per file: a failed batch's engine images are decoded again one by one to find
 *    the files refused (RF_GJ_ENGINE); the others are not lost. */
#include "backend/nvjpg.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cudadev.h"
#include "backend/gpujpeg.h"

/* ---- the ABI used ---- */

typedef struct nv_handle *nv_handle;
typedef struct nv_state *nv_state;
typedef struct nv_image { /* nvjpegImage_t */
    unsigned char *channel[4];
    size_t pitch[4];
} nv_image;
enum {
    NV_SUCCESS = 0,
    NV_ARCH_MISMATCH = 7,           /* "this GPU has no hardware decoder" */
    NV_IMPLEMENTATION_NOT_SUPPORTED = 9,
    NV_BACKEND_HARDWARE = 3,
    NV_OUTPUT_UNCHANGED = 0,        /* planar, each component at its own sampling */
    NV_CSS_444 = 0,
    NV_FLAGS_BITSTREAM_STRICT = 1 << 2, /* report corrupt data instead of decoding around it */
};

typedef struct nv_api {
    int (*create_ex)(int backend, void *dev_alloc, void *pinned_alloc, unsigned flags,
                     nv_handle *h);
    int (*destroy)(nv_handle h);
    int (*state_create)(nv_handle h, nv_state *s);
    int (*state_destroy)(nv_state s);
    int (*batched_init)(nv_handle h, nv_state s, int batch, int max_cpu_threads, int format);
    int (*batched)(nv_handle h, nv_state s, const unsigned char *const *data,
                   const size_t *lengths, nv_image *dst, cudaStream_t stream);
    int (*preallocate)(nv_handle h, nv_state s, int batch, int width, int height, int css,
                       int format); /* NULL: not in this libnvjpeg */
} nv_api;

/* The library is process-wide state, as the dynamic linker's is: loaded once, never unloaded
 * (its threads and the CUDA context may outlive any one loader). */
static nv_api api;
static char load_error[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
    const char *env = getenv("RINGFEED_NVJPEG");
    const char *names[] = {env && *env ? env : NULL, "libnvjpeg.so.13", "libnvjpeg.so"};
    void *lib = NULL;
    for (size_t i = 0; i < 3 && !lib; i++)
        if (names[i])
            lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        if (env && *env)
            snprintf(load_error, sizeof load_error, "RINGFEED_NVJPEG=%s could not be loaded "
                     "(%s)", env, why);
        else
            snprintf(load_error, sizeof load_error, "libnvjpeg.so.13 could not be loaded (%s)",
                     why);
        return;
    }
    nv_api a;
    const char *sym[] = {"nvjpegCreateEx", "nvjpegDestroy", "nvjpegJpegStateCreate",
                         "nvjpegJpegStateDestroy", "nvjpegDecodeBatchedInitialize",
                         "nvjpegDecodeBatched"};
    void **slot[] = {(void **)&a.create_ex, (void **)&a.destroy, (void **)&a.state_create,
                     (void **)&a.state_destroy, (void **)&a.batched_init,
                     (void **)&a.batched};
    for (size_t i = 0; i < sizeof sym / sizeof *sym; i++)
        if (!(*slot[i] = dlsym(lib, sym[i]))) {
            snprintf(load_error, sizeof load_error, "the loaded libnvjpeg has no %s", sym[i]);
            return;
        }
    *(void **)&a.preallocate = dlsym(lib, "nvjpegDecodeBatchedPreAllocate");
    api = a;
}

/* ---- states ---- */

/* nvjpegDecodeBatchedPreAllocate's image: 4:4:4 at this side covers most photographs a
 * training set holds: 410 MiB of device memory for the four states at batch 256 (H100) */
#define RF_NVJPG_PREALLOC_SIDE 1024

typedef struct nj_state {
    pthread_mutex_t mu;
    nv_state st;
    cudaEvent_t queued; /* the stream's work before a call: waited for on the host */
    const unsigned char **data;
    size_t *len;
    nv_image *img;
    uint32_t *index; /* batch index of each engine image */
} nj_state;

struct rf_nvjpg {
    nv_handle h;
    uint32_t nstates, max_batch;
    nj_state *s;
};

void rf_nvjpg_close(rf_nvjpg *nj)
{
    if (!nj)
        return;
    for (uint32_t k = 0; nj->s && k < nj->nstates; k++) {
        nj_state *s = &nj->s[k];
        if (s->st)
            api.state_destroy(s->st);
        if (s->queued)
            cudaEventDestroy(s->queued);
        pthread_mutex_destroy(&s->mu);
        free(s->data), free(s->len), free(s->img), free(s->index);
    }
    free(nj->s);
    if (nj->h)
        api.destroy(nj->h);
    free(nj);
}

int rf_nvjpg_load(rf_err *err)
{
    pthread_once(&load_once, load);
    if (!api.create_ex)
        return rf_seterr(err, RF_ENODEV, "hw_decode needs nvJPEG: %s; install the CUDA "
                         "toolkit's libnvjpeg or `pip install nvidia-nvjpeg`, or set "
                         "RINGFEED_NVJPEG to the library's path", load_error);
    return 0;
}

int rf_nvjpg_open(uint32_t states, uint32_t max_batch, rf_nvjpg **out, rf_err *err)
{
    *out = NULL;
    int rc = rf_nvjpg_load(err);
    if (rc)
        return rc;
    rf_nvjpg *nj = calloc(1, sizeof *nj);
    if (!nj || !(nj->s = calloc(states, sizeof *nj->s))) {
        free(nj);
        return rf_seterr(err, RF_ENOMEM, "no memory for the hardware decoder's states");
    }
    nj->nstates = states, nj->max_batch = max_batch;
    for (uint32_t k = 0; k < states; k++)
        pthread_mutex_init(&nj->s[k].mu, NULL);
    int st = api.create_ex(NV_BACKEND_HARDWARE, NULL, NULL, NV_FLAGS_BITSTREAM_STRICT, &nj->h);
    if (st) {
        nj->h = NULL;
        rf_nvjpg_close(nj);
        if (st == NV_ARCH_MISMATCH || st == NV_IMPLEMENTATION_NOT_SUPPORTED)
            return rf_seterr(err, RF_ENODEV, "hw_decode: this GPU has no hardware JPEG decoder "
                             "(nvJPEG status %d; A100, A30, H100 and H200 have one): use "
                             "gpu_decode or the CPU", st);
        return rf_seterr(err, RF_ECUDA, "nvjpegCreateEx(hardware backend) failed: status %d",
                         st);
    }
    for (uint32_t k = 0; k < states; k++) {
        nj_state *s = &nj->s[k];
        s->data = calloc(max_batch, sizeof *s->data);
        s->len = calloc(max_batch, sizeof *s->len);
        s->img = calloc(max_batch, sizeof *s->img);
        s->index = calloc(max_batch, sizeof *s->index);
        if (!s->data || !s->len || !s->img || !s->index) {
            rf_nvjpg_close(nj);
            return rf_seterr(err, RF_ENOMEM, "no memory for the hardware decoder's states");
        }
        if ((st = api.state_create(nj->h, &s->st)) != NV_SUCCESS) {
            s->st = NULL;
            rf_nvjpg_close(nj);
            return rf_seterr(err, RF_ECUDA, "nvjpegJpegStateCreate failed: status %d", st);
        }
        /* The hardware buffers for whole batches, once: without them nvJPEG grows them inside
         * calls, which then took 1.5 ms an image against 0.2 (docs/gpu-decode.md, "The
         * engines' calls and their check"). A larger image still decodes, by a growth; a
         * refusal costs only that. */
        if (api.preallocate)
            api.preallocate(nj->h, s->st, (int)max_batch, RF_NVJPG_PREALLOC_SIDE,
                            RF_NVJPG_PREALLOC_SIDE, NV_CSS_444, NV_OUTPUT_UNCHANGED);
        /* blocking sync: the waiting decode thread sleeps instead of spinning a CPU */
        cudaError_t ce = cudaEventCreateWithFlags(&s->queued, cudaEventDisableTiming |
                                                                  cudaEventBlockingSync);
        if (ce != cudaSuccess) {
            s->queued = NULL;
            rf_nvjpg_close(nj);
            return rf_cuda_seterr(err, (int)ce, "cudaEventCreateWithFlags");
        }
    }
    *out = nj;
    return 0;
}

/* ---- decoding ---- */

/* The status values this file writes: RF_GJ_BAD_PACKET, or RF_GJ_ENGINE with nvJPEG's status
 * above the low byte. Copied from here, so they are static. */
#define NV_CODES 16
static const int32_t engine_code[NV_CODES] = {
    RF_GJ_ENGINE | 0 << 8,  RF_GJ_ENGINE | 1 << 8,  RF_GJ_ENGINE | 2 << 8,
    RF_GJ_ENGINE | 3 << 8,  RF_GJ_ENGINE | 4 << 8,  RF_GJ_ENGINE | 5 << 8,
    RF_GJ_ENGINE | 6 << 8,  RF_GJ_ENGINE | 7 << 8,  RF_GJ_ENGINE | 8 << 8,
    RF_GJ_ENGINE | 9 << 8,  RF_GJ_ENGINE | 10 << 8, RF_GJ_ENGINE | 11 << 8,
    RF_GJ_ENGINE | 12 << 8, RF_GJ_ENGINE | 13 << 8, RF_GJ_ENGINE | 14 << 8,
    RF_GJ_ENGINE | 15 << 8};
static const int32_t bad_packet_code = RF_GJ_BAD_PACKET;

static cudaError_t mark(int32_t *status, uint32_t i, const int32_t *code, cudaStream_t stream)
{
    return cudaMemcpyAsync(status + i, code, sizeof(int32_t), cudaMemcpyHostToDevice, stream);
}

static int decode(rf_nvjpg *nj, nj_state *s, uint32_t first, uint32_t n, cudaStream_t stream)
{
    int st = api.batched_init(nj->h, s->st, (int)n, 1, NV_OUTPUT_UNCHANGED);
    if (st == NV_SUCCESS)
        st = api.batched(nj->h, s->st, s->data + first, s->len + first, s->img + first, stream);
    return st;
}

int rf_nvjpg_decode(rf_nvjpg *nj, uint32_t k, const uint8_t *staged, const uint64_t *offs,
                    const uint8_t *flags, uint32_t count, uint8_t *scratch, size_t scratch_bytes,
                    int32_t *status, void *stream, rf_err *err)
{
    cudaStream_t cs = (cudaStream_t)stream;
    nj_state *s = &nj->s[k % nj->nstates];
    cudaError_t e = cudaSuccess;
    pthread_mutex_lock(&s->mu);
    uint32_t n = 0;
    for (uint32_t i = 0; i < count && e == cudaSuccess; i++) {
        if (flags[i] != RF_GJ_ENGINE_PACKET)
            continue;
        if (n == nj->max_batch) { /* more than the batch the states were sized for */
            e = mark(status, i, &bad_packet_code, cs);
            continue;
        }
        const uint8_t *pkt = staged + offs[i];
        const rf_gj_packet *p = (const rf_gj_packet *)pkt;
        /* The engine writes where the packet says: check it all fits before it does (the
         * interval kernel checks the rest of the packet). */
        size_t base = (size_t)p->scratch_at * RF_GJ_ALIGN;
        int ok = p->magic == RF_GJ_MAGIC && p->engine && p->ncomp >= 1 && p->ncomp <= 3 &&
                 p->scratch <= RF_GJ_SCRATCH && base + p->scratch <= scratch_bytes &&
                 (uint64_t)p->off_data + p->data_bytes <= p->bytes;
        for (uint32_t c = 0; ok && c < p->ncomp; c++)
            ok = (uint64_t)p->comp[c].plane + (uint64_t)p->comp[c].bw * 8 * p->comp[c].bh * 8 <=
                 p->scratch;
        if (!ok) {
            e = mark(status, i, &bad_packet_code, cs);
            continue;
        }
        nv_image *im = &s->img[n];
        memset(im, 0, sizeof *im);
        for (uint32_t c = 0; c < p->ncomp; c++) {
            im->channel[c] = scratch + base + p->comp[c].plane;
            im->pitch[c] = p->comp[c].bw * 8;
        }
        s->data[n] = pkt + p->off_data;
        s->len[n] = p->data_bytes;
        s->index[n++] = i;
    }
    /* The engine writes at the call, out of stream order (DESIGN): wait for the stream first. */
    if (n && e == cudaSuccess && (e = cudaEventRecord(s->queued, cs)) == cudaSuccess)
        e = cudaEventSynchronize(s->queued);
    int st = n && e == cudaSuccess ? decode(nj, s, 0, n, cs) : NV_SUCCESS;
    /* Which files did it refuse? One at a time: only a batch with a bad file pays for it. */
    for (uint32_t j = 0; st != NV_SUCCESS && j < n && e == cudaSuccess; j++) {
        int one = decode(nj, s, j, 1, cs);
        if (one != NV_SUCCESS)
            e = mark(status, s->index[j], &engine_code[one > 0 && one < NV_CODES ? one : 0], cs);
    }
    pthread_mutex_unlock(&s->mu);
    if (e != cudaSuccess)
        return rf_cuda_seterr(err, (int)e, "hardware JPEG decode of a batch");
    return 0;
}
