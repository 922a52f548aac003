/* schedule.c — the decode scheduler's controller (schedule.h): rf_sched_step, a pure
 * function of one window's measurements that moves the shares, and when a window is full.
 * Runs on whichever thread steps it (the GPU decode stage's, gpu_schedule.c; the tests'). */
#include "pipeline/schedule.h"

/* The CPU-only start: training stays first until a window shows that the GPU paths make the
 * consumer faster. The engines' part starts inside the plateau measured by hand
 * (docs/gpu-decode.md), probed in small steps so the first probe does not leave it. */
void rf_sched_init(rf_sched *s)
{
    *s = (rf_sched){.at = {0, RF_SCHED_HW_START},
                    .step = {RF_SCHED_STEP_START, RF_SCHED_STEP_PROBE}, .dir = {1, 1}};
}

/* Coordinate c's margin and largest step. A step of the GPU share changes the period by far
 * more than a window's noise; the engines' part gains a few percent inside a wide plateau, so
 * it gets a wider margin and smaller steps, or noise walks it out of the plateau. */
static uint32_t margin(uint32_t c)
{
    return c ? RF_SCHED_MARGIN_HW : RF_SCHED_MARGIN;
}

static uint32_t step_max(uint32_t c)
{
    return c ? RF_SCHED_STEP_MAX_HW : RF_SCHED_STEP_MAX;
}

/* The shares the decode threads route by: the accepted point, or the probe. */
static void publish(rf_sched *s)
{
    uint32_t gpu = s->at[0], part = s->at[1];
    if (s->probing)
        *(s->coord ? &part : &gpu) = s->probe;
    s->gpu = gpu;
    s->hw = s->engines == RF_HW_ENGINES_READY && gpu >= RF_SCHED_HW_MIN_GPU
                ? gpu * part / RF_SCHED_ONE : 0;
}

/* The engines' part means something only while they are ready and the GPU share is at least
 * RF_SCHED_HW_MIN_GPU. Below it the GPU share is a training loop's top-up, which the kernels
 * take: engine images slow a training step on the same GPU far more per image. */
static int coord_usable(const rf_sched *s, uint32_t c)
{
    return c == 0 || (s->engines == RF_HW_ENGINES_READY && s->at[0] >= RF_SCHED_HW_MIN_GPU);
}

/* The step of a probe up from the CPU alone when the consumer waited less than half the
 * window (a training loop): as large as its waits say the loader is short. Waiting a share f
 * means the loader must be 1/(1-f) times faster; an image moved to the kernels saves two thirds
 * of its CPU time, so about 1.5 f must move: the step is 2 f, at least RF_SCHED_STEP_PROBE.
 * A loop that mostly waits, or a climb from a share above 0, keeps the climb's own step. */
static void size_step_up(rf_sched *s, const rf_sched_in *in)
{
    uint64_t span = in->period_ns * in->batches;
    uint64_t f = span ? RF_MIN(in->wait_ns, span) * RF_SCHED_ONE / span : RF_SCHED_ONE;
    if (s->dir[0] < 0 || s->at[0] != 0 || 2 * f >= RF_SCHED_ONE)
        return;
    s->step[0] = (uint32_t)RF_MAX(2 * f, (uint64_t)RF_SCHED_STEP_PROBE);
}

/* Coordinate c moved by its step in its direction, within the range; 0 when it cannot move
 * that way (at the bound it points to, or the engines' part while it means nothing). */
static int probe(rf_sched *s, uint32_t c)
{
    int64_t to = (int64_t)s->at[c] + s->dir[c] * (int64_t)s->step[c];
    to = to < 0 ? 0 : to > RF_SCHED_ONE ? RF_SCHED_ONE : to;
    if ((uint32_t)to == s->at[c] || !coord_usable(s, c))
        return 0;
    s->coord = c, s->probe = (uint32_t)to, s->probing = 1;
    return 1;
}

/* After a probe that gained nothing: the other direction, at the same step. */
static int probe_other_way(rf_sched *s)
{
    if (s->tried)
        return 0;
    s->tried = 1;
    s->dir[s->coord] = -s->dir[s->coord];
    return probe(s, s->coord);
}

/* A round of coordinate c: probes from the accepted point, starting with a step that can
 * show a gradient above the noise, either way. */
static int start_round(rf_sched *s, uint32_t c)
{
    s->step[c] = RF_MAX(s->step[c], RF_SCHED_STEP_PROBE);
    s->tried = 0;
    s->coord = c;
    return probe(s, c) || probe_other_way(s);
}

/* The next hold: RF_SCHED_HOLD windows for the first two in a row whose probes found no
 * gain (the first follows the climb, whose steps are still large), then twice as long each
 * time, to RF_SCHED_HOLD << RF_SCHED_HOLD_DOUBLINGS. */
static uint32_t hold_length(rf_sched *s)
{
    uint32_t k = s->holds ? s->holds - 1 : 0;
    s->holds = RF_MIN(s->holds + 1, RF_SCHED_HOLD_DOUBLINGS + 1);
    return RF_SCHED_HOLD << RF_MIN(k, RF_SCHED_HOLD_DOUBLINGS);
}

/* Coordinate `coord` gained nothing this round: the other one's turn, or, when both gained
 * nothing in a row, a hold at the accepted point (hold_length: each probe costs a window off
 * the best point). A loader that starts keeping up is noticed at the next window whatever the
 * hold; an accepted probe or a change of the engines' state starts the doubling over. */
static void end_round(rf_sched *s)
{
    s->probing = 0;
    if (++s->quiet < 2 && start_round(s, s->coord ^ 1))
        return;
    s->quiet = 0; /* (the other coordinate could not move either) */
    s->coord ^= 1;
    s->hold = hold_length(s);
}

/* The probe measured `p` against the accepted point's ref_ns. Faster: accepted, and the next
 * probe goes the same way with twice the step. Slower: the other way with half the step,
 * until the step is below its minimum. Either way, a probe that cannot go on in its new
 * direction (a bound) ends the round: the other way was just measured slower. Within the
 * margin: the other way at the same step, and if that is flat too, the point stays and the
 * next round starts with twice the step (a small gradient shows at a larger one). */
static void judge(rf_sched *s, uint64_t p)
{
    uint32_t c = s->coord;
    s->probing = 0;
    if (p * RF_SCHED_ONE < s->ref_ns * (RF_SCHED_ONE - margin(c))) {
        s->at[c] = s->probe, s->ref_ns = p, s->quiet = 0, s->tried = 0, s->holds = 0;
        s->step[c] = RF_MIN(s->step[c] * 2, step_max(c));
        if (!probe(s, c)) {
            /* at a bound: a later probe back from it asks whether a little less is better,
             * not whether half as much is */
            s->step[c] = RF_SCHED_STEP_PROBE;
            end_round(s);
        }
    } else if (p * RF_SCHED_ONE > s->ref_ns * (RF_SCHED_ONE + margin(c))) {
        s->dir[c] = -s->dir[c], s->step[c] /= 2, s->tried = 0;
        if (s->step[c] < RF_SCHED_STEP_MIN || !probe(s, c))
            s->step[c] = RF_MAX(s->step[c], RF_SCHED_STEP_MIN), end_round(s);
    } else if (!probe_other_way(s)) {
        /* flat both ways at this step: the next round looks further */
        s->step[c] = RF_MIN(s->step[c] * 2, step_max(c));
        end_round(s);
    }
}

/* The loader keeps up: the consumer waited for at most one batch in RF_SCHED_KEEPS_UP, or its
 * waits came to at most RF_SCHED_MARGIN of the window. Removing waits that small cannot make
 * the loop faster by more than the margin a probe is judged by, so a probe could only cost. */
static int keeps_up(const rf_sched_in *in)
{
    uint64_t span = in->period_ns * in->batches;
    return in->waited * RF_SCHED_KEEPS_UP <= in->batches ||
           in->wait_ns * RF_SCHED_ONE <= span * RF_SCHED_MARGIN;
}

void rf_sched_step(rf_sched *s, const rf_sched_in *in)
{
    if (!in->batches || !in->period_ns)
        return;
    if (in->engines != s->engines) {
        /* The plant changed under the measurement: re-measure the accepted point (a window
         * measured under a probe says nothing of it). */
        int probed = s->probing;
        s->engines = in->engines, s->ref_ns = 0, s->probing = 0, s->hold = 0, s->holds = 0;
        /* what changed is the engines' part's worth: the next round probes it first */
        s->coord = 1;
        if (probed) {
            publish(s);
            return;
        }
    }
    if (keeps_up(in)) {
        /* Training stays first: any GPU share takes GPU time from the step. The share steps
         * down: by half the step after loader-bound windows (climb and descent close in on
         * the share at which the loader just keeps up), by twice the step for each next one
         * in a row. At 0 nothing is probed until the consumer waits again. */
        uint32_t base = s->probing && s->coord == 0 ? s->probe : s->at[0];
        /* A probe up that made the loader keep up without a gain beyond the margin: the
         * descent starts from the accepted point and a hold follows, so a loader that only
         * now and then falls behind does not pay a slow window every few. */
        int no_gain = s->probing && s->coord == 0 && s->probe > s->at[0] && s->ref_ns &&
                      in->period_ns * RF_SCHED_ONE >= s->ref_ns * (RF_SCHED_ONE - RF_SCHED_MARGIN);
        if (no_gain)
            base = s->at[0];
        if (base > 0)
            s->step[0] = s->kept_up ? RF_MIN(s->step[0] * 2, RF_SCHED_STEP_MAX)
                                    : RF_MAX(s->step[0] / 2, RF_SCHED_STEP_MIN);
        else if (no_gain) /* up from the CPU alone: the next probe smaller, and later */
            s->step[0] = RF_MAX(s->step[0] / 2, RF_SCHED_STEP_PROBE);
        s->at[0] = base > s->step[0] ? base - s->step[0] : 0;
        s->kept_up = 1, s->dir[0] = 1, s->probing = 0, s->ref_ns = 0, s->coord = 0;
        if (no_gain)
            s->hold = hold_length(s);
        else
            s->holds = 0;
    } else if (s->hold && --s->hold) {
        /* held: the accepted point stays */
    } else if (!s->ref_ns || !s->probing) {
        s->kept_up = 0;
        s->ref_ns = in->period_ns; /* the accepted point measured (again): probe from it */
        s->quiet = 0;
        size_step_up(s, in);
        if (!start_round(s, s->coord))
            end_round(s);
    } else {
        judge(s, in->period_ns);
    }
    publish(s);
}

int rf_sched_window_full(const rf_sched_in *w, int first, int short_windows)
{
    if (first && w->batches >= RF_SCHED_WINDOW_START && w->waited == w->batches &&
        2 * w->wait_ns >= w->period_ns)
        return 1;
    return w->batches >= RF_SCHED_WINDOW &&
           (w->period_ns >= RF_SCHED_WINDOW_NS || w->batches >= 8 * RF_SCHED_WINDOW ||
            short_windows);
}
