/* A program as a user writes it against an installed ringfeed (ctest "install" builds it with
 * find_package and with pkg-config, shared and static): one epoch over the shards given, on the
 * host backend, and the number of samples delivered checked against the count expected.
 * usage: consumer SHARD_PATTERN EXPECTED_SAMPLES; prints "ringfeed VERSION: N samples". */
#include <ringfeed.h>
#include <ringfeed_shards.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SHARD_PATTERN EXPECTED_SAMPLES\n", argv[0]);
        return 2;
    }
    const char *shards[] = {argv[1]};
    rf_config cfg;
    rf_config_init(&cfg);
    cfg.shards = shards;
    cfg.shard_count = 1;
    cfg.batch_size = 8;
    cfg.image_size = 32;
    cfg.epochs = 1;
    cfg.decode_threads = 2;
    cfg.device_kind = RF_DEVICE_HOST;
    rf_loader *ld;
    char err[512];
    if (rf_loader_create(&cfg, &ld, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    unsigned long long samples = 0;
    int rc;
    rf_batch *b;
    while ((rc = rf_loader_next(ld, &b)) != RF_DONE) {
        if (rc == RF_EPOCH_END)
            continue;
        if (rc < 0) {
            fprintf(stderr, "%s\n", rf_last_error(ld));
            rf_loader_destroy(ld);
            return 1;
        }
        samples += b->count;
        rf_loader_release(ld, b, NULL);
    }
    rf_loader_destroy(ld);
    printf("ringfeed %s: %llu samples\n", rf_version(), samples);
    return samples == strtoull(argv[2], NULL, 10) ? 0 : 1;
}
