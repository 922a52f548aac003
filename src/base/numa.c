/* numa.c — NUMA placement (numa.h).
 *
 * DESIGN
 *  - No libnuma: the three facts needed are one sysfs file each, and the two policy calls plain
 *    syscalls; a package for that would gain nothing.
 *  - Placement is inherited: pthread_create copies the creator's affinity and memory policy, so
 *    the loader enters a scope on the GPU's node around the places that create threads and
 *    fault the ring, then restores the caller's. MPOL_PREFERRED, not BIND: a full node means
 *    memory from elsewhere, never an OOM kill.
 */
#include "base/numa.h"

#include "base/common.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MPOL_DEFAULT_ 0
#define MPOL_PREFERRED_ 1

int rf_numa_parse_list(const char *text, uint8_t *set, int max)
{
    memset(set, 0, (size_t)max);
    int n = 0;
    const char *p = text;
    while (*p && *p != '\n') {
        char *end;
        if (!isdigit((unsigned char)*p))
            return -1;
        long a = strtol(p, &end, 10), b = a;
        p = end;
        if (*p == '-') {
            if (!isdigit((unsigned char)p[1]))
                return -1;
            b = strtol(p + 1, &end, 10);
            p = end;
        }
        if (a < 0 || b < a || b >= max)
            return -1;
        for (long i = a; i <= b; i++)
            if (!set[i]) {
                set[i] = 1;
                n++;
            }
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            return -1;
    }
    return n;
}

uint32_t rf_numa_nodes(void) { return rf_numa_nodes_in("/sys"); }

uint32_t rf_numa_nodes_in(const char *sysfs)
{
    char line[4096], path[512];
    uint8_t set[RF_NUMA_NODES_MAX];
    snprintf(path, sizeof path, "%s/devices/system/node/online", sysfs);
    if (rf_read_line(path, line, sizeof line))
        return 1;
    int n = rf_numa_parse_list(line, set, RF_NUMA_NODES_MAX);
    return n > 0 ? (uint32_t)n : 1;
}

int rf_numa_node_of_pci(const char *bus_id) { return rf_numa_node_of_pci_in("/sys", bus_id); }

int rf_numa_node_of_pci_in(const char *sysfs, const char *bus_id)
{
    char id[64], path[600], line[32];
    size_t i = 0;
    for (; bus_id[i] && i + 1 < sizeof id; i++)
        id[i] = (char)tolower((unsigned char)bus_id[i]);
    id[i] = 0;
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/numa_node", sysfs, id);
    if (rf_read_line(path, line, sizeof line))
        return -1;
    int node = atoi(line);
    return node >= 0 && node < RF_NUMA_NODES_MAX ? node : -1;
}

static int node_cpus(int node, cpu_set_t *cpus) { return rf_numa_node_cpus_in("/sys", node, cpus); }

int rf_numa_node_cpus_in(const char *sysfs, int node, cpu_set_t *cpus)
{
    char path[600], line[4096];
    uint8_t local[CPU_SETSIZE];
    snprintf(path, sizeof path, "%s/devices/system/node/node%d/cpulist", sysfs, node);
    if (rf_read_line(path, line, sizeof line))
        return -ENOENT;
    if (rf_numa_parse_list(line, local, CPU_SETSIZE) <= 0)
        return -EINVAL;
    CPU_ZERO(cpus);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (local[c])
            CPU_SET(c, cpus);
    return 0;
}

int rf_numa_enter(int node, rf_numa_scope *sc, char *why, size_t why_len)
{
    memset(sc, 0, sizeof *sc);
    if (node < 0)
        return 0;
    cpu_set_t want;
    int rc = node_cpus(node, &want);
    if (rc) {
        snprintf(why, why_len, "node %d: no cpulist in sysfs", node);
        return rc;
    }
    if ((rc = pthread_getaffinity_np(pthread_self(), sizeof sc->cpus, &sc->cpus))) {
        snprintf(why, why_len, "pthread_getaffinity_np: %s", strerror(rc));
        return -rc;
    }
    CPU_AND(&want, &want, &sc->cpus);
    if (CPU_COUNT(&want) == 0) {
        snprintf(why, why_len, "node %d: none of its CPUs is allowed to this thread", node);
        return -EINVAL;
    }
    if (syscall(SYS_get_mempolicy, &sc->mode, sc->mask, (unsigned long)RF_NUMA_NODES_MAX,
                NULL, 0UL) != 0) {
        snprintf(why, why_len, "get_mempolicy: %s", strerror(errno));
        return -errno;
    }
    if ((rc = pthread_setaffinity_np(pthread_self(), sizeof want, &want))) {
        snprintf(why, why_len, "pthread_setaffinity_np: %s", strerror(rc));
        return -rc;
    }
    sc->cpus_set = 1;
    unsigned long mask[RF_NUMA_NODES_MAX / (8 * sizeof(unsigned long))] = {0};
    mask[node / (8 * sizeof(unsigned long))] |= 1ul << (node % (8 * sizeof(unsigned long)));
    if (syscall(SYS_set_mempolicy, MPOL_PREFERRED_, mask, (unsigned long)RF_NUMA_NODES_MAX) != 0) {
        int e = errno;
        rf_numa_leave(sc);
        snprintf(why, why_len, "set_mempolicy: %s", strerror(e));
        return -e;
    }
    sc->policy_set = 1;
    sc->active = 1;
    return 0;
}

void rf_numa_leave(rf_numa_scope *sc)
{
    if (sc->policy_set) {
        int empty = 1;
        for (size_t i = 0; i < sizeof sc->mask / sizeof sc->mask[0]; i++)
            empty &= sc->mask[i] == 0;
        if (sc->mode == MPOL_DEFAULT_ || empty)
            syscall(SYS_set_mempolicy, MPOL_DEFAULT_, NULL, 0UL);
        else
            syscall(SYS_set_mempolicy, sc->mode, sc->mask, (unsigned long)RF_NUMA_NODES_MAX);
    }
    if (sc->cpus_set)
        pthread_setaffinity_np(pthread_self(), sizeof sc->cpus, &sc->cpus);
    sc->active = sc->cpus_set = sc->policy_set = 0;
}
