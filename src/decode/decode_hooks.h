/* decode_hooks.h — experiment flags of the CPU decoder, for tools/internal/decode_bench.c and
 * the tests, never set by the library itself.
 *
 * Apart from decode.h so that a reader of decode.h sees only the decoder the loader runs: each
 * flag skips work the loader needs or moves pixels off the tested output. 0 is production. */
#ifndef RF_DECODE_HOOKS_H
#define RF_DECODE_HOOKS_H

#include <stdint.h>

#include "decode/decode.h"

/* Flags are a bitwise OR of enum rf_decode_flag. */
enum rf_decode_flag {
    /* Decode exactly the rows and columns rf_decode_transform would, but skip the resize (the
     * output is left untouched): decode_bench's "decode only" split. */
    RF_DECODE_NO_RESIZE = 1u << 0,
    /* libjpeg speed knobs, off: each moves the output further from the plain decode than the
     * accuracy tests allow (transform.c's DESIGN). */
    RF_DECODE_DCT_IFAST = 1u << 1,   /* JDCT_IFAST instead of JDCT_ISLOW */
    RF_DECODE_NO_FANCY = 1u << 2,    /* do_fancy_upsampling = FALSE (box/merged upsampling) */
    /* Decode the whole file even when a region would do: the A side of region comparisons. */
    RF_DECODE_NO_REGION = 1u << 3,
};
void rf_decoder_set_flags(rf_decoder *d, uint32_t flags);

#endif
