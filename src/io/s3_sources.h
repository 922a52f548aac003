/* s3_sources.h — what the S3 credential chain (s3_creds.c) stands on: the settings read once
 * from the environment and the shared files (s3_profile.c), and the sources that answer over
 * HTTP (s3_fetch.c: STS for a web identity, the container endpoint, instance metadata).
 * docs/remote.md "S3 credentials" is the user's side of it. */
#ifndef RF_S3_SOURCES_H
#define RF_S3_SOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "base/common.h"

#define RF_S3_KEY_ID_MAX 128
#define RF_S3_SECRET_MAX 256
#define RF_S3_TOKEN_MAX 4096              /* a session token; STS's run 400-1500 bytes */
#define RF_S3_SOURCE_MAX 320              /* "profile dev in ~/.aws/credentials" with a long home */
#define RF_S3_NAME_MAX 256                /* profile names, role ARNs, session names */
#define RF_S3_FILE_BYTES_MAX (1u << 20)   /* a shared file, a token file */
#define RF_S3_ANSWER_BYTES_MAX (64u << 10) /* a credential source's answer */
#define RF_S3_IMDS_TIMEOUT_MS 1000u       /* botocore's: a laptop without IMDS waits 1 s once */
#define RF_S3_CONTAINER_TIMEOUT_MS 2000u  /* botocore's, with its 3 attempts */
#define RF_S3_CONTAINER_ATTEMPTS 3u

/* One set of credentials and where it came from. */
typedef struct rf_s3_key {
    char id[RF_S3_KEY_ID_MAX];
    char secret[RF_S3_SECRET_MAX];
    char token[RF_S3_TOKEN_MAX];      /* "" without a session token */
    char source[RF_S3_SOURCE_MAX];    /* for messages: "instance metadata role r" */
    int64_t expires_ms;               /* Unix time in ms; 0: they do not expire */
} rf_s3_key;

/* Everything the chain and the S3 client need, read once (at the loader's create). */
typedef struct rf_s3_settings {
    /* the profile (AWS_PROFILE, else "default") and its two files */
    char profile[RF_S3_NAME_MAX];
    int profile_named;                /* AWS_PROFILE is set: the profile must exist */
    int profile_found;                /* a section of it in either file */
    char cred_file[RF_PATH_BYTES_MAX], config_file[RF_PATH_BYTES_MAX];
    int cred_file_read, config_file_read; /* 0: absent (or no HOME) */
    /* the client's settings: environment first, then the profile */
    char region[64];                  /* "" when neither says */
    char s3_endpoint[RF_PATH_BYTES_MAX], sts_endpoint[RF_PATH_BYTES_MAX];
    int anonymous;                    /* AWS_NO_SIGN_REQUEST: S3 requests go unsigned */
    char ca[RF_PATH_BYTES_MAX];       /* SSL_CERT_FILE or CURL_CA_BUNDLE; "" = libcurl's */
    uint32_t timeout_ms;              /* remote_timeout_ms: STS's requests */
    /* the sources, in the chain's order */
    rf_s3_key env_key;                /* id "" when AWS_ACCESS_KEY_ID is unset */
    char wi_token_file[RF_PATH_BYTES_MAX], role_arn[RF_S3_NAME_MAX], session_name[RF_S3_NAME_MAX];
    rf_s3_key profile_key;            /* id "" when the profile has no keys */
    char unsupported[96];             /* a way to credentials the profile names, not read */
    char container_url[RF_PATH_BYTES_MAX];
    char container_auth[RF_S3_TOKEN_MAX], container_auth_file[RF_PATH_BYTES_MAX];
    int imds_off, imds_v1_off;
    char imds_endpoint[RF_PATH_BYTES_MAX];
    uint32_t imds_timeout_ms, imds_attempts;
    /* a setting that cannot be used (a named profile that is nowhere, a file that does not
     * parse, a value too long): S3 requests fail with it; "" when all is well */
    char err[RF_ERRMSG_MAX];
} rf_s3_settings;

/* Read the settings (s3_profile.c); ca and timeout_ms are the client's. Never fails: a problem
 * goes to s->err, so a loader of http(s) URLs is not refused for its S3 settings. */
void rf_s3_settings_read(rf_s3_settings *s, const char *ca, uint32_t timeout_ms);
/* A token file (a web identity's, a container's authorization) of at most RF_S3_FILE_BYTES_MAX
 * into *text, NUL-terminated and without trailing blanks (the caller frees): 0, or -1 with why
 * naming it. */
int rf_s3_read_token(const char *path, char **text, char *why, size_t cap);

/* The sources over HTTP (s3_fetch.c), each configured by s: 0 with *k, or -1 with why
 * naming the source and what happened (never a secret). Blocking, with short timeouts. */
int rf_s3_fetch_web_identity(const rf_s3_settings *s, rf_s3_key *k, char *why, size_t cap);
int rf_s3_fetch_container(const rf_s3_settings *s, rf_s3_key *k, char *why, size_t cap);
int rf_s3_fetch_imds(const rf_s3_settings *s, rf_s3_key *k, char *why, size_t cap);

/* Whether an environment value means yes ("true", "yes", "1", any case): 1, 0 for "false",
 * "no", "0" or unset, -1 for anything else. */
int rf_s3_env_bool(const char *name);

#endif
