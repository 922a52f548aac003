/* fuzz_png.c — libFuzzer target for the PNG decoder (src/decode/png_decode.c, libspng):
 * fuzz_image.h says what is checked. Seeds: tools/test.sh writes PNGs of every colour type. */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    fuzz_image(data, size, sig, sizeof sig, 0);
    return 0;
}
