/* pack.h — what ringfeed-pack's files share: its options (pack_opts.c parses them). */
#ifndef RF_PACK_H
#define RF_PACK_H

#include <stdint.h>
#include <stdio.h>

#define PACK_THREADS_MAX 256
#define WINDOW_PER_THREAD 8
#define PACK_PATH_MAX 4096
#define PACK_SHARDS_MAX 100000000u
#define PACK_MIN_SHARD_BYTES (64u * 1024u)

typedef struct opts {
    const char *input, *output;
    uint64_t shard_bytes, seed, max_file_bytes;
    uint32_t threads, format, first_shard;
    int shuffle, strict, quiet, json;
    int restart;          /* rewrite JPEGs with restart markers */
    int sync;             /* --sync-index: a sync-point sidecar for each shard */
    char **shards;        /* --sync-index without --input: the shards (patterns) given */
    uint32_t nshards;
    uint32_t restart_interval; /* MCUs; 0 = the library's choice */
} opts;

/* 0, or -1 after saying what is wrong (the caller prints usage and exits 2); --help and
 * --version print and exit here. */
int pack_parse_args(int argc, char **argv, opts *o);
void pack_usage(FILE *f);

#endif
