/* label_ids.c — multi-label members (rf_config.multi_label): a JSON array of class ids or a
 * .cls of ids separated by spaces or commas, each judged as a single label is, into a
 * multi-hot row or a padded list (dataset.h, rf_check_labels_as). */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "loaders/dataset.h"
#include "loaders/tar_parse.h"

void rf_label_sink_clear(rf_label_sink *k)
{
    if (k->hot)
        memset(k->hot, 0, k->classes);
    if (k->list)
        memset(k->list, 0xff, (size_t)k->width * sizeof *k->list);
    *k->count = 0;
    k->first = -1;
}

int rf_label_sink_add(rf_label_sink *k, int32_t id, const char *what, rf_err *err)
{
    if (id < 0 || (k->classes && (uint32_t)id >= k->classes))
        return rf_seterr(err, RF_ELABEL, "%s: id %" PRId32 " is not below num_classes %u", what,
                         id, k->classes);
    if (k->first < 0)
        k->first = id;
    if (k->hot) {
        *k->count += !k->hot[id];
        k->hot[id] = 1;
        return 0;
    }
    if (*k->count >= k->width)
        return rf_seterr(err, RF_ELABEL, "%s: more than max_labels %u ids", what, k->width);
    k->list[(*k->count)++] = id;
    return 0;
}

static int is_sep(uint8_t c, int json)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' || (json && c == ']');
}

/* The ids of text[0..len): tokens between separators, each a decimal integer. */
static int add_ids(rf_label_sink *k, const uint8_t *t, uint64_t len, int json, const char *what,
                   rf_err *err)
{
    static const char *const why[] = {
        [RF_LABEL_FAULT_EMPTY] = "empty",
        [RF_LABEL_FAULT_NEGATIVE] = "a negative number",
        [RF_LABEL_FAULT_NOT_INTEGER] = "not an integer",
        [RF_LABEL_FAULT_OVERFLOW] = "a number over 2147483647",
    };
    uint64_t i = 0;
    uint32_t nth = 0;
    while (i < len) {
        if (is_sep(t[i], json)) {
            i++;
            continue;
        }
        uint64_t j = i;
        while (j < len && !is_sep(t[j], json))
            j++;
        int32_t id;
        int fault = rf_parse_label(t + i, j - i, &id);
        nth++;
        if (fault)
            return rf_seterr(err, RF_ELABEL, "%s: id %u (\"%.*s\") is %s; an id is an integer "
                             "0..2147483647", what, nth, (int)RF_MIN(j - i, 24), t + i,
                             why[fault]);
        int rc = rf_label_sink_add(k, id, what, err);
        if (rc)
            return rc;
        i = j;
    }
    return 0;
}

int rf_check_labels_as(uint32_t source, const char *json_path, const char *key,
                       const uint8_t *text, uint64_t len, uint64_t offset, rf_label_sink *k,
                       rf_err *err)
{
    char what[RF_ERRMSG_MAX / 2];
    int json = source == RF_LABEL_JSON;
    rf_label_sink_clear(k);
    if (offset == RF_LABEL_NO_OFFSET)
        snprintf(what, sizeof what, "label member %s.%s", key, json ? "json" : RF_TAR_LABEL_EXT);
    else
        snprintf(what, sizeof what, "label member %s.%s at offset %" PRIu64, key,
                 json ? "json" : RF_TAR_LABEL_EXT, offset);
    if (!json) {
        if (len > RF_TAR_LABEL_BYTES_MAX)
            return rf_check_label(key, text, len, offset, &k->first, err);
        return add_ids(k, text, len, 0, what, err);
    }
    rf_json_result res;
    int32_t id;
    int fault = len > RF_TAR_JSON_LABEL_BYTES_MAX
                    ? RF_JSON_FAULT_SYNTAX
                    : rf_json_find_label(text, len, json_path, &id, &res);
    if (fault != RF_JSON_FAULT_ARRAY) { /* a lone integer, or the single label's errors */
        int rc = rf_check_label_as(source, json_path, key, text, len, offset, &id, err);
        return rc ? rc : rf_label_sink_add(k, id, what, err);
    }
    /* the document is valid JSON: the array is text[at, end), '[' ... ']' */
    char fwhat[RF_ERRMSG_MAX / 2 + 80];
    snprintf(fwhat, sizeof fwhat, "%s, field %s", what, json_path);
    return add_ids(k, text + res.at + 1, res.end - res.at - 1, 1, fwhat, err);
}
