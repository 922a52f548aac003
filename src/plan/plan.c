/* plan.c — epoch permutation, rank partition, resume cursor (see plan.h for the model).
 *
 * The permutation is a Fisher-Yates shuffle driven by a PRNG seeded from (seed, epoch): a full
 * uniform permutation of all samples, unlike buffer shuffles (DALI, webdataset) that only mix
 * within a window. It is recomputed once per epoch by the dispatcher; 8 bytes per sample. */
#include "plan/plan.h"

#include <stdlib.h>
#include <string.h>

int rf_plan_init(rf_plan *p, uint64_t n, uint64_t seed, uint32_t order, uint32_t batch,
                 uint32_t drop_last, uint32_t remainder, uint32_t rank, uint32_t world,
                 rf_err *err)
{
    memset(p, 0, sizeof *p);
    if (n == 0)
        return rf_seterr(err, RF_EINVAL, "the dataset has no samples");
    if (batch == 0 || world == 0 || rank >= world)
        return rf_seterr(err, RF_EINVAL, "invalid batch_size %u, rank %u or world_size %u", batch,
                         rank, world);
    if (order > RF_ORDER_SHARD || remainder > RF_REMAINDER_DROP)
        return rf_seterr(err, RF_EINVAL, "invalid order %u or remainder %u", order, remainder);
    p->n = n;
    p->samples = n;
    p->seed = seed;
    p->order = order;
    p->batch = batch;
    p->drop_last = drop_last;
    p->remainder = remainder;
    p->rank = rank;
    p->world = world;
    if (order != RF_ORDER_NONE) {
        p->perm = malloc(n * sizeof *p->perm);
        if (!p->perm)
            return rf_seterr(err, RF_ENOMEM, "no memory for a %llu-sample permutation",
                             (unsigned long long)n);
    }
    uint64_t per, batches;
    rf_plan_shape(p, 0, &per, &batches);
    if (batches == 0) {
        rf_plan_free(p);
        return rf_seterr(err, RF_EINVAL,
                         "an epoch has no batch on this rank: %llu samples over %u ranks with "
                         "batch_size %u%s",
                         (unsigned long long)n, world, batch, drop_last ? " and drop_last" : "");
    }
    return 0;
}

void rf_plan_free(rf_plan *p)
{
    free(p->perm);
    free(p->shard_start);
    free(p->shard_perm);
    rf_mix_free(p->mix);
    if (p->bk)
        rf_bucket_plan_free(p->bk);
    free(p->bk);
    p->bk = NULL;
    p->mix = NULL;
    p->perm = NULL;
    p->shard_start = NULL;
    p->shard_perm = NULL;
}

int rf_plan_set_mix(rf_plan *p, const rf_plan_mix_spec *spec, rf_err *err)
{
    if (spec->nsources == 0 || spec->source_start[0] != 0 ||
        spec->source_start[spec->nsources] != p->samples)
        return rf_seterr(err, RF_EINVAL, "the sources do not cover the dataset");
    if (p->order == RF_ORDER_SHARD)
        return rf_seterr(err, RF_EINVAL, "order shard reads whole shards in turn and cannot "
                         "draw by weights, epoch_size or replacement: use order global or none");
    if (spec->sample_weights && !spec->replacement)
        return rf_seterr(err, RF_EINVAL, "sample_weights and class_weights draw with "
                         "replacement: replacement off cannot honour them");
    uint64_t e = spec->epoch_size ? spec->epoch_size : p->samples;
    if (e > SIZE_MAX / sizeof *p->perm)
        return rf_seterr(err, RF_EINVAL, "epoch_size %llu is more positions than memory can "
                         "hold", (unsigned long long)e);
    rf_mix_free(p->mix);
    p->mix = NULL;
    int rc = rf_mix_create(spec, p->samples, e, &p->mix, err);
    if (rc)
        return rc;
    uint64_t *perm = realloc(p->perm, e * sizeof *perm);
    if (!perm)
        return rf_seterr(err, RF_ENOMEM, "no memory for an epoch of %llu positions",
                         (unsigned long long)e);
    p->perm = perm;
    p->n = e;
    uint64_t per, batches;
    rf_plan_shape(p, 0, &per, &batches);
    if (batches == 0)
        return rf_seterr(err, RF_EINVAL, "an epoch has no batch on this rank: epoch_size %llu "
                         "over %u ranks with batch_size %u%s", (unsigned long long)e, p->world,
                         p->batch, p->drop_last ? " and drop_last" : "");
    return 0;
}

uint64_t rf_plan_source_positions(const rf_plan *p, uint32_t s)
{
    return p->mix ? rf_mix_positions(p->mix, s) : 0;
}

uint64_t rf_plan_mix_fingerprint(const rf_plan *p)
{
    uint64_t h = p->mix ? rf_mix_fingerprint(p->mix) : 0;
    return p->bk ? rf_mix64(h ^ rf_bucket_plan_fingerprint(p->bk)) | 1 : h;
}

int rf_plan_set_buckets(rf_plan *p, uint16_t *of, uint32_t nbuckets, rf_err *err)
{
    if (p->mix) {
        free(of);
        return rf_seterr(err, RF_EINVAL, "size_buckets with mixing (weights, epoch_size, "
                         "replacement, class or sample weights): not supported; unset one");
    }
    uint64_t group = (uint64_t)p->batch * p->world;
    if (group > UINT32_MAX) {
        free(of);
        return rf_seterr(err, RF_EINVAL, "size_buckets: batch_size x world_size is over 2^32");
    }
    p->bk = calloc(1, sizeof *p->bk);
    if (!p->bk) {
        free(of);
        return rf_seterr(err, RF_ENOMEM, "no memory");
    }
    int rc = rf_bucket_plan_init(p->bk, of, p->samples, nbuckets, (uint32_t)group, p->world,
                                 p->drop_last, p->remainder == RF_REMAINDER_PAD, err);
    if (rc) {
        free(p->bk);
        p->bk = NULL;
        return rc;
    }
    if (p->bk->ngroups == 0)
        return rf_seterr(err, RF_EINVAL, "size_buckets: an epoch has no batch: no bucket "
                         "holds batch_size x world_size = %llu samples%s",
                         (unsigned long long)group,
                         p->drop_last ? " and drop_last drops the rest" : "");
    return 0;
}

/* The group an epoch starting at arranged entry `base` starts with: the one starting there
 * (rf_plan_base_check made sure of it), else the first after it. */
static uint64_t group_at(const rf_bucket_plan *bk, uint64_t base)
{
    uint64_t lo = 0, hi = bk->ngroups;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (bk->gstart[mid] < base)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int rf_plan_base_check(const rf_plan *p, uint64_t base, rf_err *err)
{
    if (!p->bk)
        return base > p->n ? rf_seterr(err, RF_ERESUME, "resume state: consumed %llu > %llu "
                                       "order positions per epoch", (unsigned long long)base,
                                       (unsigned long long)p->n)
                           : 0;
    uint64_t g = group_at(p->bk, base);
    if (p->bk->gstart[g] != base)
        return rf_seterr(err, RF_ERESUME, "resume state: consumed %llu is not where a batch of "
                         "size buckets starts with batch_size %u and world_size %u (groups of "
                         "%llu); resume with the batch_size and world_size that saved it",
                         (unsigned long long)base, p->batch, p->world,
                         (unsigned long long)p->batch * p->world);
    return 0;
}

uint64_t rf_plan_first(const rf_plan *p, uint64_t k)
{
    if (p->bk)
        return (p->bk->gstart[p->g0 + k] - p->bk->gstart[p->g0]) / p->world;
    return k * p->batch;
}

uint32_t rf_plan_batch_bucket(const rf_plan *p, uint64_t k)
{
    return p->bk ? p->bk->gbucket[p->g0 + k] : 0;
}

uint64_t rf_plan_batch_index(const rf_plan *p, uint64_t k)
{
    /* after a resume the plan starts at the cursor: its whole batches come first */
    return p->bk ? p->g0 + k : p->base / ((uint64_t)p->batch * p->world) + k;
}

uint64_t rf_plan_cursor(const rf_plan *p, uint64_t base, uint64_t k)
{
    if (p->bk)
        return p->bk->gstart[RF_MIN(group_at(p->bk, base) + k, p->bk->ngroups)];
    return RF_MIN(p->n, base + k * p->batch * p->world);
}

int rf_plan_set_shards(rf_plan *p, const uint64_t *starts, uint32_t nshards, uint32_t window,
                       rf_err *err)
{
    if (nshards == 0 || starts[0] != 0 || starts[nshards] != p->n)
        return rf_seterr(err, RF_EINVAL, "shard boundaries do not cover the dataset");
    free(p->shard_start);
    free(p->shard_perm);
    p->shard_start = malloc((nshards + 1) * sizeof *p->shard_start);
    p->shard_perm = malloc(nshards * sizeof *p->shard_perm);
    if (!p->shard_start || !p->shard_perm)
        return rf_seterr(err, RF_ENOMEM, "no memory for shard order");
    memcpy(p->shard_start, starts, (nshards + 1) * sizeof *starts);
    p->nshards = nshards;
    p->window = window ? window : 4;
    return 0;
}

static void shuffle(rf_rng *r, uint64_t *a, uint64_t n)
{
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rf_rng_below(r, i);
        uint64_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

/* Shard order permuted; then each window of `window` consecutive shards of that order is one
 * block whose samples are permuted among themselves. Still a permutation of all samples, so
 * rank partition and resume work unchanged. */
static void shard_order(rf_plan *p, rf_rng *r)
{
    for (uint32_t i = 0; i < p->nshards; i++)
        p->shard_perm[i] = i;
    for (uint32_t i = p->nshards; i > 1; i--) {
        uint32_t j = (uint32_t)rf_rng_below(r, i);
        uint32_t t = p->shard_perm[i - 1];
        p->shard_perm[i - 1] = p->shard_perm[j];
        p->shard_perm[j] = t;
    }
    uint64_t pos = 0;
    for (uint32_t w = 0; w < p->nshards; w += p->window) {
        uint64_t block = pos;
        for (uint32_t k = w; k < p->nshards && k < w + p->window; k++) {
            uint32_t sh = p->shard_perm[k];
            for (uint64_t id = p->shard_start[sh]; id < p->shard_start[sh + 1]; id++)
                p->perm[pos++] = id;
        }
        shuffle(r, p->perm + block, pos - block);
    }
}

void rf_plan_shape(const rf_plan *p, uint64_t base, uint64_t *per_rank, uint64_t *batches)
{
    if (p->bk) { /* every group is a multiple of world */
        uint64_t g = group_at(p->bk, base);
        *per_rank = (p->bk->gstart[p->bk->ngroups] - p->bk->gstart[g]) / p->world;
        *batches = p->bk->ngroups - g;
        return;
    }
    uint64_t left = base < p->n ? p->n - base : 0;
    uint64_t per = p->remainder == RF_REMAINDER_PAD ? (left + p->world - 1) / p->world
                                                    : left / p->world;
    *per_rank = per;
    *batches = p->drop_last ? per / p->batch : (per + p->batch - 1) / p->batch;
}

/* The buckets' arrangement of the epoch's order, and this rank's real samples in it. */
static void plan_buckets(rf_plan *p)
{
    rf_bucket_plan *bk = p->bk;
    rf_bucket_plan_epoch(bk, p->perm, p->batch * p->world);
    p->g0 = group_at(bk, p->base);
    p->real = 0;
    for (uint64_t a = bk->gstart[p->g0] + p->rank; a < bk->gstart[bk->ngroups]; a += p->world)
        p->real += !(bk->arr[a] & RF_BUCKET_PAD);
}

static void plan_order(rf_plan *p, uint64_t epoch)
{
    if (!p->perm)
        return;
    rf_rng r;
    rf_rng_seed(&r, rf_mix64(p->seed) ^ rf_mix64(epoch + 0x5851f42d4c957f2dull));
    if (p->mix) {
        rf_mix_epoch(p->mix, p->perm, p->n, p->seed, epoch, p->order != RF_ORDER_NONE, &r);
        return;
    }
    if (p->order == RF_ORDER_SHARD && p->shard_start) {
        shard_order(p, &r);
        return;
    }
    for (uint64_t i = 0; i < p->n; i++)
        p->perm[i] = i;
    shuffle(&r, p->perm, p->n);
}

void rf_plan_epoch(rf_plan *p, uint64_t epoch, uint64_t base)
{
    p->epoch = epoch;
    p->base = base;
    rf_plan_shape(p, base, &p->per_rank, &p->batches);
    plan_order(p, epoch);
    if (p->bk)
        plan_buckets(p);
}

void rf_plan_sample(const rf_plan *p, uint64_t j, uint64_t *sample_id, uint64_t *position,
                    uint8_t *is_padding)
{
    if (p->bk) {
        /* every group is a multiple of world: the rank's j-th sample of the epoch is its
         * entry rank + j * world from the first group on, whichever batch holds it */
        uint64_t a = p->bk->gstart[p->g0] + p->rank + j * p->world;
        uint64_t e = p->bk->arr[a];
        *position = e & ~RF_BUCKET_PAD;
        *sample_id = p->perm ? p->perm[*position] : *position;
        *is_padding = (e & RF_BUCKET_PAD) != 0;
        return;
    }
    uint64_t pos = p->base + p->rank + j * p->world;
    uint8_t pad = 0;
    if (pos >= p->n) {
        /* Padding repeats samples from the start of the epoch order, like PyTorch's
         * DistributedSampler, so every rank has the same number of batches. */
        pos = (pos - p->n) % p->n;
        pad = 1;
    }
    *position = pos;
    *sample_id = p->perm ? p->perm[pos] : pos;
    *is_padding = pad;
}

uint32_t rf_plan_batch_count(const rf_plan *p, uint64_t k)
{
    if (p->bk) {
        const uint64_t *g = p->bk->gstart + p->g0 + k;
        return (uint32_t)((g[1] - g[0]) / p->world);
    }
    uint64_t start = k * p->batch;
    uint64_t left = p->per_rank > start ? p->per_rank - start : 0;
    return (uint32_t)RF_MIN(left, (uint64_t)p->batch);
}

uint64_t rf_plan_sample_seed(const rf_plan *p, uint64_t epoch, uint64_t sample_id)
{
    return rf_mix64(rf_mix64(p->seed ^ 0xa0761d6478bd642full) ^ rf_mix64(epoch) ^
                    (sample_id * 0xe7037ed1a0b428dbull));
}

uint64_t rf_plan_aug_seed(const rf_plan *p, uint64_t epoch, uint64_t sample_id,
                          uint64_t position)
{
    uint64_t s = rf_plan_sample_seed(p, epoch, sample_id);
    return p->mix ? rf_mix64(s ^ rf_mix64(position + 0x9fb21c651e98df25ull)) : s;
}

uint32_t rf_plan_gpu_percentile(uint64_t aug_seed)
{
    return (uint32_t)(rf_mix64(aug_seed ^ 0x6a09e667f3bcc909ull) % 100);
}

uint64_t rf_plan_hook_seed(uint64_t aug_seed)
{
    return rf_mix64(aug_seed ^ 0xbb67ae8584caa73bull);
}

static void put64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t *b)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}
static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get32(const uint8_t *b) { return (uint32_t)(b[0] | b[1] << 8 | b[2] << 16 | (uint32_t)b[3] << 24); }

/* FNV-1a over the blob body: catches truncation and bit rot in a saved checkpoint. */
static uint64_t fnv1a(const uint8_t *b, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint32_t rf_state_bytes(const rf_resume *r)
{
    return r->mix ? RF_STATE_BYTES_MIX : RF_STATE_BYTES;
}

/* Layout: magic u32, version u32, seed, epoch, consumed, n (u64 each), world, rank, order,
 * batch (u32 each), then version 2's mixing fingerprint u64 at 56, and the checksum u64 of
 * everything before it (at 56, or at 64 in version 2). */
void rf_state_encode(const rf_resume *r, uint8_t out[RF_STATE_BYTES_MAX])
{
    uint32_t len = rf_state_bytes(r);
    memset(out, 0, len);
    put32(out + 0, RF_STATE_MAGIC);
    put32(out + 4, r->mix ? RF_STATE_VERSION_MIX : RF_STATE_VERSION);
    put64(out + 8, r->seed);
    put64(out + 16, r->epoch);
    put64(out + 24, r->consumed);
    put64(out + 32, r->n);
    put32(out + 40, r->world);
    put32(out + 44, r->rank);
    put32(out + 48, r->order);
    put32(out + 52, r->batch);
    if (r->mix)
        put64(out + 56, r->mix);
    put64(out + len - 8, fnv1a(out, len - 8));
}

int rf_state_decode(const void *buf, uint64_t len, rf_resume *r, rf_err *err)
{
    const uint8_t *b = buf;
    if (!buf || (len != RF_STATE_BYTES && len != RF_STATE_BYTES_MIX))
        return rf_seterr(err, RF_ERESUME, "resume state has %llu bytes, expected %u or %u",
                         (unsigned long long)len, RF_STATE_BYTES, RF_STATE_BYTES_MIX);
    if (get32(b) != RF_STATE_MAGIC)
        return rf_seterr(err, RF_ERESUME, "resume state: bad magic");
    uint32_t version = len == RF_STATE_BYTES ? RF_STATE_VERSION : RF_STATE_VERSION_MIX;
    if (get32(b + 4) != version)
        return rf_seterr(err, RF_ERESUME, "resume state version %u in %llu bytes, this build "
                         "reads %u in %u and %u in %u", get32(b + 4), (unsigned long long)len,
                         RF_STATE_VERSION, RF_STATE_BYTES, RF_STATE_VERSION_MIX,
                         RF_STATE_BYTES_MIX);
    if (get64(b + len - 8) != fnv1a(b, len - 8))
        return rf_seterr(err, RF_ERESUME, "resume state: checksum mismatch (corrupt blob)");
    r->mix = len == RF_STATE_BYTES_MIX ? get64(b + 56) : 0;
    r->seed = get64(b + 8);
    r->epoch = get64(b + 16);
    r->consumed = get64(b + 24);
    r->n = get64(b + 32);
    r->world = get32(b + 40);
    r->rank = get32(b + 44);
    r->order = get32(b + 48);
    r->batch = get32(b + 52);
    return 0;
}
