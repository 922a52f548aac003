/* s3_creds.c — the credential chain: its order, the source it settles on, refresh and locking
 * (s3_creds.h's DESIGN). The sources themselves are s3_profile.c's and s3_fetch.c's. */
#include "io/s3_creds.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { UNWALKED = 0, READY, FAILED };
enum source { SRC_STATIC = 0, SRC_WEB, SRC_CONTAINER, SRC_IMDS };

struct rf_s3_creds {
    rf_s3_settings *set;         /* read-only after create */
    pthread_mutex_t fetch_mu;    /* held while a source is asked */
    pthread_mutex_t mu;          /* guards what follows */
    int state;
    enum source src;             /* the source the chain settled on */
    rf_s3_key key;
    int64_t refresh_ms;          /* Unix ms when key is fetched again; 0: never */
    int64_t usable_ms;           /* Unix ms from which key is not signed with; 0: always */
    int64_t next_try_ms;         /* after a failed refresh, not before this */
    char why[RF_ERRMSG_MAX];     /* FAILED: the chain's message; else the last failed refresh */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts); /* expiries are wall-clock times */
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

rf_s3_creds *rf_s3_creds_new(rf_s3_settings *s)
{
    rf_s3_creds *c = calloc(1, sizeof *c);
    if (!c) {
        free(s);
        return NULL;
    }
    c->set = s;
    pthread_mutex_init(&c->fetch_mu, NULL);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

void rf_s3_creds_free(rf_s3_creds *c)
{
    if (!c)
        return;
    pthread_mutex_destroy(&c->fetch_mu);
    pthread_mutex_destroy(&c->mu);
    memset(c->set, 0, sizeof *c->set); /* keys read from the environment and the files */
    free(c->set);
    memset(&c->key, 0, sizeof c->key);
    free(c);
}

/* ---- the walk ---- */

/* A shared file's path as the message shows it: ~/... under HOME, "(absent)" after it when
 * it is not there. */
static void shown_file(char *out, size_t cap, const char *path, int read)
{
    const char *home = getenv("HOME");
    size_t n = home ? strlen(home) : 0;
    if (n && strncmp(path, home, n) == 0 && path[n] == '/')
        snprintf(out, cap, "~%s%s", path + n, read ? "" : " (absent)");
    else
        snprintf(out, cap, "%s%s", path[0] ? path : "(no HOME)", read ? "" : " (absent)");
}

/* The message when no source had credentials: each one tried and why it had none. */
static void none_found(const rf_s3_settings *s, const char *imds_why, char *why, size_t cap)
{
    char cred[RF_ERRMSG_MAX / 4], config[RF_ERRMSG_MAX / 4];
    shown_file(cred, sizeof cred, s->cred_file, s->cred_file_read);
    shown_file(config, sizeof config, s->config_file, s->config_file_read);
    snprintf(why, cap, "no S3 credentials, so nothing was sent (AWS_NO_SIGN_REQUEST=YES reads a "
             "public bucket unsigned); tried: environment (unset), web identity (unset), "
             "profile %s (no keys in %s, %s), container (unset), %s", s->profile, cred, config,
             s->imds_off ? "instance metadata (off: AWS_EC2_METADATA_DISABLED)" : imds_why);
}

/* Walk the chain: 0 with *k and *src, or -1 with why. The first source that is configured
 * decides, as in botocore: one that fails (a web identity STS refuses, a container endpoint
 * that does not answer) is an error, not a reason to take another identity further down;
 * only instance metadata, the last, may have nothing. */
static int walk(const rf_s3_settings *s, rf_s3_key *k, enum source *src, char *why, size_t cap)
{
    *src = SRC_STATIC;
    if (s->err[0]) {
        snprintf(why, cap, "%s", s->err);
        return -1;
    }
    if (s->env_key.id[0]) {
        *k = s->env_key;
        return 0;
    }
    if (s->role_arn[0]) {
        *src = SRC_WEB;
        return rf_s3_fetch_web_identity(s, k, why, cap);
    }
    if (s->unsupported[0]) {
        snprintf(why, cap, "profile %s gets its credentials through %s, which ringfeed does not "
                 "read: put keys in the environment (eval \"$(aws configure "
                 "export-credentials --profile %s --format env)\") or the credentials file",
                 s->profile, s->unsupported, s->profile);
        return -1;
    }
    if (s->profile_key.id[0]) {
        *k = s->profile_key;
        return 0;
    }
    if (s->container_url[0]) {
        *src = SRC_CONTAINER;
        return rf_s3_fetch_container(s, k, why, cap);
    }
    char imds_why[RF_ERRMSG_MAX / 2] = "";
    if (!s->imds_off && rf_s3_fetch_imds(s, k, imds_why, sizeof imds_why) == 0) {
        *src = SRC_IMDS;
        return 0;
    }
    none_found(s, imds_why, why, cap);
    return -1;
}

static int refetch(const rf_s3_settings *s, enum source src, rf_s3_key *k, char *why,
                   size_t cap)
{
    if (src == SRC_WEB)
        return rf_s3_fetch_web_identity(s, k, why, cap);
    if (src == SRC_CONTAINER)
        return rf_s3_fetch_container(s, k, why, cap);
    return rf_s3_fetch_imds(s, k, why, cap);
}

/* ---- refresh ---- */

/* When credentials fetched at now are to be fetched again: RF_S3_REFRESH_AHEAD_MS before they
 * expire, or halfway to it for short-lived ones (which would otherwise be fetched at every
 * request); 0 for credentials that do not expire. */
/* The time `cap` ms before k expires, or halfway there from now when that is nearer the
 * expiry; 0 for credentials that do not expire. */
static int64_t before_expiry(const rf_s3_key *k, int64_t now, int64_t cap)
{
    if (!k->expires_ms)
        return 0;
    int64_t ahead = (k->expires_ms - now) / 2;
    ahead = ahead < cap ? ahead : cap;
    return k->expires_ms - (ahead > 0 ? ahead : 0);
}

/* Under mu: whether a source is to be asked now. */
static int due(const rf_s3_creds *c, int64_t now)
{
    return c->state == UNWALKED || (c->state == READY && c->refresh_ms &&
                                    now >= c->refresh_ms && now >= c->next_try_ms);
}

static int valid(const rf_s3_creds *c, int64_t now)
{
    return c->state == READY && (!c->usable_ms || now < c->usable_ms);
}


/* With fetch_mu held: walk the chain, or ask its source again, if that is still due. */
static void fetch(rf_s3_creds *c)
{
    pthread_mutex_lock(&c->mu);
    int is_due = due(c, now_ms()), state = c->state;
    enum source src = c->src;
    pthread_mutex_unlock(&c->mu);
    if (!is_due)
        return; /* another thread fetched while this one waited */
    rf_s3_key *k = calloc(1, sizeof *k);
    char why[RF_ERRMSG_MAX] = "no memory";
    int rc = !k ? -1 : state == UNWALKED ? walk(c->set, k, &src, why, sizeof why)
                                         : refetch(c->set, src, k, why, sizeof why);
    pthread_mutex_lock(&c->mu);
    int64_t now = now_ms();
    if (rc == 0) {
        c->key = *k;
        c->src = src;
        c->state = READY;
        c->refresh_ms = before_expiry(k, now, RF_S3_REFRESH_AHEAD_MS);
        c->usable_ms = before_expiry(k, now, RF_S3_EXPIRY_MARGIN_MS); /* s3_creds.h */
        c->next_try_ms = 0;
    } else {
        c->state = state == UNWALKED ? FAILED : state;
        c->next_try_ms = now + RF_S3_RETRY_MS;
        snprintf(c->why, sizeof c->why, "%s", why);
    }
    pthread_mutex_unlock(&c->mu);
    if (k)
        memset(k, 0, sizeof *k);
    free(k);
}

/* Under mu: the current credentials, or why there are none. */
static int current(const rf_s3_creds *c, int64_t now, rf_s3_key *k, char *why, size_t cap)
{
    if (valid(c, now)) {
        *k = c->key;
        return RF_S3_CREDS_OK;
    }
    if (c->state != READY) {
        snprintf(why, cap, "%s", c->why);
        return RF_S3_CREDS_NONE;
    }
    if (now >= c->key.expires_ms)
        snprintf(why, cap, "the credentials from %s expired %lld s ago and could not be "
                 "fetched again: %s", c->key.source,
                 (long long)((now - c->key.expires_ms) / 1000), c->why);
    else
        snprintf(why, cap, "the credentials from %s expired (within %lld ms of their expiry, "
                 "too close to sign a request with) and could not be fetched again: %s",
                 c->key.source, (long long)(c->key.expires_ms - now), c->why);
    return RF_S3_CREDS_STALE;
}

int rf_s3_creds_get(rf_s3_creds *c, rf_s3_key *k, char *why, size_t cap)
{
    pthread_mutex_lock(&c->mu);
    int64_t now = now_ms();
    int is_due = due(c, now), usable = valid(c, now);
    pthread_mutex_unlock(&c->mu);
    /* With a valid key in hand, a thread does not wait for another's refresh. */
    if (is_due && (usable ? pthread_mutex_trylock(&c->fetch_mu) == 0
                          : pthread_mutex_lock(&c->fetch_mu) == 0)) {
        fetch(c);
        pthread_mutex_unlock(&c->fetch_mu);
    }
    pthread_mutex_lock(&c->mu);
    int rc = current(c, now_ms(), k, why, cap);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
