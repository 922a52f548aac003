/* hash.h — XXH64 (seed 0), the one fast hash of the house: the shard cache's block sums and the
 * sync-point index's member hashes. It runs at memory speed on one core (about 10 GB/s), so a
 * whole member can be checked every time it is used. */
#ifndef RF_HASH_H
#define RF_HASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t rf_xxh64(const void *data, size_t len);

#endif
