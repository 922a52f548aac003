/* s3_profile.c — the S3 settings and the credentials that need no request, read once from the
 * environment and the shared files the way botocore reads them (s3_sources.h).
 *
 * DESIGN
 *  - The files are INI as botocore's configparser reads them: [section], "key = value" (keys
 *    in any case), comments on lines of their own (# or ;), and a key without a value opening
 *    indented sub-keys ("s3 =" then "  endpoint_url = ..."): the services sections use them.
 *  - The credentials file names a profile bare ([dev]), the config file as [profile dev] and
 *    the default one as [default] (or [profile default]).
 *  - Each setting on its own, the environment wins over the files; a service's own endpoint
 *    over the global one, in botocore's order: AWS_ENDPOINT_URL_<SERVICE>, AWS_ENDPOINT_URL,
 *    the profile's services section, its endpoint_url.
 *  - Nothing here fails the client: what cannot be used goes to s->err, which fails S3's
 *    requests only, so a loader of http(s) URLs does not care about a broken ~/.aws.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "io/s3_sources.h"

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

int rf_s3_env_bool(const char *name)
{
    const char *v = env(name);
    if (!v || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcmp(v, "0"))
        return 0;
    return !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcmp(v, "1") ? 1 : -1;
}

/* The first problem is the one reported. */
static void fail(rf_s3_settings *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(rf_s3_settings *s, const char *fmt, ...)
{
    if (s->err[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->err, sizeof s->err, fmt, ap);
    va_end(ap);
}

/* Copy v into dst[cap]; a value that does not fit is an error naming the setting. */
static void put(rf_s3_settings *s, char *dst, size_t cap, const char *v, const char *name)
{
    if (strlen(v) >= cap)
        fail(s, "%s is longer than %zu bytes", name, cap - 1);
    else
        memcpy(dst, v, strlen(v) + 1);
}

/* ---- the files ---- */

typedef void (*ini_fn)(void *ctx, const char *section, const char *parent, const char *key,
                       const char *value);

static char *trim(char *a, char *b)
{
    while (a < b && (*a == ' ' || *a == '\t'))
        a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t' || b[-1] == '\r'))
        b--;
    *b = 0;
    return a;
}

/* Call fn for every key of text (text is cut into pieces). -1 for a line that is neither a
 * section, a key nor a comment, with its number in *line. */
static int ini_each(char *text, ini_fn fn, void *ctx, int *line)
{
    char section[RF_S3_NAME_MAX + 16] = "", parent[64] = "";
    char *p = text;
    for (*line = 1; *p; (*line)++) {
        char *end = strchr(p, '\n'), *next = end ? end + 1 : p + strlen(p);
        end = end ? end : p + strlen(p);
        int indented = *p == ' ' || *p == '\t';
        char *l = trim(p, end);
        p = next;
        if (!*l || *l == '#' || *l == ';')
            continue;
        if (*l == '[') {
            char *close = strrchr(l, ']');
            if (!close)
                return -1;
            snprintf(section, sizeof section, "%s", trim(l + 1, close));
            parent[0] = 0;
            continue;
        }
        char *eq = strchr(l, '=');
        if (!eq || !section[0])
            return -1;
        char *key = trim(l, eq), *value = trim(eq + 1, eq + 1 + strlen(eq + 1));
        if (indented && parent[0]) {
            fn(ctx, section, parent, key, value);
            continue;
        }
        parent[0] = 0;
        if (!*value)
            snprintf(parent, sizeof parent, "%s", key);
        else
            fn(ctx, section, "", key, value);
    }
    return 0;
}

/* What the files say about the profile. */
typedef struct found {
    rf_s3_settings *s;
    int config;                        /* reading the config file (else credentials) */
    char services[RF_S3_NAME_MAX];     /* the profile's services = NAME */
    int services_found;                /* its [services NAME] section */
    char endpoint[RF_PATH_BYTES_MAX], s3_endpoint[RF_PATH_BYTES_MAX],
        sts_endpoint[RF_PATH_BYTES_MAX];
    char region[64], ignore_endpoints[16];
    char id[RF_S3_KEY_ID_MAX], secret[RF_S3_SECRET_MAX], token[RF_S3_TOKEN_MAX];
    const char *key_file;              /* the file the keys came from */
    char wi_file[RF_PATH_BYTES_MAX], role_arn[RF_S3_NAME_MAX], session_name[RF_S3_NAME_MAX];
    char role_from[32], process[8], sso[32];
} found;

/* The section names the profile: [NAME] in the credentials file, [profile NAME] (or
 * [default] for the default profile) in the config file. */
static int is_profile(const found *f, const char *section)
{
    const char *name = f->s->profile;
    if (!f->config)
        return strcmp(section, name) == 0;
    if (strcmp(name, "default") == 0 && strcmp(section, "default") == 0)
        return 1;
    if (strncmp(section, "profile", 7) != 0 || (section[7] != ' ' && section[7] != '\t'))
        return 0;
    const char *n = section + 8;
    while (*n == ' ' || *n == '\t')
        n++;
    return strcmp(n, name) == 0;
}

#define KEEP(dst, v) (snprintf((dst), sizeof(dst), "%s", (v)) >= (int)sizeof(dst) ? \
                      fail(f->s, "a value of %s in %s is too long", key, file) : (void)0)

static void profile_key(void *ctx, const char *section, const char *parent, const char *key,
                        const char *value)
{
    found *f = ctx;
    const char *file = f->config ? f->s->config_file : f->s->cred_file;
    if (parent[0] || !is_profile(f, section))
        return;
    f->s->profile_found = 1;
    int keys = !strcasecmp(key, "aws_access_key_id") || !strcasecmp(key, "aws_secret_access_key")
               || !strcasecmp(key, "aws_session_token");
    if (keys && f->key_file && f->key_file != file)
        return; /* the credentials file's keys win over the config file's */
    if (keys)
        f->key_file = file;
    if (!strcasecmp(key, "aws_access_key_id"))
        KEEP(f->id, value);
    else if (!strcasecmp(key, "aws_secret_access_key"))
        KEEP(f->secret, value);
    else if (!strcasecmp(key, "aws_session_token"))
        KEEP(f->token, value);
    else if (!f->config)
        return;
    else if (!strcasecmp(key, "region"))
        KEEP(f->region, value);
    else if (!strcasecmp(key, "endpoint_url"))
        KEEP(f->endpoint, value);
    else if (!strcasecmp(key, "services"))
        KEEP(f->services, value);
    else if (!strcasecmp(key, "ignore_configured_endpoint_urls"))
        KEEP(f->ignore_endpoints, value);
    else if (!strcasecmp(key, "web_identity_token_file"))
        KEEP(f->wi_file, value);
    else if (!strcasecmp(key, "role_arn"))
        KEEP(f->role_arn, value);
    else if (!strcasecmp(key, "role_session_name"))
        KEEP(f->session_name, value);
    else if (!strcasecmp(key, "source_profile") || !strcasecmp(key, "credential_source"))
        KEEP(f->role_from, key);
    else if (!strcasecmp(key, "credential_process"))
        KEEP(f->process, "yes");
    else if (!strncasecmp(key, "sso_", 4) || !strcasecmp(key, "login_session"))
        KEEP(f->sso, key);
}

/* [services NAME]: "s3 =" and "sts =" with their endpoint_url under them. */
static void services_key(void *ctx, const char *section, const char *parent, const char *key,
                         const char *value)
{
    found *f = ctx;
    const char *file = f->s->config_file;
    if (strncmp(section, "services", 8) != 0 || (section[8] != ' ' && section[8] != '\t'))
        return;
    const char *n = section + 9;
    while (*n == ' ' || *n == '\t')
        n++;
    if (strcmp(n, f->services) != 0)
        return;
    f->services_found = 1;
    if (!strcasecmp(key, "endpoint_url") && !strcasecmp(parent, "s3"))
        KEEP(f->s3_endpoint, value);
    else if (!strcasecmp(key, "endpoint_url") && !strcasecmp(parent, "sts"))
        KEEP(f->sts_endpoint, value);
}

/* Read one file into f: 1 read, 0 absent. */
static int read_ini(found *f, const char *path, int config)
{
    char *text;
    uint64_t len;
    rf_err e = {0};
    int rc = rf_read_whole(path, "an AWS shared file", RF_EINVAL, RF_S3_FILE_BYTES_MAX, &text,
                           &len, &e), line;
    if (rc == -ENOENT || rc == -ENOTDIR)
        return 0;
    if (rc) {
        fail(f->s, "cannot read %s", e.msg);
        return 0;
    }
    f->config = config;
    char *copy = config ? strdup(text) : NULL;
    if (ini_each(text, profile_key, f, &line) != 0 ||
        (copy && f->services[0] && ini_each(copy, services_key, f, &line) != 0)) {
        fail(f->s, "%s line %d: neither [section], key = value nor a comment", path, line);
    }
    free(copy);
    free(text);
    return 1;
}

/* A file's path: the variable's value (~ expanded), else ~/.aws/NAME; "" without HOME. */
static void file_path(rf_s3_settings *s, char *dst, const char *var, const char *name)
{
    const char *v = env(var), *home = env("HOME");
    char buf[RF_PATH_BYTES_MAX + 64];
    if (v && v[0] == '~' && (v[1] == '/' || !v[1]) && home)
        snprintf(buf, sizeof buf, "%s%s", home, v + 1);
    else if (v)
        snprintf(buf, sizeof buf, "%s", v);
    else if (home)
        snprintf(buf, sizeof buf, "%s/.aws/%s", home, name);
    else
        buf[0] = 0;
    put(s, dst, RF_PATH_BYTES_MAX, buf, var);
}

/* ---- the settings ---- */

/* The first of the values that is set (NULL-terminated list), or NULL. */
static const char *first(const char *a, const char *b, const char *c, const char *d)
{
    return a && *a ? a : b && *b ? b : c && *c ? c : d && *d ? d : NULL;
}

static void endpoints(rf_s3_settings *s, found *f)
{
    int ignore = rf_s3_env_bool("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");
    if (!env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"))
        ignore = !strcasecmp(f->ignore_endpoints, "true");
    if (f->services[0] && !f->services_found)
        fail(s, "profile %s names services %s, and there is no [services %s] section in the "
             "config file", s->profile, f->services, f->services);
    if (ignore == 1)
        return;
    const char *all = env("AWS_ENDPOINT_URL");
    const char *s3 = first(env("AWS_ENDPOINT_URL_S3"), all, f->s3_endpoint, f->endpoint);
    const char *sts = first(env("AWS_ENDPOINT_URL_STS"), all, f->sts_endpoint, f->endpoint);
    if (s3)
        put(s, s->s3_endpoint, sizeof s->s3_endpoint, s3, "the S3 endpoint URL");
    if (sts)
        put(s, s->sts_endpoint, sizeof s->sts_endpoint, sts, "the STS endpoint URL");
}

static void key_of(rf_s3_settings *s, rf_s3_key *k, const char *id, const char *secret,
                   const char *token, const char *what)
{
    if (!id && !secret)
        return;
    if (!id || !secret || !*id || !*secret) {
        fail(s, "%s has %s", what, id && *id ? "an access key id without its secret key"
                                              : "a secret key without its access key id");
        return;
    }
    put(s, k->id, sizeof k->id, id, "an access key id");
    put(s, k->secret, sizeof k->secret, secret, "a secret access key");
    put(s, k->token, sizeof k->token, token ? token : "", "a session token");
}

/* The files: the profile's keys, region, endpoints, web identity and unsupported ways. */
static void files(rf_s3_settings *s, found *f)
{
    file_path(s, s->cred_file, "AWS_SHARED_CREDENTIALS_FILE", "credentials");
    file_path(s, s->config_file, "AWS_CONFIG_FILE", "config");
    s->cred_file_read = s->cred_file[0] && read_ini(f, s->cred_file, 0);
    s->config_file_read = s->config_file[0] && read_ini(f, s->config_file, 1);
    if (s->profile_named && !s->profile_found)
        fail(s, "AWS_PROFILE names profile %s, which is in neither %s%s nor %s%s", s->profile,
             s->cred_file, s->cred_file_read ? "" : " (absent)", s->config_file,
             s->config_file_read ? "" : " (absent)");
    char what[RF_S3_NAME_MAX + 64];
    snprintf(what, sizeof what, "profile %s", s->profile);
    key_of(s, &s->profile_key, f->id[0] ? f->id : NULL, f->secret[0] ? f->secret : NULL,
           f->token, what);
    if (s->profile_key.id[0])
        snprintf(s->profile_key.source, sizeof s->profile_key.source, "profile %s in %s",
                 s->profile, f->key_file);
    /* botocore would assume a role or run SSO before it read the profile's keys, and run a
     * credential_process when the credentials file has none: keys read here instead would be
     * another identity, so the chain refuses such a profile by name. */
    if (f->role_arn[0] && !f->wi_file[0] && f->role_from[0])
        snprintf(s->unsupported, sizeof s->unsupported, "role_arn with %s", f->role_from);
    else if (f->sso[0])
        snprintf(s->unsupported, sizeof s->unsupported, "%s", f->sso);
    else if (f->process[0] && !(f->id[0] && f->key_file == s->cred_file))
        snprintf(s->unsupported, sizeof s->unsupported, "credential_process");
}

static void web_identity(rf_s3_settings *s, const found *f)
{
    const char *file = first(env("AWS_WEB_IDENTITY_TOKEN_FILE"), f->wi_file, NULL, NULL);
    const char *arn = first(env("AWS_ROLE_ARN"), f->role_arn, NULL, NULL);
    if (!file || !arn)
        return;
    put(s, s->wi_token_file, sizeof s->wi_token_file, file, "AWS_WEB_IDENTITY_TOKEN_FILE");
    put(s, s->role_arn, sizeof s->role_arn, arn, "AWS_ROLE_ARN");
    const char *name = first(env("AWS_ROLE_SESSION_NAME"), f->session_name, NULL, NULL);
    char made[64];
    snprintf(made, sizeof made, "ringfeed-%lld", (long long)time(NULL)); /* as botocore's */
    put(s, s->session_name, sizeof s->session_name, name ? name : made, "AWS_ROLE_SESSION_NAME");
}

/* An http:// container endpoint must be on this host or the link-local addresses ECS and EKS
 * use, as botocore requires: the answer is a credential, never to be taken from elsewhere. */
static int container_host_ok(const char *url)
{
    if (strncasecmp(url, "https://", 8) == 0)
        return 1;
    if (strncasecmp(url, "http://", 7) != 0)
        return 0;
    static const char *const hosts[] = {"127.", "localhost", "[::1]", "169.254.170.2",
                                        "169.254.170.23", "[fd00:ec2::23]"};
    const char *h = url + 7;
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++) {
        size_t n = strlen(hosts[i]);
        if (strncasecmp(h, hosts[i], n) == 0 &&
            (hosts[i][n - 1] == '.' || strchr(":/", h[n]) || !h[n]))
            return 1;
    }
    return 0;
}

static void container(rf_s3_settings *s)
{
    const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    char url[RF_PATH_BYTES_MAX + 32];
    if (!rel && !full)
        return;
    if (!rel && !container_host_ok(full)) {
        fail(s, "AWS_CONTAINER_CREDENTIALS_FULL_URI %s: an http:// endpoint must be on this "
             "host (loopback) or 169.254.170.2, 169.254.170.23, fd00:ec2::23; else https://",
             full);
        return;
    }
    if (rel) /* ECS's own address; the relative form wins, as in botocore */
        snprintf(url, sizeof url, "http://169.254.170.2%s%s", rel[0] == '/' ? "" : "/", rel);
    else
        snprintf(url, sizeof url, "%s", full);
    put(s, s->container_url, sizeof s->container_url, url, "the container credentials URI");
    const char *tok = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
    const char *tok_file = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    if (tok_file) /* read at each fetch: EKS Pod Identity rotates it */
        put(s, s->container_auth_file, sizeof s->container_auth_file, tok_file,
            "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    else if (tok)
        put(s, s->container_auth, sizeof s->container_auth, tok,
            "AWS_CONTAINER_AUTHORIZATION_TOKEN");
}

static uint32_t env_u32(rf_s3_settings *s, const char *name, uint32_t dflt, uint32_t scale,
                        uint32_t max)
{
    const char *v = env(name);
    if (!v)
        return dflt;
    char *end;
    double d = strtod(v, &end);
    if (*end || !(d > 0) || d * scale > max) {
        fail(s, "%s is %s: a positive number is wanted", name, v);
        return dflt;
    }
    return (uint32_t)(d * scale + 0.5);
}

static void imds(rf_s3_settings *s)
{
    s->imds_off = rf_s3_env_bool("AWS_EC2_METADATA_DISABLED") == 1;
    s->imds_v1_off = rf_s3_env_bool("AWS_EC2_METADATA_V1_DISABLED") == 1;
    const char *mode = env("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
    const char *ep = first(env("AWS_EC2_METADATA_SERVICE_ENDPOINT"),
                           mode && !strcasecmp(mode, "IPv6") ? "http://[fd00:ec2::254]" : NULL,
                           "http://169.254.169.254", NULL);
    put(s, s->imds_endpoint, sizeof s->imds_endpoint, ep, "AWS_EC2_METADATA_SERVICE_ENDPOINT");
    s->imds_timeout_ms = env_u32(s, "AWS_METADATA_SERVICE_TIMEOUT", RF_S3_IMDS_TIMEOUT_MS, 1000,
                                 600000);
    s->imds_attempts = env_u32(s, "AWS_METADATA_SERVICE_NUM_ATTEMPTS", 1, 1, 10);
}

void rf_s3_settings_read(rf_s3_settings *s, const char *ca, uint32_t timeout_ms)
{
    memset(s, 0, sizeof *s);
    s->timeout_ms = timeout_ms;
    snprintf(s->ca, sizeof s->ca, "%s", ca);
    s->profile_named = env("AWS_PROFILE") != NULL;
    put(s, s->profile, sizeof s->profile, s->profile_named ? env("AWS_PROFILE") : "default",
        "AWS_PROFILE");
    found *f = calloc(1, sizeof *f);
    if (!f) {
        fail(s, "no memory");
        return;
    }
    f->s = s;
    files(s, f);
    const char *region = first(env("AWS_REGION"), env("AWS_DEFAULT_REGION"), f->region, NULL);
    put(s, s->region, sizeof s->region, region ? region : "", "AWS_REGION");
    endpoints(s, f);
    key_of(s, &s->env_key, env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY"),
           env("AWS_SESSION_TOKEN"), "the environment");
    snprintf(s->env_key.source, sizeof s->env_key.source, "the environment (AWS_ACCESS_KEY_ID)");
    web_identity(s, f);
    container(s);
    imds(s);
    s->anonymous = rf_s3_env_bool("AWS_NO_SIGN_REQUEST");
    if (s->anonymous < 0)
        fail(s, "AWS_NO_SIGN_REQUEST is %s: YES (or true, 1) reads public buckets unsigned, "
             "NO (or false, 0, unset) signs", env("AWS_NO_SIGN_REQUEST"));
    memset(f, 0, sizeof *f); /* the profile's secret */
    free(f);
}

int rf_s3_read_token(const char *path, char **text, char *why, size_t cap)
{
    uint64_t n;
    rf_err e = {0};
    if (rf_read_whole(path, "a token file", RF_EINVAL, RF_S3_FILE_BYTES_MAX, text, &n, &e)) {
        snprintf(why, cap, "cannot read %s", e.msg);
        return -1;
    }
    while (n && strchr(" \t\r\n", (*text)[n - 1]))
        (*text)[--n] = 0; /* the line end an editor or `echo` leaves is not the token's */
    return 0;
}
