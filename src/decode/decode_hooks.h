/* decode_hooks.h — experiment flags of the CPU decoder, for the decode micro-benchmark
 * (tools/internal/decode_bench.c) and the tests, never set by the library itself.
 *
 * They live apart from decode.h so that the production interface carries only what the
 * pipeline uses: a reader of decode.h sees the decoder the loader runs, and the flags (each of
 * which either skips work the loader needs or moves pixels away from the tested output) are
 * reached only by the files that include this header on purpose. The decoder keeps them in one
 * word it tests where each applies; 0, the value every decoder starts with, is the production
 * path. */
#ifndef RF_DECODE_HOOKS_H
#define RF_DECODE_HOOKS_H

#include <stdint.h>

#include "decode/decode.h"

/* Flags are a bitwise OR of enum rf_decode_flag. */
enum rf_decode_flag {
    /* Decode exactly the rows and columns rf_decode_transform would, but skip the resize (the
     * output is left untouched): decode_bench's "decode only" split. */
    RF_DECODE_NO_RESIZE = 1u << 0,
    /* libjpeg speed knobs for rf_decode_transform (off by default: each moves the output away
     * from the plain decode by more than the accuracy tests allow; see DESIGN in transform.c). */
    RF_DECODE_DCT_IFAST = 1u << 1,   /* JDCT_IFAST instead of JDCT_ISLOW */
    RF_DECODE_NO_FANCY = 1u << 2,    /* do_fancy_upsampling = FALSE (box/merged upsampling) */
    /* Decode the whole file even when its restart markers allow a region (jpeg_restart.h):
     * the A side of region-decode comparisons. Output is identical either way. */
    RF_DECODE_NO_REGION = 1u << 3,
};
void rf_decoder_set_flags(rf_decoder *d, uint32_t flags);

#endif
