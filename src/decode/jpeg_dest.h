/* jpeg_dest.h — a libjpeg destination that grows one malloc'ed buffer.
 *
 * Unlike jpeg_mem_dest's, the buffer in rf_jpeg_dest is always the live one, so the caller frees
 * d->buf on success and after a longjmp out of a libjpeg error alike. */
#ifndef RF_JPEG_DEST_H
#define RF_JPEG_DEST_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* jpeglib.h needs FILE */

#include <jpeglib.h>

typedef struct rf_jpeg_dest {
    struct jpeg_destination_mgr pub; /* first: libjpeg sees only this; point cinfo->dest here */
    uint8_t *buf;
    size_t cap;
} rf_jpeg_dest;

/* Allocate cap bytes (doubled whenever full) and set the callbacks. Returns 0, or -1 when the
 * first allocation fails; a later one fails the compression with JERR_OUT_OF_MEMORY. */
int rf_jpeg_dest_init(rf_jpeg_dest *d, size_t cap);

/* Bytes written so far. */
size_t rf_jpeg_dest_len(const rf_jpeg_dest *d);

#endif
