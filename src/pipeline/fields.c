/* fields.c — extra fields (fields.h). The members come out of the span already read for the
 * image (rf_tar_locate_fields), so a field costs no read. Rows are allocated at create and a
 * decode thread writes only its own sample's, published like its pixels by the slot's pending
 * countdown. */
#include "pipeline/fields.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loaders/tar.h"
#include "pipeline/ring.h"

/* One entry of the list: 1..RF_FIELD_NAME_MAX printable ASCII bytes, no space (the index
 * and member names the tools write hold none) and no '/' (a member's extension never holds
 * one); ',' separates entries. */
static int entry_ok(const char *p, size_t n)
{
    if (n == 0 || n > RF_FIELD_NAME_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!rf_tar_name_byte_ok((unsigned char)p[i]) || p[i] == '/' || (unsigned char)p[i] > 0x7e)
            return 0;
    return 1;
}

/* Split the loader's copy of the list in place into names[]; refuse what create must not take. */
static int split_list(pl_fields *fs, rf_err *err)
{
    char *p = fs->list;
    for (;;) {
        char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (!entry_ok(p, n))
            return rf_seterr(err, RF_EINVAL, "fields \"%.200s\": entry %u is not 1..%d printable "
                             "ASCII bytes without space or '/'", fs->given, fs->n + 1,
                             RF_FIELD_NAME_MAX);
        if (fs->n == RF_FIELDS_MAX)
            return rf_seterr(err, RF_EINVAL, "fields \"%.200s\": more than %d entries", fs->given,
                             RF_FIELDS_MAX);
        p[n] = 0;
        for (uint32_t f = 0; f < fs->n; f++)
            if (strcmp(fs->names[f], p) == 0)
                return rf_seterr(err, RF_EINVAL, "fields \"%.200s\": \"%s\" is listed twice",
                                 fs->given, p);
        fs->names[fs->n++] = p;
        if (!c)
            return 0;
        p = c + 1;
    }
}

int pl_fields_setup(pl_fields *fs, const char *given, uint32_t source, uint32_t max_bytes,
                    rf_err *err)
{
    fs->max_bytes = max_bytes;
    if (!given)
        return 0;
    if (source != RF_SOURCE_TAR)
        return rf_seterr(err, RF_EINVAL, "fields \"%.200s\": only tar shards have members to "
                         "deliver; a %s source has none", given,
                         source == RF_SOURCE_FOLDER ? "folder" : "token");
    size_t len = strnlen(given, (size_t)RF_FIELDS_MAX * (RF_FIELD_NAME_MAX + 1));
    if (len == (size_t)RF_FIELDS_MAX * (RF_FIELD_NAME_MAX + 1))
        return rf_seterr(err, RF_EINVAL, "fields: the list is longer than %d entries of %d "
                         "bytes", RF_FIELDS_MAX, RF_FIELD_NAME_MAX);
    fs->given = strdup(given);
    fs->list = strdup(given);
    if (!fs->given || !fs->list)
        return rf_seterr(err, RF_ENOMEM, "no memory for the fields list");
    return split_list(fs, err);
}

/* Each slot's buffers: data (fields x batch rows of max_field_bytes), lengths and the rf_field
 * table; and the offsets every slot shares. */
int pl_fields_alloc(pl_fields *fs, pl_ring *r, const pl_core *core, rf_err *err)
{
    fs->batch = r->batch;
    if (!fs->n)
        return 0;
    uint32_t B = r->batch, depth = r->depth, max = fs->max_bytes;
    uint64_t rows = (uint64_t)fs->n * B, data = rows * max;
    uint64_t per = data + rows * sizeof(uint32_t) + fs->n * sizeof(rf_field);
    if (data > SIZE_MAX / 2 || per * depth > SIZE_MAX / 2 ||
        pl_alloc_refused(core, "field buffers", (size_t)(per * depth)) ||
        !(fs->offsets = calloc(B, sizeof *fs->offsets)))
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %llu bytes of field buffers "
                         "(prefetch_depth %u x batch %u x %u fields x max_field_bytes %u): out "
                         "of memory", (unsigned long long)(per * depth), depth, B, fs->n, max);
    for (uint32_t i = 0; i < B; i++)
        fs->offsets[i] = (uint64_t)i * max;
    for (uint32_t i = 0; i < depth; i++) {
        pl_field_slot *fsl = &r->slots[i].fields;
        fsl->data = malloc((size_t)data);
        fsl->lengths = calloc((size_t)rows, sizeof *fsl->lengths);
        fsl->tab = calloc(fs->n, sizeof *fsl->tab);
        if (!fsl->data || !fsl->lengths || !fsl->tab)
            return rf_seterr(err, RF_ENOMEM, "cannot allocate %llu bytes of field buffers for "
                             "slot %u (batch %u x %u fields x max_field_bytes %u): out of memory",
                             (unsigned long long)per, i, B, fs->n, max);
        for (uint32_t f = 0; f < fs->n; f++)
            fsl->tab[f] = (rf_field){.name = fs->names[f],
                                     .data = fsl->data + (uint64_t)f * B * max,
                                     .offsets = fs->offsets,
                                     .lengths = fsl->lengths + (uint64_t)f * B};
    }
    return 0;
}

void pl_fields_free(pl_fields *fs, pl_ring *r)
{
    for (uint32_t i = 0; r->slots && i < r->depth; i++) {
        free(r->slots[i].fields.data);
        free(r->slots[i].fields.lengths);
        free(r->slots[i].fields.tab);
    }
    free(fs->offsets);
    free(fs->list);
    free(fs->given);
}

/* Row `index` of every field empty: a padding or blank sample. */
void pl_fields_empty(const pl_fields *fs, slot *s, uint32_t index)
{
    for (uint32_t f = 0; f < fs->n; f++)
        s->fields.lengths[(uint64_t)f * fs->batch + index] = 0;
}

uint32_t pl_fields_row(const pl_fields *fs, const slot *s, uint32_t index,
                       const uint8_t *data[], uint32_t len[])
{
    for (uint32_t f = 0; f < fs->n; f++) {
        uint64_t row = (uint64_t)f * fs->batch + index;
        data[f] = s->fields.data + row * fs->max_bytes;
        len[f] = s->fields.lengths[row];
    }
    return fs->n;
}

/* Copy the members `found` (what rf_tar_locate_fields found in sample sm's span, one per
 * field) into row `index` of slot s. A missing member is RF_EFORMAT (*why RF_SKIP_FIELD), one
 * over max_field_bytes RF_ELIMIT (*why RF_SKIP_TOO_LARGE), each naming the sample (key) or
 * member and its offset in the shard (the caller adds the shard). */
int pl_fields_copy(const pl_fields *fs, slot *s, uint32_t index, const char *key,
                   const rf_sample *sm, const uint8_t *span, const rf_tar_span_member *found,
                   int *why, rf_err *e)
{
    for (uint32_t f = 0; f < fs->n; f++) {
        const char *ext = fs->names[f];
        if (!found[f].off) {
            *why = RF_SKIP_FIELD;
            return rf_seterr(e, RF_EFORMAT, "sample %s at offset %llu has no member %s.%s "
                             "(rf_config.fields asks for \"%s\")", key,
                             (unsigned long long)sm->offset, key, ext, ext);
        }
        if (found[f].len > fs->max_bytes) {
            *why = RF_SKIP_TOO_LARGE;
            return rf_seterr(e, RF_ELIMIT, "member %s.%s at offset %llu: %u bytes exceed "
                             "max_field_bytes %u", key, ext,
                             (unsigned long long)(sm->offset + found[f].hdr), found[f].len,
                             fs->max_bytes);
        }
        uint64_t row = (uint64_t)f * fs->batch + index;
        memcpy(s->fields.data + row * fs->max_bytes, span + found[f].off, found[f].len);
        s->fields.lengths[row] = found[f].len;
    }
    return 0;
}

void pl_fields_batch(const pl_fields *fs, const slot *s, rf_batch *b)
{
    b->nfields = fs->n;
    b->fields = fs->n ? s->fields.tab : NULL;
}
