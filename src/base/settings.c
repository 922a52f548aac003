/* settings.c — the rows of settings.h as the table rf_config_settings() exports, and what is
 * done with a config by walking it: rf_config_init (the defaults), rf_settings_resolve (AUTO
 * to a fixed default) and rf_settings_check (each field against its range, by name).
 *
 * DESIGN
 * The table is static and built by the compiler from the rows (offsetof, sizeof), so the
 * offsets a binding reads are the compiler's. The walks read and write a field through its
 * offset and type, never by name: a new row needs no code here. Runs on any thread; touches
 * only the config it is given. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "base/settings.h"

#define DEF(v) .default_int = (uint64_t)(v)
#define DEF_F(v) .default_f = (v)
#define DEF_S(s) .default_str = (s)
#define AUTO_RULE(a, r) .auto_int = (uint64_t)(a), .rule = (r)
#define AUTO_RULE_F(a, r) .auto_f = (a), .rule = (r)
#define RANGE(lo, hi) .min = (uint64_t)(lo), .max = (uint64_t)(hi)
#define RANGE_F(lo, hi) .min_f = (lo), .max_f = (hi)
#define NAMES(hi, names) .min = 0, .max = (uint64_t)(hi), .values = (names)
#define NO_RANGE .min = 0
#define ROW_(A, n, t, dflt, range, u, st, fl, d)                                                   \
    {.name = #n, .doc = (d), .unit = (u), .stage = (st), .offset = offsetof(rf_config, n),         \
     .size = sizeof(((rf_config *)0)->n), .type = RF_SETTING_##t, .flags = (fl), dflt, range},

static const rf_setting table[] = {RF_SETTINGS(ROW_, 0)};

#define NROWS (sizeof table / sizeof table[0])

RF_API const rf_setting *rf_config_settings(uint32_t *count)
{
    if (count)
        *count = (uint32_t)NROWS;
    return table;
}

const rf_setting *rf_settings_row(const char *name)
{
    for (size_t i = 0; i < NROWS; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

/* ---- a field through its row ---------------------------------------------------------------- */

static int is_int(const rf_setting *s)
{
    return s->type == RF_SETTING_BOOL || s->type == RF_SETTING_U32 || s->type == RF_SETTING_I32 ||
           s->type == RF_SETTING_U64 || s->type == RF_SETTING_ENUM;
}

static int is_float(const rf_setting *s)
{
    return s->type == RF_SETTING_F32 || s->type == RF_SETTING_F32X3;
}

/* An integer field, I32 sign-extended. */
static int64_t get_int(const rf_config *c, const rf_setting *s)
{
    const char *p = (const char *)c + s->offset;
    if (s->type == RF_SETTING_U64) {
        uint64_t v;
        memcpy(&v, p, 8);
        return (int64_t)v;
    }
    if (s->type == RF_SETTING_I32) {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void put_int(rf_config *c, const rf_setting *s, uint64_t v)
{
    char *p = (char *)c + s->offset;
    if (s->type == RF_SETTING_U64) {
        memcpy(p, &v, 8);
    } else {
        uint32_t w = (uint32_t)v; /* I32 too: its defaults and AUTO are non-negative */
        memcpy(p, &w, 4);
    }
}

static float get_float(const rf_config *c, const rf_setting *s, int k)
{
    float f;
    memcpy(&f, (const char *)c + s->offset + 4 * (size_t)k, 4);
    return f;
}

static int elements(const rf_setting *s)
{
    return s->type == RF_SETTING_F32X3 ? 3 : 1;
}

static void put_float(rf_config *c, const rf_setting *s, double v)
{
    float f = (float)v;
    for (int k = 0; k < elements(s); k++)
        memcpy((char *)c + s->offset + 4 * (size_t)k, &f, 4);
}

/* Whether the field holds its AUTO value: a negative auto_f stands for every negative value
 * (flip_prob), and an array is AUTO when all its elements are. */
static int holds_auto(const rf_config *c, const rf_setting *s)
{
    if (is_int(s)) {
        uint64_t v = (uint64_t)get_int(c, s);
        return s->type == RF_SETTING_U64 ? v == s->auto_int
                                         : (uint32_t)v == (uint32_t)s->auto_int;
    }
    if (is_float(s)) {
        for (int k = 0; k < elements(s); k++) {
            float f = get_float(c, s, k);
            if (s->auto_f < 0 ? !(f < 0) : f != (float)s->auto_f)
                return 0;
        }
        return 1;
    }
    const void *ptr;
    memcpy(&ptr, (const char *)c + s->offset, sizeof ptr);
    return ptr == NULL;
}

/* Write the row's default (fixed) or its AUTO value (a default decided at create). */
static void put_default(rf_config *c, const rf_setting *s)
{
    if (is_int(s))
        put_int(c, s, s->rule ? s->auto_int : s->default_int);
    else if (is_float(s))
        put_float(c, s, s->rule ? s->auto_f : s->default_f);
    else if (s->type == RF_SETTING_STR)
        memcpy((char *)c + s->offset, &s->default_str, sizeof s->default_str);
}

RF_API void rf_config_init(rf_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    for (size_t i = 0; i < NROWS; i++)
        if (!(table[i].flags & RF_SETTING_HEADER))
            put_default(cfg, &table[i]);
    cfg->struct_size = sizeof *cfg;
    cfg->version = RF_CONFIG_VERSION;
}

void rf_settings_resolve(rf_config *c)
{
    for (size_t i = 0; i < NROWS; i++) {
        const rf_setting *s = &table[i];
        if (!s->rule && !(s->flags & RF_SETTING_HEADER) && holds_auto(c, s))
            put_default(c, s);
    }
}

/* ---- ranges ---------------------------------------------------------------------------------- */

/* "0 (random) or 1 (center)", from the row's names. */
static void enum_choices(const rf_setting *s, char *out, size_t len)
{
    size_t k = 0;
    const char *n = s->values;
    out[0] = 0;
    for (uint64_t v = 0; v <= s->max && k < len; v++) {
        size_t w = strcspn(n, ",");
        const char *sep = v == 0 ? "" : v == s->max ? " or " : ", ";
        k += (size_t)snprintf(out + k, len - k, "%s%llu (%.*s)", sep, (unsigned long long)v,
                              (int)w, n);
        n += w + (n[w] == ',');
    }
}

static int out_of_range(const rf_config *c, const rf_setting *s, rf_err *err)
{
    if (s->type == RF_SETTING_BOOL)
        return rf_seterr(err, RF_EINVAL, "%s must be 0 or 1, not %lld", s->name,
                         (long long)get_int(c, s));
    if (s->type == RF_SETTING_ENUM) {
        char choices[256];
        enum_choices(s, choices, sizeof choices);
        return rf_seterr(err, RF_EINVAL, "%s must be %s, not %lld", s->name, choices,
                         (long long)get_int(c, s));
    }
    if (s->type == RF_SETTING_I32)
        return rf_seterr(err, RF_EINVAL, "%s %lld out of range %llu..%llu", s->name,
                         (long long)get_int(c, s), (unsigned long long)s->min,
                         (unsigned long long)s->max);
    if (is_int(s))
        return rf_seterr(err, RF_EINVAL, "%s %llu out of range %llu..%llu", s->name,
                         (unsigned long long)get_int(c, s), (unsigned long long)s->min,
                         (unsigned long long)s->max);
    for (int k = 0; k < elements(s); k++) {
        float f = get_float(c, s, k);
        char at[8] = ""; /* an array's element */
        if (s->type == RF_SETTING_F32X3)
            snprintf(at, sizeof at, "[%d]", k);
        if (!(f >= s->min_f && f <= s->max_f))
            return rf_seterr(err, RF_EINVAL, "%s%s %g out of range %g..%g", s->name, at,
                             (double)f, s->min_f, s->max_f);
    }
    return RF_EINVAL;
}

static int in_range(const rf_config *c, const rf_setting *s)
{
    if (s->type == RF_SETTING_I32) {
        int64_t v = get_int(c, s);
        return v >= 0 && (uint64_t)v >= s->min && (uint64_t)v <= s->max;
    }
    if (is_int(s)) {
        uint64_t v = (uint64_t)get_int(c, s);
        return v >= s->min && v <= s->max;
    }
    for (int k = 0; k < elements(s); k++) {
        float f = get_float(c, s, k);
        if (!(f >= s->min_f && f <= s->max_f))
            return 0;
    }
    return 1;
}

int rf_settings_check(const rf_config *c, rf_err *err)
{
    for (size_t i = 0; i < NROWS; i++) {
        const rf_setting *s = &table[i];
        if (!(is_int(s) || is_float(s)) || (s->flags & RF_SETTING_HEADER))
            continue;
        if ((s->flags & RF_SETTING_TOKENS) && c->source != RF_SOURCE_TOKENS)
            continue;
        if (!holds_auto(c, s) && !in_range(c, s))
            return out_of_range(c, s, err);
    }
    return 0;
}
