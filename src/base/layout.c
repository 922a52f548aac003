/* layout.c — rf_abi_layout: the public structs' fields and the error codes as the compiler
 * laid them out, for bindings to check their mirrors against (docs/python.md). */
#include <stddef.h>

#include "base/layout.h"
#include "ringfeed.h"

#define STRUCT_ROW_(T, fields) {#T, "", 0, sizeof(T), _Alignof(T), 0}, fields(FIELD_ROW_)
#define FIELD_ROW_(T, f)                                                                       \
    {#T, #f, offsetof(T, f), sizeof(((T *)0)->f), _Alignof(__typeof__(((T *)0)->f)), 0},
#define ERROR_ROW_(name, value, message) {"rf_error", #name, 0, 0, 0, value},

static const rf_field_layout table[] = {
    RF_LAYOUT_STRUCTS(STRUCT_ROW_)
    RF_ERRORS(ERROR_ROW_)
};

RF_API const rf_field_layout *rf_abi_layout(uint32_t *count)
{
    if (count)
        *count = (uint32_t)(sizeof table / sizeof table[0]);
    return table;
}
