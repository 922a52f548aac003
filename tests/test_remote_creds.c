/* test_remote_creds.c — S3 credentials from the standard chain (docs/remote.md "S3
 * credentials"), against real servers on loopback (tests/servers/servers.py --only s3,creds):
 * moto's S3 and STS with IAM authentication on, refusing temporary credentials once expired,
 * and creds_server.py standing in for EC2 instance metadata and the container endpoint, which
 * hands out moto's temporary credentials and logs every request it gets.
 *
 * Every test starts from an environment with no AWS variable, an empty HOME and instance
 * metadata off (clean_env), and sets what it tests. Objects: rf-test (private) and rf-public
 * (public-read) hold gen/shard-0000.tar and gen/shard-0001.tar. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "io/s3_sources.h"
#include "remoteutil.h"
#include "testutil.h"

static const char *data;
#define SHARDS "gen/shard-{0000..0001}.tar"

/* ---- helpers ------------------------------------------------------------------------------ */

static const char *const aws_vars[] = {
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
    "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL_STS", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
    "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "AWS_EC2_METADATA_V1_DISABLED",
    "AWS_METADATA_SERVICE_TIMEOUT", "AWS_METADATA_SERVICE_NUM_ATTEMPTS", "AWS_NO_SIGN_REQUEST"};

/* No AWS setting but moto's region, an empty HOME, instance metadata off, the stand-in's
 * defaults and an empty log. Returns HOME. */
static const char *clean_env(void)
{
    for (size_t i = 0; i < sizeof aws_vars / sizeof aws_vars[0]; i++)
        unsetenv(aws_vars[i]);
    const char *home = rf_test_mkdtemp("creds-home");
    setenv("HOME", home, 1);
    setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
    ck_assert_int_eq(rf_test_shell("curl -sf -X POST %s/_reset >/dev/null",
                                   rt_env("RF_TEST_CREDS")), 0);
    return home;
}

static void stand_in(const char *json)
{
    ck_assert_int_eq(rf_test_shell("curl -sf -X POST -d '%s' %s/_config >/dev/null", json,
                                   rt_env("RF_TEST_CREDS")), 0);
}

/* A Python expression over the stand-in's log (`log`: its requests, oldest first), as a
 * number: how many requests of a kind, say. */
static long creds_log(const char *expr)
{
    char out[1024];
    snprintf(out, sizeof out, "%s/n", rf_test_mkdtemp("creds-log"));
    ck_assert_int_eq(rf_test_shell("curl -sf %s/_log | python3 -c 'import json, sys, calendar, "
                                   "time\nlog = json.load(sys.stdin)[\"requests\"]\nprint(int(%s))'"
                                   " > %s", rt_env("RF_TEST_CREDS"), expr, out), 0);
    FILE *f = fopen(out, "r");
    long n = -1;
    ck_assert(f && fscanf(f, "%ld", &n) == 1);
    fclose(f);
    return n;
}

/* Fresh temporary credentials (moto's, through the stand-in) valid for lifetime_s, in the
 * environment with moto's endpoint. */
static void env_temporary_keys(int lifetime_s)
{
    char cfg[64], out[1024], id[128], secret[256], token[4096];
    snprintf(cfg, sizeof cfg, "{\"lifetime_s\": %d}", lifetime_s);
    stand_in(cfg);
    snprintf(out, sizeof out, "%s/k", rf_test_mkdtemp("creds-issue"));
    ck_assert_int_eq(rf_test_shell("curl -sf %s/issue | python3 -c 'import json, sys\nk = "
                                   "json.load(sys.stdin)\nprint(k[\"AccessKeyId\"]); "
                                   "print(k[\"SecretAccessKey\"]); print(k[\"Token\"])' > %s",
                                   rt_env("RF_TEST_CREDS"), out), 0);
    FILE *f = fopen(out, "r");
    ck_assert(f && fscanf(f, "%127s %255s %4095s", id, secret, token) == 3);
    fclose(f);
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    setenv("AWS_ACCESS_KEY_ID", id, 1);
    setenv("AWS_SECRET_ACCESS_KEY", secret, 1);
    setenv("AWS_SESSION_TOKEN", token, 1);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

/* path = dir/name, written with text. */
static const char *file_in(const char *dir, const char *name, const char *text)
{
    static char paths[8][1024];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    write_file(p, text);
    return p;
}

static const char *url_of(const char *bucket_var)
{
    static char url[512];
    snprintf(url, sizeof url, "s3://%s/%s", rt_env(bucket_var), SHARDS);
    return url;
}

/* The private bucket's shards are read whole, as from the local files. */
static void reads_ok(void)
{
    static run r;
    opts o = {.io_threads = 2, .retries = 1};
    rt_collect(url_of("RF_TEST_S3_BUCKET"), &o, &r);
    ck_assert_uint_eq(r.n, 2 * N_GEN);
    free(r.px);
}

/* create fails with code (0: any) and each of the words (NULL-terminated). */
#define FAILS(code, ...) \
    rt_create_fails(url_of("RF_TEST_S3_BUCKET"), &(opts){.retries = 1}, (code), \
                    (const char *[]){__VA_ARGS__, NULL})

static void moto_keys_in(const char *dir, const char *name, const char *section,
                         const char *secret)
{
    char text[1024];
    snprintf(text, sizeof text, "# the test user's key\n[%s]\naws_access_key_id = %s\n"
             "aws_secret_access_key=%s\n", section, rt_env("RF_TEST_S3_KEY"),
             secret ? secret : rt_env("RF_TEST_S3_SECRET"));
    file_in(dir, name, text);
}

/* ---- each source ------------------------------------------------------------------------- */

/* The environment's keys, with a session token sent as x-amz-security-token (moto refuses a
 * temporary key without its token). */
START_TEST(environment_keys_and_session_token)
{
    clean_env();
    env_temporary_keys(3600);
    reads_ok();
    unsetenv("AWS_SESSION_TOKEN");
    FAILS(-13, "HTTP 403", "InvalidAccessKeyId", "from the environment", "ASIA...");
}
END_TEST

/* AWS_PROFILE with the shared credentials and config files: keys, region and endpoint_url
 * from the files, none from the environment. */
START_TEST(profile_in_shared_files)
{
    const char *home = clean_env();
    char aws[1100], text[2048];
    snprintf(aws, sizeof aws, "%s/.aws", home);
    ck_assert_int_eq(rf_test_shell("mkdir -p %s", aws), 0);
    moto_keys_in(aws, "credentials", "dev", NULL);
    snprintf(text, sizeof text, "[default]\nregion = eu-west-3\n\n[profile dev]\nregion = %s\n"
             "endpoint_url = %s\n", rt_env("RF_TEST_S3_REGION"), rt_env("RF_TEST_S3_ENDPOINT"));
    file_in(aws, "config", text);
    setenv("AWS_PROFILE", "dev", 1);
    reads_ok();
    /* the default profile, no AWS_PROFILE: keys in the config file, services section */
    unsetenv("AWS_PROFILE");
    snprintf(text, sizeof text, "[default]\nservices = local\naws_access_key_id = %s\n"
             "aws_secret_access_key = %s\n\n[services local]\ns3 =\n  endpoint_url = %s\n",
             rt_env("RF_TEST_S3_KEY"), rt_env("RF_TEST_S3_SECRET"),
             rt_env("RF_TEST_S3_ENDPOINT"));
    file_in(aws, "config", text);
    file_in(aws, "credentials", "");
    reads_ok();
    /* files named by the variables; a wrong secret's 403 names the profile and its file */
    setenv("AWS_SHARED_CREDENTIALS_FILE", file_in(home, "c2", ""), 1);
    moto_keys_in(home, "c2", "ci", "wrong-secret");
    setenv("AWS_PROFILE", "ci", 1);
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    char words[1200];
    snprintf(words, sizeof words, "profile ci in %s/c2", home);
    FAILS(-13, "HTTP 403", "SignatureDoesNotMatch", words, "AKIA...");
}
END_TEST

/* Profiles that cannot be used fail with what is wrong, before any request. */
START_TEST(profile_refusals)
{
    const char *home = clean_env();
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    setenv("AWS_PROFILE", "nope", 1);
    FAILS(RF_EINVAL, "AWS_PROFILE names profile nope", "(absent)");
    setenv("AWS_CONFIG_FILE", file_in(home, "cfg", "[profile nope]\ncredential_process = "
                                                    "/bin/echo\n"), 1);
    FAILS(-13, "profile nope", "credential_process", "ringfeed does not read",
          "export-credentials");
    file_in(home, "cfg", "[profile nope]\nsso_session = corp\n[sso-session corp]\n");
    FAILS(-13, "sso_session", "ringfeed does not read");
    file_in(home, "cfg", "[profile nope]\nrole_arn = arn:aws:iam::1:role/x\nsource_profile = "
                         "default\n");
    FAILS(-13, "role_arn with source_profile");
    file_in(home, "cfg", "[profile nope]\nservices = gone\n");
    FAILS(RF_EINVAL, "no [services gone] section");
    file_in(home, "cfg", "[profile nope]\nregion eu-west-1\n");
    FAILS(RF_EINVAL, "cfg line 2", "neither [section]");
    file_in(home, "cfg", "[profile nope]\naws_access_key_id = AKIAONLY\n");
    FAILS(RF_EINVAL, "profile nope has an access key id without its secret key");
    unsetenv("AWS_PROFILE");
    setenv("AWS_NO_SIGN_REQUEST", "maybe", 1);
    FAILS(RF_EINVAL, "AWS_NO_SIGN_REQUEST is maybe");
}
END_TEST

/* A web identity (EKS's IRSA): STS's AssumeRoleWithWebIdentity at AWS_ENDPOINT_URL_STS or
 * AWS_ENDPOINT_URL, unsigned, with the token file's content. */
START_TEST(web_identity_through_sts)
{
    const char *home = clean_env();
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    setenv("AWS_WEB_IDENTITY_TOKEN_FILE", file_in(home, "token", "eyJhbGciOi.test.jwt\n"), 1);
    setenv("AWS_ROLE_ARN", rt_env("RF_TEST_ROLE_ARN"), 1);
    setenv("AWS_ROLE_SESSION_NAME", "rf-test", 1);
    reads_ok();
    /* a role that may not read S3: the 403 names it */
    char words[512];
    snprintf(words, sizeof words, "web identity role %s", rt_env("RF_TEST_ROLE_DENIED_ARN"));
    setenv("AWS_ROLE_ARN", rt_env("RF_TEST_ROLE_DENIED_ARN"), 1);
    FAILS(-13, "HTTP 403", "AccessDenied", words, "ASIA...");
    /* AWS_ENDPOINT_URL_STS wins; STS failing is an error even with a usable profile further
     * down the chain, whose identity would be another */
    setenv("AWS_ROLE_ARN", rt_env("RF_TEST_ROLE_ARN"), 1);
    setenv("AWS_ENDPOINT_URL_STS", "http://127.0.0.1:1/", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", file_in(home, "c", ""), 1);
    moto_keys_in(home, "c", "default", NULL);
    FAILS(-13, "web identity role", "AssumeRoleWithWebIdentity at http://127.0.0.1:1/");
    /* the token file is read at each fetch: a missing one is named */
    unsetenv("AWS_ENDPOINT_URL_STS");
    setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent/token", 1);
    FAILS(-13, "cannot read /nonexistent/token");
}
END_TEST

/* The container endpoint (ECS; EKS Pod Identity with its token file), its Authorization. */
START_TEST(container_endpoint)
{
    const char *home = clean_env();
    char url[512];
    snprintf(url, sizeof url, "%s/ecs/task-1", rt_env("RF_TEST_CREDS"));
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
    stand_in("{\"container_auth\": \"tok-R4nd0m\"}");
    setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "tok-R4nd0m", 1);
    reads_ok();
    ck_assert_int_eq(creds_log("sum(q[\"authorization\"] == \"tok-R4nd0m\" for q in log)"), 1);
    /* the token file wins over the variable, and is read again at each fetch */
    setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "stale", 1);
    setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file_in(home, "t", "tok-R4nd0m\n"), 1);
    reads_ok();
    file_in(home, "t", "rotated-away");
    char words[600];
    snprintf(words, sizeof words, "the container endpoint %s: HTTP 403", url);
    FAILS(-13, words);
    /* an http:// endpoint elsewhere than this host is refused before any request */
    unsetenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://example.com/creds", 1);
    FAILS(RF_EINVAL, "AWS_CONTAINER_CREDENTIALS_FULL_URI http://example.com/creds",
          "on this host");
}
END_TEST

/* EC2 instance metadata, IMDSv2: a session token first, then the role and its credentials,
 * each with the token. */
START_TEST(instance_metadata)
{
    clean_env();
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", rt_env("RF_TEST_CREDS"), 1);
    unsetenv("AWS_EC2_METADATA_DISABLED");
    reads_ok();
    ck_assert_int_eq(creds_log("len(log)"), 3);
    ck_assert_int_eq(creds_log("log[0][\"method\"] == \"PUT\" and log[0][\"path\"] == "
                               "\"/latest/api/token\""), 1);
    ck_assert_int_eq(creds_log("all(q[\"imds_token\"] for q in log[1:])"), 1);
    ck_assert_int_eq(creds_log("log[2][\"path\"].endswith(\"/ringfeed-reader\")"), 1);
    /* the 403 of a role that may not read names it */
    stand_in("{\"role\": \"ringfeed-denied\"}");
    FAILS(-13, "HTTP 403", "instance metadata role ringfeed-denied", "ASIA...");
    /* an IMDSv1-only service, as botocore falls back to it; not when v1 is disabled */
    stand_in("{\"role\": \"ringfeed-reader\", \"imds\": \"v1\"}");
    reads_ok();
    setenv("AWS_EC2_METADATA_V1_DISABLED", "true", 1);
    FAILS(-13, "no S3 credentials", "api/token: HTTP 404", "AWS_EC2_METADATA_V1_DISABLED");
    unsetenv("AWS_EC2_METADATA_V1_DISABLED");
    stand_in("{\"imds\": \"no-role\"}");
    FAILS(-13, "no S3 credentials", "no IAM role is attached");
    /* nothing listening: no credentials, quickly */
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "http://127.0.0.1:1", 1);
    FAILS(-13, "no S3 credentials", "instance metadata at http://127.0.0.1:1: no answer");
}
END_TEST

/* ---- the chain ---------------------------------------------------------------------------- */

/* botocore's order: environment, web identity, profile, container, instance metadata. Each
 * source down the chain is configured too, and would fail (a wrong secret) or show in the
 * stand-in's log: the first configured one is used, the rest never asked. */
START_TEST(chain_order)
{
    const char *home = clean_env();
    char ecs[512];
    snprintf(ecs, sizeof ecs, "%s/ecs/task", rt_env("RF_TEST_CREDS"));
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", rt_env("RF_TEST_CREDS"), 1);
    unsetenv("AWS_EC2_METADATA_DISABLED");
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", ecs, 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", file_in(home, "c", ""), 1);
    moto_keys_in(home, "c", "default", "wrong-secret");
    setenv("AWS_WEB_IDENTITY_TOKEN_FILE", file_in(home, "token", "eyJ.test.jwt"), 1);
    setenv("AWS_ROLE_ARN", rt_env("RF_TEST_ROLE_DENIED_ARN"), 1);
    rt_s3_env(NULL); /* environment keys that may read */
    reads_ok();
    /* web identity over the profile: its role may not read, the profile's secret is wrong */
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    FAILS(-13, "HTTP 403", "AccessDenied", "web identity role");
    unsetenv("AWS_ROLE_ARN");
    FAILS(-13, "HTTP 403", "SignatureDoesNotMatch", "profile default in");
    ck_assert_int_eq(creds_log("len(log)"), 0);
    /* the container over instance metadata */
    file_in(home, "c", "");
    reads_ok();
    ck_assert_int_eq(creds_log("len(log) == 1 and log[0][\"path\"] == \"/ecs/task\""), 1);
    unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
    reads_ok();
    ck_assert_int_eq(creds_log("sum(q[\"path\"].startswith(\"/latest/\") for q in log)"), 3);
}
END_TEST

/* ---- refresh ------------------------------------------------------------------------------ */

/* moto refuses temporary credentials once expired (400 ExpiredToken), and the message names
 * them: what the refresh test below relies on. */
START_TEST(expired_credentials_refused)
{
    clean_env();
    env_temporary_keys(1);
    sleep(2);
    FAILS(RF_EIO, "HTTP 400", "ExpiredToken", "from the environment");
}
END_TEST

/* Instance metadata (the stand-in) handing out credentials that live lifetime_s, and a loader
 * over the private bucket's shards with o's settings, created. */
static rf_loader *imds_loader(int lifetime_s, const opts *o)
{
    char cfg[64];
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", rt_env("RF_TEST_CREDS"), 1);
    unsetenv("AWS_EC2_METADATA_DISABLED");
    snprintf(cfg, sizeof cfg, "{\"lifetime_s\": %d}", lifetime_s);
    stand_in(cfg);
    return rt_create_url(url_of("RF_TEST_S3_BUCKET"), o);
}

/* Take every batch, pause_ms after each, until the loader ends or fails: its last code, the
 * samples taken in *n. */
static int consume(rf_loader *ld, long pause_ms, int *n)
{
    rf_batch *b;
    int rc;
    *n = 0;
    while ((rc = rf_loader_next(ld, &b)) == 0 || rc == RF_EPOCH_END) {
        if (rc)
            continue;
        *n += (int)b->count;
        ck_assert_int_eq(rf_loader_release(ld, b, NULL), 0);
        nanosleep(&(struct timespec){pause_ms / 1000, pause_ms % 1000 * 1000000L}, NULL);
    }
    return rc;
}

/* A run that outlives its credentials several times over (4 s each, a consumer taking 250 ms
 * a batch over 5 epochs, 2 I/O threads signing): instance metadata is asked again before each
 * set expires, and every read succeeds although moto refuses expired ones. */
START_TEST(refresh_before_expiry)
{
    clean_env();
    rf_loader *ld = imds_loader(4, &(opts){.io_threads = 2, .epochs = 5, .retries = 1});
    int n, rc = consume(ld, 250, &n);
    ck_assert_msg(rc == RF_DONE, "%d %s", rc, rf_last_error(ld));
    rf_loader_destroy(ld);
    ck_assert_int_eq(n, 5 * 2 * N_GEN);
    ck_assert_int_ge(creds_log("sum(1 for q in log if q.get(\"issued\"))"), 3);
    /* each fetch came before the credentials it replaced expired */
    ck_assert_int_eq(creds_log("(lambda f: all(b[\"time\"] < calendar.timegm(time.strptime("
                               "a[\"expiration\"], \"%Y-%m-%dT%H:%M:%SZ\")) for a, b in "
                               "zip(f, f[1:])))([q for q in log if q.get(\"issued\")])"), 1);
}
END_TEST

/* Credentials that expire while their source refuses to hand out more: the reads fail with
 * the reason, and nothing goes out unsigned meanwhile. */
START_TEST(refresh_failure_is_an_error)
{
    clean_env();
    rf_loader *ld = imds_loader(2, &(opts){.io_threads = 1, .epochs = 50, .retries = 1});
    stand_in("{\"imds\": \"no-role\"}");
    int n, rc = consume(ld, 100, &n);
    const char *msg = rf_last_error(ld);
    ck_assert_msg(rc < 0 && strstr(msg, "the credentials from instance metadata role "
                                        "ringfeed-reader expired") &&
                  strstr(msg, "no IAM role is attached"), "%d %s", rc, msg);
    rt_no_secrets(msg);
    rf_loader_destroy(ld);
}
END_TEST

/* ---- never unsigned by accident ----------------------------------------------------------- */

/* Without credentials nothing is sent (the stand-in as the S3 endpoint logs every request),
 * listing included; unsigned requests only when AWS_NO_SIGN_REQUEST asks, keys or not. */
START_TEST(no_unsigned_request_by_accident)
{
    clean_env();
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_CREDS"), 1);
    FAILS(-13, "no S3 credentials, so nothing was sent", "AWS_NO_SIGN_REQUEST=YES",
          "environment (unset)", "profile default (no keys in ~/.aws/credentials (absent), "
          "~/.aws/config (absent))", "(off: AWS_EC2_METADATA_DISABLED)");
    rt_create_fails("s3://rf-test/gen/*.tar", &(opts){.retries = 1}, -13,
                    (const char *[]){"no S3 credentials", NULL});
    ck_assert_int_eq(creds_log("len(log)"), 0);
    setenv("AWS_ENDPOINT_URL", rt_env("RF_TEST_S3_ENDPOINT"), 1);
    rt_s3_env(NULL);
    setenv("AWS_NO_SIGN_REQUEST", "YES", 1);
    FAILS(-13, "HTTP 403", "(unsigned, as AWS_NO_SIGN_REQUEST asks)");
    static run r;
    opts o = {.retries = 1};
    rt_collect(url_of("RF_TEST_S3_PUBLIC_BUCKET"), &o, &r);
    ck_assert_uint_eq(r.n, 2 * N_GEN);
    free(r.px);
}
END_TEST

/* ---- the settings, without a request ------------------------------------------------------ */

/* Precedence as botocore's: the environment over the files, a service's endpoint over the
 * global one, the config's services section; comments and sub-keys; the container's URL. */
START_TEST(settings_precedence)
{
    const char *home = clean_env();
    char path[1100];
    snprintf(path, sizeof path, "%s/.aws", home);
    ck_assert_int_eq(rf_test_shell("mkdir -p %s", path), 0);
    file_in(path, "config", "; comment\n[profile p]\nregion = ap-south-1\nendpoint_url = "
                            "http://global\nservices = s\n# comment\n[services s]\ns3 =\n"
                            "  endpoint_url = http://svc-s3\n  addressing_style = path\n"
                            "sts =\n\tendpoint_url = http://svc-sts\n");
    setenv("AWS_PROFILE", "p", 1);
    static rf_s3_settings s;
    rf_s3_settings_read(&s, "", 1000);
    ck_assert_msg(!s.err[0], "%s", s.err);
    ck_assert_str_eq(s.region, "ap-south-1");
    ck_assert_str_eq(s.s3_endpoint, "http://svc-s3");
    ck_assert_str_eq(s.sts_endpoint, "http://svc-sts");
    ck_assert_str_eq(s.imds_endpoint, "http://169.254.169.254");
    setenv("AWS_ENDPOINT_URL", "http://env-global", 1);
    setenv("AWS_ENDPOINT_URL_STS", "http://env-sts", 1);
    setenv("AWS_DEFAULT_REGION", "eu-north-1", 1);
    setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/abc", 1);
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://127.0.0.1:9/ignored", 1);
    rf_s3_settings_read(&s, "", 1000);
    ck_assert_str_eq(s.region, "eu-north-1");
    ck_assert_str_eq(s.s3_endpoint, "http://env-global");
    ck_assert_str_eq(s.sts_endpoint, "http://env-sts");
    ck_assert_str_eq(s.container_url, "http://169.254.170.2/v2/credentials/abc");
    setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
    setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE", "IPv6", 1);
    rf_s3_settings_read(&s, "", 1000);
    ck_assert_str_eq(s.s3_endpoint, "");
    ck_assert_str_eq(s.imds_endpoint, "http://[fd00:ec2::254]");
    ck_assert(s.imds_off);
    ck_assert(!s.profile_key.id[0] && !s.env_key.id[0] && !s.anonymous);
}
END_TEST

/* ---- the data, and the suite ------------------------------------------------------------- */

static int make_data(const char *dir)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/gen", dir);
    return rf_test_make_shards(p, 2, N_GEN, 10, 1, 1, 96) ? 1 : 0;
}

int main(int argc, char **argv)
{
    TCase *tc;
    int rc = rt_main_args(argc, argv, "remote_creds", make_data, &data, &tc);
    if (rc >= 0)
        return rc;
    tcase_add_test(tc, environment_keys_and_session_token);
    tcase_add_test(tc, profile_in_shared_files);
    tcase_add_test(tc, profile_refusals);
    tcase_add_test(tc, web_identity_through_sts);
    tcase_add_test(tc, container_endpoint);
    tcase_add_test(tc, instance_metadata);
    tcase_add_test(tc, chain_order);
    tcase_add_test(tc, expired_credentials_refused);
    tcase_add_test(tc, refresh_before_expiry);
    tcase_add_test(tc, refresh_failure_is_an_error);
    tcase_add_test(tc, no_unsigned_request_by_accident);
    tcase_add_test(tc, settings_precedence);
    return rt_run("remote_creds", tc);
}
