/* jpeg_dest.c — see jpeg_dest.h. */
#include "decode/jpeg_dest.h"

#include <stdlib.h>

#include <jerror.h>

static void dest_init(j_compress_ptr c)
{
    rf_jpeg_dest *d = (rf_jpeg_dest *)c->dest;
    d->pub.next_output_byte = d->buf, d->pub.free_in_buffer = d->cap;
}

static boolean dest_empty(j_compress_ptr c)
{
    rf_jpeg_dest *d = (rf_jpeg_dest *)c->dest;
    size_t used = d->cap; /* libjpeg calls this only when the buffer is full */
    uint8_t *nb = realloc(d->buf, d->cap * 2);
    if (!nb)
        ERREXIT1(c, JERR_OUT_OF_MEMORY, 0);
    d->buf = nb, d->cap *= 2;
    d->pub.next_output_byte = nb + used, d->pub.free_in_buffer = d->cap - used;
    return TRUE;
}

static void dest_term(j_compress_ptr c) { (void)c; }

int rf_jpeg_dest_init(rf_jpeg_dest *d, size_t cap)
{
    d->cap = cap ? cap : 4096;
    if (!(d->buf = malloc(d->cap)))
        return -1;
    d->pub.init_destination = dest_init;
    d->pub.empty_output_buffer = dest_empty;
    d->pub.term_destination = dest_term;
    return 0;
}

size_t rf_jpeg_dest_len(const rf_jpeg_dest *d) { return d->cap - d->pub.free_in_buffer; }
