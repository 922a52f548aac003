/* fields.c — extra fields (rf_config.fields): the list checked and copied at create, each
 * slot's field buffers sized from max_field_bytes, a sample's members copied into its row on
 * its decode thread, and the rf_field table a batch points at.
 *
 * DESIGN
 * The members come out of the span already read for the image: decode_pool.c's walk of the
 * span (rf_tar_locate_fields) finds them with the image and label, and pl_fields_copy copies
 * them, so a field costs no read. Each slot holds, per field, batch_size rows of
 * max_field_bytes (allocated at create, never per sample), so a decode thread writes only its
 * own sample's row, as it does for pixels: the rows reach the consumer through the slot's
 * pending countdown like the rest of the sample (pipeline.h MEMORY ORDERING). Row i of every
 * field starts at i x max_field_bytes, so one offsets table serves every slot and field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/pipeline.h"

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

int pl_fields_setup(rf_loader *ld, rf_err *err)
{
    pl_fields *fs = &ld->fields;
    const char *given = ld->cfg.fields;
    ld->cfg.fields = NULL; /* until the loader's copy exists: destroy must not free the caller's */
    if (!given)
        return 0;
    if (ld->cfg.source != RF_SOURCE_TAR)
        return rf_seterr(err, RF_EINVAL, "fields \"%.200s\": only tar shards have members to "
                         "deliver; a %s source has none", given,
                         ld->cfg.source == RF_SOURCE_FOLDER ? "folder" : "token");
    size_t len = strnlen(given, (size_t)RF_FIELDS_MAX * (RF_FIELD_NAME_MAX + 1));
    if (len == (size_t)RF_FIELDS_MAX * (RF_FIELD_NAME_MAX + 1))
        return rf_seterr(err, RF_EINVAL, "fields: the list is longer than %d entries of %d "
                         "bytes", RF_FIELDS_MAX, RF_FIELD_NAME_MAX);
    fs->given = strdup(given);
    fs->list = strdup(given);
    if (!fs->given || !fs->list)
        return rf_seterr(err, RF_ENOMEM, "no memory for the fields list");
    ld->cfg.fields = fs->given; /* rf_loader_config reports the loader's copy */
    return split_list(fs, err);
}

/* Each slot's buffers: data (fields x batch rows of max_field_bytes), lengths and the rf_field
 * table; and the offsets every slot shares. */
int pl_fields_alloc(rf_loader *ld, rf_err *err)
{
    pl_fields *fs = &ld->fields;
    if (!fs->n)
        return 0;
    uint64_t rows = (uint64_t)fs->n * ld->batch, data = rows * ld->cfg.max_field_bytes;
    uint64_t per = data + rows * sizeof(uint32_t) + fs->n * sizeof(rf_field);
    if (data > SIZE_MAX / 2 || per * ld->depth > SIZE_MAX / 2 ||
        pl_alloc_refused(ld, "field buffers", (size_t)(per * ld->depth)) ||
        !(fs->offsets = calloc(ld->batch, sizeof *fs->offsets)))
        return rf_seterr(err, RF_ENOMEM, "cannot allocate %llu bytes of field buffers "
                         "(prefetch_depth %u x batch %u x %u fields x max_field_bytes %u): out "
                         "of memory", (unsigned long long)(per * ld->depth), ld->depth,
                         ld->batch, fs->n, ld->cfg.max_field_bytes);
    for (uint32_t i = 0; i < ld->batch; i++)
        fs->offsets[i] = (uint64_t)i * ld->cfg.max_field_bytes;
    for (uint32_t i = 0; i < ld->depth; i++) {
        pl_field_slot *fsl = &ld->slots[i].fields;
        fsl->data = malloc((size_t)data);
        fsl->lengths = calloc((size_t)rows, sizeof *fsl->lengths);
        fsl->tab = calloc(fs->n, sizeof *fsl->tab);
        if (!fsl->data || !fsl->lengths || !fsl->tab)
            return rf_seterr(err, RF_ENOMEM, "cannot allocate %llu bytes of field buffers for "
                             "slot %u (batch %u x %u fields x max_field_bytes %u): out of memory",
                             (unsigned long long)per, i, ld->batch, fs->n,
                             ld->cfg.max_field_bytes);
        for (uint32_t f = 0; f < fs->n; f++)
            fsl->tab[f] = (rf_field){.name = fs->names[f],
                                     .data = fsl->data + (uint64_t)f * ld->batch *
                                                             ld->cfg.max_field_bytes,
                                     .offsets = fs->offsets,
                                     .lengths = fsl->lengths + (uint64_t)f * ld->batch};
    }
    return 0;
}

void pl_fields_free(rf_loader *ld)
{
    for (uint32_t i = 0; ld->slots && i < ld->depth; i++) {
        free(ld->slots[i].fields.data);
        free(ld->slots[i].fields.lengths);
        free(ld->slots[i].fields.tab);
    }
    free(ld->fields.offsets);
    free(ld->fields.list);
    free(ld->fields.given);
}

/* Row `index` of every field empty: a padding or blank sample. */
void pl_fields_empty(const rf_loader *ld, slot *s, uint32_t index)
{
    for (uint32_t f = 0; f < ld->fields.n; f++)
        s->fields.lengths[(uint64_t)f * ld->batch + index] = 0;
}

/* Copy the members `found` (what rf_tar_locate_fields found in sample sm's span, one per
 * field) into row `index` of slot s. A missing member is RF_EFORMAT (*why RF_SKIP_FIELD), one
 * over max_field_bytes RF_ELIMIT (*why RF_SKIP_TOO_LARGE), each naming the sample or member and
 * its offset in the shard (the caller adds the shard). */
int pl_fields_copy(const rf_loader *ld, slot *s, uint32_t index, const rf_sample *sm,
                   const uint8_t *span, const rf_tar_span_member *found, int *why, rf_err *e)
{
    const char *key = ld->ds.keys + sm->key;
    for (uint32_t f = 0; f < ld->fields.n; f++) {
        const char *ext = ld->fields.names[f];
        if (!found[f].off) {
            *why = RF_SKIP_FIELD;
            return rf_seterr(e, RF_EFORMAT, "sample %s at offset %llu has no member %s.%s "
                             "(rf_config.fields asks for \"%s\")", key,
                             (unsigned long long)sm->offset, key, ext, ext);
        }
        if (found[f].len > ld->cfg.max_field_bytes) {
            *why = RF_SKIP_TOO_LARGE;
            return rf_seterr(e, RF_ELIMIT, "member %s.%s at offset %llu: %u bytes exceed "
                             "max_field_bytes %u", key, ext,
                             (unsigned long long)(sm->offset + found[f].hdr), found[f].len,
                             ld->cfg.max_field_bytes);
        }
        uint64_t row = (uint64_t)f * ld->batch + index;
        memcpy(s->fields.data + row * ld->cfg.max_field_bytes, span + found[f].off, found[f].len);
        s->fields.lengths[row] = found[f].len;
    }
    return 0;
}

void pl_fields_batch(const rf_loader *ld, const slot *s, rf_batch *b)
{
    b->nfields = ld->fields.n;
    b->fields = ld->fields.n ? s->fields.tab : NULL;
}
