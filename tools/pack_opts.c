/* pack_opts.c — ringfeed-pack's command line: its usage text and the parse into opts. */
#include "pack.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ringfeed.h"
#include "ringfeed_shards.h"

#include "cli_num.h"

void pack_usage(FILE *f)
{
    fprintf(f,
            "usage: ringfeed-pack --input DIR|LIST --output 'out/train-%%04d.tar' [options]\n"
            "  --input DIR        class-folder tree (one subfolder per class; labels are the\n"
            "                     sorted subfolder index; jpg, jpeg, png and webp files,\n"
            "                     any case)\n"
            "  --list FILE        instead of --input: lines `path label` (relative paths are\n"
            "                     relative to the list's folder)\n"
            "  --output PATTERN   shard path with one integer conversion (%%d, %%04d, %%06u)\n"
            "  --shard-size SIZE  start a new shard before this size; K/M/G suffixes (256M)\n"
            "  --shuffle          shuffle the sample order before sharding (with --seed N)\n"
            "  --seed N           shuffle seed (0)\n"
            "  --threads N        reader threads (online CPUs); output does not depend on it\n"
            "  --format pax|gnu   long-name records (pax)\n"
            "  --first-shard N    number of the first shard (0)\n"
            "  --max-file-bytes SIZE  larger files are bad (64M)\n"
            "  --strict           fail on a bad or unreadable file instead of skipping it\n"
            "  --restart[=N]      rewrite each JPEG losslessly (same pixels) with a restart\n"
            "                     marker every N MCUs (default: the loader's choice) and\n"
            "                     optimal Huffman tables, so crops decode only what they need\n"
            "                     (PNG and WebP files stay as they are, and so do progressive\n"
            "                     JPEGs cut short, whose pixels a rewrite would change)\n"
            "  --sync-index       also write a sync-point sidecar X.tar.sync beside each\n"
            "                     shard, so the GPU decode starts plain JPEGs' crops mid-scan\n"
            "                     without rewriting them (docs/gpu-decode.md); with no --input,\n"
            "                     `ringfeed-pack --sync-index SHARD...` writes them for shards\n"
            "                     that exist (kept entries of an index there are not rebuilt)\n"
            "  --quiet            no progress line\n"
            "  --json             print a JSON summary as the last line of stdout\n"
            "  --version          print the library's version and exit\n"
            "  -h, --help         print this text and exit\n"
            "Keys are class/filename without the extension, with whitespace, control bytes and\n"
            "dots in the file name replaced by '_' (a WebDataset key ends at the first dot of\n"
            "the basename); a key made equal to another by this gets a _2, _3 ... suffix.\n"
            "Members: KEY.EXT (the file's bytes, unchanged unless --restart; EXT the file's\n"
            "own jpg, jpeg, png or webp in its case, else jpg) then KEY.cls (the label).\n"
            "An index X.idx (DALI v1.2) is written beside each X.tar. A shard and its\n"
            "index appear only complete (written under a hidden temporary name, fsynced, then\n"
            "renamed); on failure the unfinished shard is removed and pack exits 1.\n");
}


/* "64MB", "1.5G", "4096", "256k" (binary multiples). */
static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1048576.0; end++; break;
    case 'g': case 'G': mul = 1073741824.0; end++; break;
    case 't': case 'T': mul = 1099511627776.0; end++; break;
    default: break;
    }
    if (*end == 'i')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v * mul > 1e18)
        return -1;
    *out = (uint64_t)(v * mul);
    return 0;
}


int pack_parse_args(int argc, char **argv, opts *o)
{
    static const struct option lo[] = {
        {"input", 1, 0, 'i'}, {"list", 1, 0, 'l'}, {"output", 1, 0, 'o'},
        {"shard-size", 1, 0, 's'}, {"shuffle", 0, 0, 'S'}, {"seed", 1, 0, 'e'},
        {"threads", 1, 0, 't'}, {"format", 1, 0, 'f'}, {"first-shard", 1, 0, 'F'},
        {"max-file-bytes", 1, 0, 'm'}, {"strict", 0, 0, 'x'}, {"quiet", 0, 0, 'q'},
        {"json", 0, 0, 'j'}, {"restart", 2, 0, 'R'}, {"sync-index", 0, 0, 'Y'},
        {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'},
        {0, 0, 0, 0}};
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    *o = (opts){.shard_bytes = 256ull << 20, .max_file_bytes = 64ull << 20,
                .threads = ncpu <= 0 ? 4 : ncpu > PACK_THREADS_MAX ? PACK_THREADS_MAX : (uint32_t)ncpu};
    int c;
    uint64_t v;
    while ((c = getopt_long(argc, argv, "i:l:o:s:t:qh", lo, NULL)) != -1) {
        switch (c) {
        case 'i': case 'l': o->input = optarg; break;
        case 'o': o->output = optarg; break;
        case 's':
            if (parse_size(optarg, &o->shard_bytes) || o->shard_bytes < PACK_MIN_SHARD_BYTES)
                return fprintf(stderr, "ringfeed-pack: bad --shard-size %s (at least 64K)\n",
                               optarg), -1;
            break;
        case 'S': o->shuffle = 1; break;
        case 'e':
            if (cli_parse_u64(optarg, &o->seed))
                return fprintf(stderr, "ringfeed-pack: bad --seed %s\n", optarg), -1;
            break;
        case 't':
            if (cli_parse_u64(optarg, &v) || v == 0 || v > PACK_THREADS_MAX)
                return fprintf(stderr, "ringfeed-pack: --threads 1..%d\n", PACK_THREADS_MAX), -1;
            o->threads = (uint32_t)v;
            break;
        case 'f':
            if (strcmp(optarg, "pax") && strcmp(optarg, "gnu"))
                return fprintf(stderr, "ringfeed-pack: --format pax or gnu\n"), -1;
            o->format = strcmp(optarg, "gnu") == 0 ? RF_SHARD_GNU : RF_SHARD_PAX;
            break;
        case 'F':
            if (cli_parse_u64(optarg, &v) || v > 1000000000u)
                return fprintf(stderr, "ringfeed-pack: bad --first-shard %s\n", optarg), -1;
            o->first_shard = (uint32_t)v;
            break;
        case 'm':
            if (parse_size(optarg, &o->max_file_bytes) || o->max_file_bytes == 0 ||
                o->max_file_bytes > (4ull << 30))
                return fprintf(stderr, "ringfeed-pack: bad --max-file-bytes %s (1..4G)\n",
                               optarg), -1;
            break;
        case 'x': o->strict = 1; break;
        case 'R':
            o->restart = 1;
            if (optarg && (cli_parse_u64(optarg, &v) || v == 0 || v > 65535))
                return fprintf(stderr, "ringfeed-pack: bad --restart=%s (1..65535 MCUs)\n",
                               optarg), -1;
            o->restart_interval = optarg ? (uint32_t)v : 0;
            break;
        case 'Y': o->sync = 1; break;
        case 'q': o->quiet = 1; break;
        case 'j': o->json = 1; break;
        case 'h': pack_usage(stdout); exit(0);
        case 'V': printf("ringfeed-pack %s\n", rf_version()); exit(0);
        default: return -1;
        }
    }
    if (o->sync && !o->input && !o->output && optind < argc) { /* sidecars for these shards */
        o->shards = argv + optind, o->nshards = (uint32_t)(argc - optind);
        return 0;
    }
    if (optind != argc || !o->input || !o->output) {
        fprintf(stderr, "ringfeed-pack: --input (or --list) and --output are required, or "
                "--sync-index and the shards\n");
        return -1;
    }
    return 0;
}
