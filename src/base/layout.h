/* layout.h — the field lists of the public structs that bindings mirror (rf_config, rf_batch,
 * rf_field, rf_stats, rf_setting, rf_sample_view, rf_view), one X(struct, field) per field in
 * declaration order; rf_config's are the settings table's rows. layout.c makes rf_abi_layout's
 * table from them with offsetof and sizeof, so the offsets and sizes a binding checks are the
 * compiler's; tests/test_api.c checks the lists against the structs in ringfeed.h, so a field
 * added there and not here fails that test.
 * Internal: nothing here is part of the public API. */
#ifndef RF_LAYOUT_H
#define RF_LAYOUT_H

#include "base/settings.h"

/* rf_config's fields are the rows of the settings table (settings.h). */
#define RF_CONFIG_FIELD_(X, name, ...) X(rf_config, name)
#define RF_CONFIG_FIELDS(X) RF_SETTINGS(RF_CONFIG_FIELD_, X)

#define RF_BATCH_FIELDS(X)                                                                      \
    X(rf_batch, struct_size) X(rf_batch, count) X(rf_batch, epoch) X(rf_batch, index)           \
    X(rf_batch, data) X(rf_batch, data_bytes) X(rf_batch, shape) X(rf_batch, dtype)             \
    X(rf_batch, layout) X(rf_batch, device_kind) X(rf_batch, device_index) X(rf_batch, labels)  \
    X(rf_batch, labels_device) X(rf_batch, keys) X(rf_batch, sample_ids) X(rf_batch, positions) \
    X(rf_batch, is_padding) X(rf_batch, event) X(rf_batch, ndim) X(rf_batch, nfields)          \
    X(rf_batch, fields) X(rf_batch, crop_boxes) X(rf_batch, flips)                              \
    X(rf_batch, label_multihot) X(rf_batch, label_list) X(rf_batch, label_counts)               \
    X(rf_batch, boxes) X(rf_batch, box_classes) X(rf_batch, box_counts) X(rf_batch, points)     \
    X(rf_batch, point_counts) X(rf_batch, letterbox) X(rf_batch, sizes)                         \
    X(rf_batch, sample_offsets) X(rf_batch, masks) X(rf_batch, mask_dtype)                      \
    X(rf_batch, nviews) X(rf_batch, views) X(rf_batch, bucket) X(rf_batch, bucket_height)     \
    X(rf_batch, bucket_width)

#define RF_VIEW_FIELDS(X)                                                                       \
    X(rf_view, data) X(rf_view, sample_stride) X(rf_view, shape) X(rf_view, crop_boxes)         \
    X(rf_view, flips) X(rf_view, masks) X(rf_view, boxes) X(rf_view, box_classes)               \
    X(rf_view, box_counts) X(rf_view, points) X(rf_view, point_counts) X(rf_view, letterbox)

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
    X(rf_stats, recovered_by_kind) X(rf_stats, sync_indexed) X(rf_stats, sync_stale)             \
    X(rf_stats, sync_built) X(rf_stats, sync_loaded)

#define RF_SAMPLE_VIEW_FIELDS(X)                                                                \
    X(rf_sample_view, struct_size) X(rf_sample_view, layout) X(rf_sample_view, height)          \
    X(rf_sample_view, width) X(rf_sample_view, channels) X(rf_sample_view, is_padding)          \
    X(rf_sample_view, pixels) X(rf_sample_view, row_stride) X(rf_sample_view, pixel_stride)     \
    X(rf_sample_view, channel_stride) X(rf_sample_view, sample_id) X(rf_sample_view, position)  \
    X(rf_sample_view, epoch) X(rf_sample_view, seed) X(rf_sample_view, key)                     \
    X(rf_sample_view, label) X(rf_sample_view, nfields) X(rf_sample_view, field_names)          \
    X(rf_sample_view, field_data) X(rf_sample_view, field_lengths)

#define RF_SETTING_FIELDS(X)                                                                    \
    X(rf_setting, name) X(rf_setting, doc) X(rf_setting, unit) X(rf_setting, stage)             \
    X(rf_setting, values) X(rf_setting, rule) X(rf_setting, default_str) X(rf_setting, offset)  \
    X(rf_setting, size) X(rf_setting, type) X(rf_setting, flags) X(rf_setting, min)             \
    X(rf_setting, max) X(rf_setting, default_int) X(rf_setting, auto_int) X(rf_setting, min_f)  \
    X(rf_setting, max_f) X(rf_setting, default_f) X(rf_setting, auto_f)

/* Every struct above, as S(struct, its field list). */
#define RF_LAYOUT_STRUCTS(S)                                                                   \
    S(rf_config, RF_CONFIG_FIELDS) S(rf_batch, RF_BATCH_FIELDS) S(rf_field, RF_FIELD_FIELDS)    \
    S(rf_stats, RF_STATS_FIELDS) S(rf_setting, RF_SETTING_FIELDS)                            \
    S(rf_sample_view, RF_SAMPLE_VIEW_FIELDS) S(rf_view, RF_VIEW_FIELDS)

#endif
