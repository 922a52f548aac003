/* cpus.c — how many CPUs this process may use (cpus.h).
 *
 * DESIGN
 *  - sysconf(_SC_NPROCESSORS_ONLN) counts the machine: under `taskset -c 0` or in a container
 *    limited to 2 CPUs of 64 it says 64, and decode threads then time-slice on the few the
 *    process may use. The affinity mask says where threads may run; the cgroup quota how much
 *    CPU time they get (--cpus=2 sees every CPU but gets two CPUs' worth).
 *  - The quota is found as the kernel applies it: the cgroup path from /proc/self/cgroup under
 *    its hierarchy's mount point from /proc/self/mountinfo (whose root field says which cgroup
 *    is mounted, as in a container), and every ancestor up to it. A fractional quota rounds up:
 *    1.5 CPUs keep two threads busy part of the time.
 *  - A missing, unreadable or malformed file never fails a loader: it leaves the affinity count.
 */
#include "base/cpus.h"

#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/common.h"

#define CG_LINE_MAX 8192      /* longer mountinfo / cgroup lines are skipped */
#define CG_LINES_MAX 65536    /* lines read from one of those files */
#define CG_CPUS_MAX (1u << 16) /* largest affinity mask asked for */

uint32_t rf_cpus_affinity(void)
{
    /* The mask's size is not known in advance: grow it until the kernel's fits (EINVAL
     * means the buffer is smaller than the kernel's mask). */
    for (uint32_t n = 1024; n <= CG_CPUS_MAX; n *= 2) {
        cpu_set_t *set = CPU_ALLOC(n);
        if (!set)
            return 0;
        size_t size = CPU_ALLOC_SIZE(n);
        int rc = sched_getaffinity(0, size, set);
        int count = rc == 0 ? CPU_COUNT_S(size, set) : 0;
        CPU_FREE(set);
        if (rc == 0)
            return count > 0 ? (uint32_t)count : 0;
        if (errno != EINVAL)
            return 0;
    }
    return 0;
}

/* The next whole line of f into buf (newline removed); lines that do not fit are skipped.
 * Returns 0 at the end of the file or after CG_LINES_MAX lines (*count). */
static int next_line(FILE *f, char *buf, size_t n, uint32_t *count)
{
    while (*count < CG_LINES_MAX && fgets(buf, (int)n, f)) {
        ++*count;
        size_t len = strlen(buf);
        if (len && buf[len - 1] == '\n') {
            buf[len - 1] = 0;
            return 1;
        }
        if (feof(f))
            return 1; /* a last line without newline */
        int c;
        while ((c = fgetc(f)) != EOF && c != '\n') /* too long: skip the rest */
            ;
    }
    return 0;
}

/* Whether the comma-separated list holds tok ("rw,cpu,cpuacct" holds "cpu"). */
static int has_token(const char *list, const char *tok)
{
    size_t k = strlen(tok);
    for (const char *p = list; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, tok, k) && (p[k] == ',' || p[k] == 0))
            return 1;
    return 0;
}

/* mountinfo writes space, tab, newline and backslash in paths as \ooo octal escapes. */
static void unescape(char *s)
{
    char *w = s;
    for (char *r = s; *r; r++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w++ = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 3;
        } else {
            *w++ = *r;
        }
    }
    *w = 0;
}

typedef struct cg_mount {
    char root[PATH_MAX];  /* the cgroup mounted there, in its hierarchy */
    char point[PATH_MAX]; /* where it is mounted */
} cg_mount;

/* What a line of /proc/self/mountinfo or /proc/self/cgroup is searched for: the hierarchy
 * (cgroup2 for v2, else the v1 one with the cpu controller) and where the answer goes. */
typedef struct cg_want {
    int v2;
    cg_mount *mount;
    char *path;
    size_t path_len;
} cg_want;

/* Whether mountinfo line `line` (split in place) mounts the hierarchy asked for. */
static int mount_matches(char *line, const cg_want *w)
{
    cg_mount *m = w->mount;
    int v2 = w->v2;
    char *field[6] = {0}, *save = NULL, *tok;
    int i = 0, dash = 0;
    const char *fstype = NULL, *opts = NULL;
    for (tok = strtok_r(line, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        if (i < 6)
            field[i] = tok;
        if (dash == 1)
            fstype = tok;
        else if (dash == 3)
            opts = tok;
        if (dash || (i >= 6 && !strcmp(tok, "-")))
            dash++;
        i++;
    }
    if (!field[4] || !fstype || !opts)
        return 0;
    if (v2 ? strcmp(fstype, "cgroup2") : strcmp(fstype, "cgroup") || !has_token(opts, "cpu"))
        return 0;
    snprintf(m->root, sizeof m->root, "%s", field[3]);
    snprintf(m->point, sizeof m->point, "%s", field[4]);
    unescape(m->root);
    unescape(m->point);
    return 1;
}

/* Whether /proc/self/cgroup line `line` ("0::PATH" for v2, "N:...cpu...:PATH" for v1) is
 * the process' cgroup in the hierarchy asked for; its PATH goes to w->path. */
static int cgroup_matches(char *line, const cg_want *w)
{
    char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    if (!c2)
        return 0;
    *c1 = *c2 = 0;
    if (w->v2 ? strcmp(line, "0") || c1 + 1 != c2 : !has_token(c1 + 1, "cpu"))
        return 0;
    snprintf(w->path, w->path_len, "%s", c2 + 1);
    return 1;
}

/* Whether a line of <root>/proc/self/<name> matches; 0 when none does or the file is
 * missing. */
static int find_in_self(const char *root, const char *name,
                        int (*match)(char *line, const cg_want *w), const cg_want *w)
{
    char path[PATH_MAX], line[CG_LINE_MAX];
    snprintf(path, sizeof path, "%s/proc/self/%s", root, name);
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    uint32_t count = 0;
    int found = 0;
    while (!found && next_line(f, line, sizeof line, &count))
        found = match(line, w);
    fclose(f);
    return found;
}

/* The quota of one cgroup directory in CPUs, rounded up; 0 when it sets none. */
static uint32_t dir_quota(const char *dir, int v2, char *why, size_t why_len)
{
    char path[PATH_MAX + 32], text[64], period_text[64];
    unsigned long long quota, period;
    char *end;
    if (v2) {
        snprintf(path, sizeof path, "%s/cpu.max", dir);
        if (rf_read_line(path, text, sizeof text))
            return 0;
        quota = strtoull(text, &end, 10); /* "max 100000": no digits, no quota */
        if (end == text || *end != ' ')
            return 0;
        period = strtoull(end + 1, &end, 10);
    } else {
        snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", dir);
        if (rf_read_line(path, text, sizeof text) || text[0] == '-') /* -1: no quota */
            return 0;
        quota = strtoull(text, &end, 10);
        char ppath[PATH_MAX + 32];
        snprintf(ppath, sizeof ppath, "%s/cpu.cfs_period_us", dir);
        if (end == text || rf_read_line(ppath, period_text, sizeof period_text))
            return 0;
        period = strtoull(period_text, &end, 10);
    }
    if (!quota || !period || quota / period >= UINT32_MAX)
        return 0;
    if (why)
        snprintf(why, why_len, "%s: %.*s", path, (int)strcspn(text, "\n"), text);
    return (uint32_t)((quota + period - 1) / period);
}

/* The tightest quota over the process' cgroup and its ancestors in one hierarchy. */
static uint32_t hierarchy_quota(const char *root, int v2, char *why, size_t why_len)
{
    cg_mount m;
    char cg[PATH_MAX], dir[PATH_MAX * 3], text[PATH_MAX + 96];
    cg_want w = {v2, &m, cg, sizeof cg};
    if (!find_in_self(root, "mountinfo", mount_matches, &w) ||
        !find_in_self(root, "cgroup", cgroup_matches, &w))
        return 0;
    /* The cgroup's path below the mounted one; a cgroup outside it (not visible here) is
     * looked up at the mount point itself. */
    size_t rl = strcmp(m.root, "/") ? strlen(m.root) : 0;
    const char *rel = !strncmp(cg, m.root, rl) && (cg[rl] == '/' || !cg[rl]) ? cg + rl : "";
    int base = snprintf(dir, sizeof dir, "%s%s", root, strcmp(m.point, "/") ? m.point : "");
    if (base < 0 || (size_t)base >= sizeof dir)
        return 0;
    snprintf(dir + base, sizeof dir - (size_t)base, "%s", rel);
    uint32_t best = 0;
    for (;;) {
        size_t len = strlen(dir);
        while (len > (size_t)base && dir[len - 1] == '/')
            dir[--len] = 0;
        uint32_t q = dir_quota(dir, v2, text, sizeof text);
        if (q && (!best || q < best)) {
            best = q;
            if (why)
                snprintf(why, why_len, "%s", text);
        }
        char *slash = strrchr(dir + base, '/');
        if (!slash)
            break;
        *slash = 0; /* the parent */
    }
    return best;
}

uint32_t rf_cpus_quota_in(const char *root, char *why, size_t why_len)
{
    char w1[PATH_MAX + 96] = "", w2[PATH_MAX + 96] = "";
    uint32_t v2 = hierarchy_quota(root, 1, w2, sizeof w2);
    uint32_t v1 = hierarchy_quota(root, 0, w1, sizeof w1);
    uint32_t q = v2 && (!v1 || v2 <= v1) ? v2 : v1;
    if (why && why_len)
        snprintf(why, why_len, "%s", !q ? "" : q == v2 ? w2 : w1);
    return q;
}

uint32_t rf_cpu_count(void)
{
    uint32_t n = rf_cpus_affinity();
    if (!n) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        n = online > 0 ? (uint32_t)online : 1;
    }
    uint32_t q = rf_cpus_quota_in("", NULL, 0);
    return q && q < n ? q : n;
}
