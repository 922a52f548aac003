/* tarwrite.h — the tar writer used by the generator is the library's (src/authoring/tarwrite.c): one
 * implementation only. This header forwards to the library's internal declarations so that
 * datasets/ and the tests keep including "tarwrite.h"; rfsynth links ringfeed_static for it. */
#ifndef RF_DATASETS_TARWRITE_H
#define RF_DATASETS_TARWRITE_H
#include "authoring/tarwrite.h"
#endif
