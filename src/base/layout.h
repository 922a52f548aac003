/* layout.h — the field lists of the public structs that bindings mirror (rf_config, rf_batch,
 * rf_field, rf_stats), one X(struct, field) per field in declaration order. layout.c makes
 * rf_abi_layout's table from them with offsetof and sizeof, so the offsets and sizes a binding
 * checks are the compiler's; tests/test_api.c checks the lists against the structs in
 * ringfeed.h, so a field added there and not here fails that test.
 * Internal: nothing here is part of the public API. */
#ifndef RF_LAYOUT_H
#define RF_LAYOUT_H

#define RF_CONFIG_FIELDS(X)                                                                      \
    X(rf_config, struct_size) X(rf_config, version) X(rf_config, shards)                         \
    X(rf_config, shard_count) X(rf_config, batch_size) X(rf_config, image_size)                  \
    X(rf_config, crop) X(rf_config, layout) X(rf_config, resize_shorter) X(rf_config, scale_min) \
    X(rf_config, scale_max) X(rf_config, ratio_min) X(rf_config, ratio_max)                      \
    X(rf_config, flip_prob) X(rf_config, seed) X(rf_config, order) X(rf_config, drop_last)       \
    X(rf_config, rank) X(rf_config, world_size) X(rf_config, remainder) X(rf_config, epochs)     \
    X(rf_config, start_epoch) X(rf_config, decode_threads) X(rf_config, io_threads)              \
    X(rf_config, io_engine) X(rf_config, io_queue_depth) X(rf_config, prefetch_depth)            \
    X(rf_config, device_kind) X(rf_config, device_index) X(rf_config, staging_bytes)             \
    X(rf_config, max_sample_bytes) X(rf_config, max_image_pixels) X(rf_config, max_image_dim)    \
    X(rf_config, io_retries) X(rf_config, resume_state) X(rf_config, resume_state_bytes)         \
    X(rf_config, dtype) X(rf_config, mean) X(rf_config, std) X(rf_config, source)                \
    X(rf_config, token_bytes) X(rf_config, seq_len) X(rf_config, token_windows)                  \
    X(rf_config, token_dtype) X(rf_config, shard_window) X(rf_config, on_error)                  \
    X(rf_config, max_consecutive_skips) X(rf_config, max_scans) X(rf_config, max_name_bytes)     \
    X(rf_config, warm) X(rf_config, warm_bytes) X(rf_config, odirect) X(rf_config, hugepages)    \
    X(rf_config, numa) X(rf_config, naive) X(rf_config, decode_nice) X(rf_config, gpu_decode)    \
    X(rf_config, gpu_decode_percent) X(rf_config, hw_decode_percent)                             \
    X(rf_config, next_timeout_ms) X(rf_config, dct_scaling) X(rf_config, label_source)          \
    X(rf_config, sample_hook) X(rf_config, sample_hook_ctx) X(rf_config, fields)                 \
    X(rf_config, max_field_bytes) X(rf_config, image_height) X(rf_config, image_width)          \
    X(rf_config, label_json_path) X(rf_config, image_exts) X(rf_config, decode_schedule)  \
    X(rf_config, remote_retries) X(rf_config, remote_timeout_ms) X(rf_config, cache_dir)           \
    X(rf_config, cache_bytes)

#define RF_BATCH_FIELDS(X)                                                                      \
    X(rf_batch, struct_size) X(rf_batch, count) X(rf_batch, epoch) X(rf_batch, index)           \
    X(rf_batch, data) X(rf_batch, data_bytes) X(rf_batch, shape) X(rf_batch, dtype)             \
    X(rf_batch, layout) X(rf_batch, device_kind) X(rf_batch, device_index) X(rf_batch, labels)  \
    X(rf_batch, labels_device) X(rf_batch, keys) X(rf_batch, sample_ids) X(rf_batch, positions) \
    X(rf_batch, is_padding) X(rf_batch, event) X(rf_batch, ndim) X(rf_batch, nfields)          \
    X(rf_batch, fields)

#define RF_FIELD_FIELDS(X)                                                                      \
    X(rf_field, name) X(rf_field, data) X(rf_field, offsets) X(rf_field, lengths)

#define RF_STATS_FIELDS(X)                                                                       \
    X(rf_stats, struct_size) X(rf_stats, io_threads) X(rf_stats, decode_threads)                 \
    X(rf_stats, prefetch_depth) X(rf_stats, io_engine) X(rf_stats, io_engine_why)                \
    X(rf_stats, device) X(rf_stats, registered_buffers) X(rf_stats, pinned)                      \
    X(rf_stats, samples_delivered) X(rf_stats, batches_delivered) X(rf_stats, samples_decoded)   \
    X(rf_stats, bytes_read) X(rf_stats, reads) X(rf_stats, read_retries) X(rf_stats, io_busy_ns) \
    X(rf_stats, decode_busy_ns) X(rf_stats, copy_busy_ns) X(rf_stats, consumer_wait_ns)          \
    X(rf_stats, wall_ns) X(rf_stats, epoch) X(rf_stats, pinned_bytes) X(rf_stats, dct_scaled)    \
    X(rf_stats, skipped) X(rf_stats, skipped_by_reason) X(rf_stats, nonregular_members)          \
    X(rf_stats, cache_checked_bytes) X(rf_stats, cache_hit_bytes) X(rf_stats, warmed_bytes)      \
    X(rf_stats, odirect) X(rf_stats, hugepages) X(rf_stats, numa_node) X(rf_stats, numa_nodes)   \
    X(rf_stats, device_pool_reserved_bytes) X(rf_stats, device_pool_used_bytes)                  \
    X(rf_stats, device_allocs_after_create) X(rf_stats, host_allocs_after_create)                \
    X(rf_stats, ring_register_ns) X(rf_stats, memory_why) X(rf_stats, region_decoded)            \
    X(rf_stats, gpu_decoded) X(rf_stats, hw_decoded) X(rf_stats, storage_read_bytes)             \
    X(rf_stats, storage_measured) X(rf_stats, storage_why) X(rf_stats, resume_epoch)             \
    X(rf_stats, counted_epoch) X(rf_stats, epoch_delivered) X(rf_stats, epoch_skipped)           \
    X(rf_stats, epoch_skipped_by_reason) X(rf_stats, epoch_total) X(rf_stats, epoch_final)       \
    X(rf_stats, gpu_plain_decoded) X(rf_stats, decode_schedule) X(rf_stats, sched_gpu_permille)  \
    X(rf_stats, sched_hw_permille) X(rf_stats, hw_engines) X(rf_stats, hw_open_ns)               \
    X(rf_stats, remote_requests) X(rf_stats, remote_retries) X(rf_stats, remote_bytes)          \
    X(rf_stats, shard_cache_on) X(rf_stats, shard_cache_hits) X(rf_stats, shard_cache_misses)    \
    X(rf_stats, shard_cache_stale) X(rf_stats, shard_cache_bypasses)                             \
    X(rf_stats, shard_cache_fills) X(rf_stats, shard_cache_fill_requests)                        \
    X(rf_stats, shard_cache_fill_failures) X(rf_stats, shard_cache_bytes_written)                \
    X(rf_stats, shard_cache_evictions) X(rf_stats, shard_cache_why)                             \
    X(rf_stats, hw_engines_why) X(rf_stats, remote_create_requests)                            \
    X(rf_stats, remote_create_bytes) X(rf_stats, shard_cache_corrupt) X(rf_stats, recovered)     \
    X(rf_stats, recovered_by_kind)

/* Every struct above, as S(struct, its field list). */
#define RF_LAYOUT_STRUCTS(S)                                                                   \
    S(rf_config, RF_CONFIG_FIELDS) S(rf_batch, RF_BATCH_FIELDS) S(rf_field, RF_FIELD_FIELDS)    \
    S(rf_stats, RF_STATS_FIELDS)

#endif
