/* cpus.h — how many CPUs this process may use (rf_cpu_count, decode_threads' default): the
 * calling thread's affinity mask (taskset, cpusets) capped by the cgroup CPU quota (docker
 * --cpus, Kubernetes limits), rounded up. No environment variable is read: a binding divides by
 * its launcher's ranks per node itself. */
#ifndef RF_CPUS_H
#define RF_CPUS_H

#include <stddef.h>
#include <stdint.h>

/* CPUs in the calling thread's affinity mask; 0 when it cannot be read. */
uint32_t rf_cpus_affinity(void);

/* The tightest cgroup CPU quota of the process (v2 cpu.max, v1 cpu.cfs_quota_us/period) over
 * its cgroup and every ancestor, in CPUs rounded up, read under `root` ("" for the real /proc
 * and /sys; tests use fixture trees). 0 when none is set or nothing can be read. `why` (may be
 * NULL) gets the file whose quota won and its text, or "". */
uint32_t rf_cpus_quota_in(const char *root, char *why, size_t why_len);

#endif
