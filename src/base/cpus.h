/* cpus.h — how many CPUs this process may use, the default of rf_config.decode_threads
 * (rf_cpu_count): the CPUs of the calling thread's affinity mask (what `taskset`, `numactl`
 * and container cpusets restrict), capped by the cgroup CPU quota (what `docker --cpus`,
 * Kubernetes CPU limits and systemd CPUQuota= set), rounded up. The library reads no
 * environment variable: a binding divides by its launcher's ranks per node itself. */
#ifndef RF_CPUS_H
#define RF_CPUS_H

#include <stddef.h>
#include <stdint.h>

/* CPUs in the calling thread's affinity mask (sched_getaffinity; threads it creates inherit
 * the mask); 0 when it cannot be read. */
uint32_t rf_cpus_affinity(void);

/* The tightest cgroup CPU quota of the process, in CPUs rounded up, read under `root` ("" for
 * the real /proc and /sys; tests point it at fixture trees): ceil(quota / period) over the
 * process' own cgroup and each of its ancestors, in the cgroup v2 hierarchy (cpu.max) and in
 * the v1 hierarchy of the cpu controller (cpu.cfs_quota_us / cpu.cfs_period_us), found
 * through <root>/proc/self/cgroup and the mount points in <root>/proc/self/mountinfo. 0 when
 * no quota is set or nothing can be read. `why` (NULL, or why_len bytes) gets the file whose
 * quota won and its text, or "" when there is none. */
uint32_t rf_cpus_quota_in(const char *root, char *why, size_t why_len);

#endif
