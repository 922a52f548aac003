/* fields.h — extra fields (rf_config.fields, fields.c): the loader's copy of the list, split
 * into names, and the row offsets every slot shares (row i at i x max_field_bytes); a slot's
 * rows are its pl_field_slot (slot.h). Written at create, read by the decode threads and the
 * consumer. */
#ifndef RF_PL_FIELDS_H
#define RF_PL_FIELDS_H

#include <stdint.h>

#include "loaders/tar.h"
#include "pipeline/slot.h"
#include "pipeline/state.h"

struct pl_ring;

typedef struct pl_fields {
    uint32_t n;
    const char *names[RF_FIELDS_MAX]; /* into list */
    char *given, *list;               /* the list as given (reported), and split in place */
    uint64_t *offsets;                /* batch entries */
    uint32_t max_bytes, batch;        /* max_field_bytes; rows per field */
} pl_fields;

/* create: the list `given` (NULL: none) checked and copied, for a `source` (enum rf_source)
 * with max_bytes per member. */
int pl_fields_setup(pl_fields *fs, const char *given, uint32_t source, uint32_t max_bytes,
                    rf_err *err);
/* create, the ring allocated: each slot's rows. */
int pl_fields_alloc(pl_fields *fs, struct pl_ring *r, const pl_core *core, rf_err *err);
void pl_fields_free(pl_fields *fs, struct pl_ring *r);
void pl_fields_empty(const pl_fields *fs, slot *s, uint32_t index);
/* Row `index` of slot s as the sample hook's view shows it: field f's bytes and length in
 * data[f] and len[f] (RF_FIELDS_MAX entries each); returns the number of fields. */
uint32_t pl_fields_row(const pl_fields *fs, const slot *s, uint32_t index,
                       const uint8_t *data[], uint32_t len[]);
int pl_fields_copy(const pl_fields *fs, slot *s, uint32_t index, const char *key,
                   const rf_sample *sm, const uint8_t *span, const rf_tar_span_member *found,
                   int *why, rf_err *e);
void pl_fields_batch(const pl_fields *fs, const slot *s, rf_batch *b);

#endif
