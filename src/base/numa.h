/* numa.h — NUMA placement without libnuma: nodes from sysfs, the GPU's node from its PCI
 * address, and placing the calling thread (CPU affinity + preferred memory policy) for a scope,
 * so the threads it creates and the memory it faults inherit it. Everything degrades to "no
 * placement" when sysfs or the syscalls are unavailable. */
#ifndef RF_NUMA_H
#define RF_NUMA_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

#define RF_NUMA_NODES_MAX 1024

/* Parse a sysfs list ("0", "0-3,8-11") into set[0..max) (1 = member). Returns the number of
 * members, or -1 when the text is malformed or names an element >= max. */
int rf_numa_parse_list(const char *text, uint8_t *set, int max);

/* Nodes with memory/CPUs online (/sys/devices/system/node/online); 1 when unknown. */
uint32_t rf_numa_nodes(void);

/* The NUMA node of a PCI device ("0000:3B:00.0") from sysfs; -1 when unknown (VMs and
 * single-node machines often say -1). */
int rf_numa_node_of_pci(const char *bus_id);

/* The same three readings under another sysfs root (tests point them at fixture trees). */
uint32_t rf_numa_nodes_in(const char *sysfs);
int rf_numa_node_of_pci_in(const char *sysfs, const char *bus_id);
int rf_numa_node_cpus_in(const char *sysfs, int node, cpu_set_t *cpus);

/* The calling thread's placement, saved by rf_numa_enter and restored by rf_numa_leave. */
typedef struct rf_numa_scope {
    int active;
    int cpus_set, policy_set;
    cpu_set_t cpus;
    int mode;
    unsigned long mask[RF_NUMA_NODES_MAX / (8 * sizeof(unsigned long))];
} rf_numa_scope;

/* Move the calling thread onto `node` (its CPUs within the current affinity, MPOL_PREFERRED)
 * until rf_numa_leave; node < 0: nothing. 0 when placed (or nothing asked), else -errno with a
 * reason in why and nothing changed. */
int rf_numa_enter(int node, rf_numa_scope *sc, char *why, size_t why_len);
void rf_numa_leave(rf_numa_scope *sc);

#endif
