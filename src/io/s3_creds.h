/* s3_creds.h — S3 credentials from the standard AWS chain in botocore's order: the
 * environment, a web identity through STS, the profile's keys in the shared files, the
 * container endpoint, EC2 instance metadata (docs/remote.md "S3 credentials").
 *
 * DESIGN
 *  - The chain is walked once, at the first request to be signed (create's open of an s3://
 *    shard, as a rule), so a loader of http(s) URLs never looks and instance metadata's
 *    timeout is paid at most once. The source it settles on is the one asked again later.
 *  - Temporary credentials are fetched again before they expire: RF_S3_REFRESH_AHEAD_MS ahead,
 *    or half their remaining life when that is shorter. The first thread that finds them due
 *    fetches; the others sign with the current ones meanwhile and wait only when those have
 *    expired. A refresh that fails is tried again at most every RF_S3_RETRY_MS, and the
 *    current credentials serve until shortly before they expire: not in their last
 *    RF_S3_EXPIRY_MARGIN_MS (or last half, when their life was shorter), so that a request
 *    signed with them still arrives in time (a signature that reaches S3 after the expiry is
 *    refused with ExpiredToken, and its reason, the failed refresh, would be lost).
 *  - Two locks: `mu` guards the current key and is held only to read or replace it; `fetch_mu`
 *    is held by the one thread asking a source, taken before `mu` and never while holding it.
 *  - Once walked without success the chain is not walked again for this client: every signed
 *    request fails with the same message, and none goes out unsigned.
 */
#ifndef RF_S3_CREDS_H
#define RF_S3_CREDS_H

#include "io/s3_sources.h"

#define RF_S3_REFRESH_AHEAD_MS 300000   /* 5 min, the window botocore's refresh starts in */
#define RF_S3_RETRY_MS 1000             /* a failed refresh, asked again after this */
#define RF_S3_EXPIRY_MARGIN_MS 60000    /* credentials not signed with this close to expiry */

typedef struct rf_s3_creds rf_s3_creds;

enum {
    RF_S3_CREDS_OK = 0,
    RF_S3_CREDS_NONE = -1,   /* the chain found none (or the settings are unusable): final */
    RF_S3_CREDS_STALE = -2,  /* expired, and the refresh failed: a later try may succeed */
};

/* The chain over s, which it takes (freed with it); NULL without memory (s freed too). */
rf_s3_creds *rf_s3_creds_new(rf_s3_settings *s);
void rf_s3_creds_free(rf_s3_creds *c);

/* The credentials to sign with now, into *k: walks the chain the first time, refreshes when
 * due. RF_S3_CREDS_OK, or NONE or STALE with why (the sources tried and what each said; never
 * a secret). Thread-safe; blocks only while a source is asked and no current key is valid. */
int rf_s3_creds_get(rf_s3_creds *c, rf_s3_key *k, char *why, size_t cap);

#endif
