/* cli_num.h — number arguments of the command-line tools (ringfeed-bench, ringfeed-pack):
 * decimal digits only, the whole argument, no sign, within the type. static inline because the
 * tools link no common library of their own. */
#ifndef RF_TOOLS_CLI_NUM_H
#define RF_TOOLS_CLI_NUM_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* 0 with *out set, or -1 for anything else (strtoull alone takes "-1" as 2^64 - 1). */
static inline int cli_parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = v;
    return 0;
}

static inline int cli_parse_u32(const char *s, uint32_t *out)
{
    uint64_t v;
    if (cli_parse_u64(s, &v) || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

#endif
