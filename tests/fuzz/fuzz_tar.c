/* fuzz_tar.c — libFuzzer target for the tar parser: the input is a (WebDataset) tar archive.
 * It is walked twice: by rf_tar_locate as an in-memory sample span (the decode-thread path;
 * also through rf_tar_locate_fields, asking for extra fields) and by the sequential scanner
 * over a memfd (the create-time path), with a small name limit so the long-name and pax limits
 * are reached too. The JSON label reader (RF_LABEL_JSON) reads the whole input as a label
 * member, and the span's .json member when locate finds one, as the decode threads judge it.
 * Any crash, sanitizer report, hang or out-of-bounds read is a bug; errors returned are
 * expected. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loaders/dataset.h"
#include "loaders/tar.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rf_err e = {0};
    /* the span path: the key is the first member's key, as the loader's index would say */
    char key[64] = "00000000";
    if (size >= 1 && data[0] && data[0] != '.') {
        size_t n = 0;
        while (n < 60 && n < size && data[n])
            n++;
        memcpy(key, data, n);
        key[n] = 0;
        char *dot = strchr(key, '.');
        if (dot)
            *dot = 0;
    }
    uint32_t doff, dlen, dhdr, loff, llen, lhdr;
    if (rf_tar_locate(data, size, key, RF_TAR_IMAGE_EXTS, "json", &doff, &dlen, &dhdr, &loff,
                      &llen, &lhdr, &e) == 0) {
        if ((uint64_t)doff + dlen > size || (uint64_t)loff + llen > size ||
            (loff && lhdr >= loff))
            abort(); /* locate must only return ranges inside the span */
        int32_t label;
        if (loff)
            rf_check_label_as(RF_LABEL_JSON, "annotations.class_id", key, data + loff, llen,
                              lhdr, &label, &e);
    }
    /* the whole input as a JSON label member: the fault's bytes must lie inside it */
    rf_json_result jr;
    int32_t label;
    int fault = rf_json_find_label(data, size, "a.class_id", &label, &jr);
    if (jr.at > size || (fault > RF_JSON_FAULT_MISSING && (jr.end < jr.at || jr.end > size)) ||
        (!fault && label < 0))
        abort();
    /* the same walk finding extra fields (rf_config.fields) with the .json label: the same
     * verdict, and each field inside the span */
    static const char *const exts[] = {"txt", "json", "cls", "jpg"};
    rf_tar_span_member img, lbl, f[4];
    rf_err e2 = {0};
    int frc = rf_tar_locate_fields(data, size, key, RF_TAR_IMAGE_EXTS, "json", exts, 4, &img,
                                   &lbl, f, &e2);
    if ((frc == 0) != (rf_tar_locate(data, size, key, RF_TAR_IMAGE_EXTS, "json", &doff, &dlen,
                                     &dhdr, &loff, &llen, &lhdr, &e) == 0))
        abort();
    for (int i = 0; frc == 0 && i < 4; i++)
        if ((uint64_t)f[i].off + f[i].len > size || (f[i].off && f[i].hdr >= f[i].off))
            abort();
    /* the scanner path, over a memfd */
    int fd = memfd_create("fuzz_tar", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    rf_tar_scanner sc;
    rf_tar_member *m = malloc(sizeof *m);
    if (m && rf_tar_scanner_init(&sc, fd, "fuzz.tar", size, &e) == 0) {
        sc.name_max = 200;
        for (int i = 0; i < 10000; i++) {
            int rc = rf_tar_next(&sc, m, &e);
            if (rc != 1)
                break;
            if (m->data_offset + m->size > size || strlen(m->name) > RF_TAR_NAME_MAX)
                abort();
        }
        rf_tar_scanner_free(&sc);
    }
    free(m);
    close(fd);
    return 0;
}
