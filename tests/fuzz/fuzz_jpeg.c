/* fuzz_jpeg.c — libFuzzer target for the JPEG header path and the decode transform under
 * small limits (max 2048 px per side, 1 M pixels, 20 progressive scans): a header claiming
 * huge dimensions must be refused before any allocation, corrupt data must come back as an
 * error, never a crash, hang or leak. The first input byte picks the transform. The same input
 * then goes through the GPU decode's packer (rf_decode_packet: the walker and plain packets
 * for files without restart markers, restart packets for the others) and every packet it
 * writes through the host driver (rf_gj_decode_host, the kernels' code): neither may read or
 * write outside its buffers. The EXIF orientation reader sees every input first. */
#include <stdint.h>
#include <stdlib.h>

#include "backend/gpujpeg.h"
#include "decode/decode.h"
#include "ringfeed.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static rf_decoder *g_dec;

/* Packets go to a buffer as large as the largest input's packet can be (the fuzzer's inputs
 * are at most 64 KiB, and a packet holds no more data than its file); pixels to the output. */
static uint8_t g_pkt[1u << 20], g_scratch[RF_GJ_SCRATCH], g_out[24 * 24 * 3];

static uint8_t *fuzz_place(void *ctx, size_t bytes, int packet)
{
    (void)ctx;
    return !packet ? g_out : bytes <= sizeof g_pkt ? g_pkt : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_dec) {
        rf_decode_limits lim = {.max_pixels = 1u << 20, .max_dim = 2048, .max_scans = 20};
        g_dec = rf_decoder_create(&lim);
        if (!g_dec)
            abort();
    }
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    data++, size--;
    rf_err e = {0};
    rf_jpeg_info info;
    rf_jpeg_probe(g_dec, data, size, &info, &e);
    if (rf_jpeg_exif_orientation(data, size) > 8) /* ringfeed-inspect's EXIF reader */
        abort();
    /* an odd length takes the padded crops (RANDOM + 2: LETTERBOX, CENTER + 2: CENTER_PAD) */
    rf_transform t = {.crop = (sel & 1 ? RF_CROP_CENTER : RF_CROP_RANDOM) + (size & 1 ? 2u : 0u),
                      /* 8..23 rows, 8..15 columns (bit 2 picks the DCT cap below) */
                      .height = 8u + (sel >> 4), .width = 8u + ((sel >> 3) & 0x7u),
                      .layout = sel & 2 ? RF_LAYOUT_NCHW : RF_LAYOUT_NHWC,
                      .scale_min = 0.08f, .scale_max = 1.0f,
                      .ratio_min = 0.75f, .ratio_max = 4.0f / 3.0f, .flip_prob = 0.5f,
                      .pad = {114, 114, 114}};
    static uint8_t out[24 * 24 * 3];
    rf_decoder_set_max_scale_denom(g_dec, sel & 4 ? 1 : 8);
    rf_decode_transform(g_dec, data, size, &t, sel, out, NULL, &e);
    uint32_t bytes = 0;
    if (rf_decode_packet(g_dec, data, size, &t, NULL, sel, 0, fuzz_place, NULL, &bytes, NULL,
                         &e) == 0 &&
        bytes)
        rf_gj_decode_host(g_pkt, g_scratch, g_out, NULL);
    return 0;
}
