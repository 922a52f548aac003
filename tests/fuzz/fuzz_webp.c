/* fuzz_webp.c — libFuzzer target for the WebP decoder (src/decode/webp_decode.c, libwebp):
 * fuzz_image.h says what is checked. The RIFF size field (bytes 4..7) is left to the fuzzer;
 * "WEBP" is written at bytes 8..11 and "RIFF" at 0..3. Seeds: tools/test.sh writes lossy and
 * lossless WebPs. */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t riff[12] = {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P'};
    if (size >= 1 + 12) {
        uint8_t in[12];
        memcpy(in, riff, 12);
        memcpy(in + 4, data + 1 + 4, 4); /* keep the input's size field */
        fuzz_image(data, size, in, 12, 0);
    }
    return 0;
}
