/*
 * ddp_zero3_check -- run under tutti-run: ZeRO-3 (tutti_ddp_gather, tutti_ddp_release,
 * tutti_ddp_param, the layer's gradient buffers) against values every rank can compute
 * (ddp_common.h).
 *
 *   ddp_zero3_check zero3
 *
 * Checked: zero 4, and zero 3 with views, a compressing hook or uneven_inputs, refused naming
 * it; no parameter whole before a gather; four SGD steps with the layer's gradient buffers
 * leave, layer by layer gathered, init - lr * the ranks' average gradients; each rank keeps
 * its 1/n shard (stats); misuse (a second gather, a release of what was not gathered, a bad
 * range, no_sync) refused naming it; gathers of different ranges on different ranks, and one
 * rank refusing, fail every rank naming it with nothing gathered; a checkpoint saved after step 2,
 * step 3, the checkpoint loaded: the saved values back.
 *
 * Exit status 0 means every check on this rank passed.
 */
#include "ddp_common.h"

/* Every layer (parameters 2l, 2l + 1) gathered in turn against want[], then released. */
static void check_gathered(tutti_ddp_t d, float *const *want, const char *what)
{
    for (int l = 0; l < (NP - 1) / 2; l++) {
        if (tutti_ddp_gather(d, 2 * l, 2) != TUTTI_SUCCESS) {
            fail("%s: tutti_ddp_gather(%d, 2): %s", what, 2 * l, tutti_ddp_last_error(d));
            return;
        }
        for (int i = 2 * l; i < 2 * l + 2; i++) {
            const float *v = tutti_ddp_param(d, i);
            for (size_t j = 0; v && j < count_of(i); j++)
                if (fabs(v[j] - want[i][j]) > 1e-5 * (1 + fabs(want[i][j]))) {
                    fail("%s: %s[%zu] = %.9g, want %.9g", what, names[i], j, v[j], want[i][j]);
                    break;
                }
            if (!v)
                fail("%s: tutti_ddp_param(%d) is NULL after its gather", what, i);
        }
        if (l == 0)
            expect_error(d, tutti_ddp_gather(d, 0, 2), "a second tutti_ddp_gather",
                         "gathered already", NULL);
        if (tutti_ddp_release(d, 2 * l, 2) != TUTTI_SUCCESS)
            fail("%s: tutti_ddp_release(%d, 2): %s", what, 2 * l, tutti_ddp_last_error(d));
    }
}

static void mode_zero3(tutti_comm_t comm)
{
    static const struct {
        int zero, views, hook, uneven;
        const char *says;
    } bad[] = {{4, 0, TUTTI_DDP_HOOK_NONE, 0, "must be 0, 1, 2 or 3"},
               {3, 1, TUTTI_DDP_HOOK_NONE, 0, "grad_as_bucket_view"},
               {3, 0, TUTTI_DDP_HOOK_FP16, 0, "fp16 hook"},
               {3, 0, TUTTI_DDP_HOOK_NONE, 1, "uneven_inputs"}};
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    tutti_ddp_stats_t st;
    tutti_ddp_t d = NULL;
    float *want[NP - 1], *saved[NP - 1];
    const float lr = 0.25f;
    size_t total = 0, shard, biggest = 0;
    char path[64];
    double tol;
    int calls = 0;

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        tutti_ddp_config_t c = TUTTI_DDP_CONFIG_INIT;
        c.optim = TUTTI_DDP_OPTIM_SGD;
        c.zero = bad[k].zero;
        c.grad_as_bucket_view = bad[k].views;
        c.hook = bad[k].hook;
        c.uneven_inputs = bad[k].uneven;
        if (tutti_ddp_create(&d, comm, &c) == TUTTI_SUCCESS ||
            !strstr(tutti_ddp_last_error(NULL), bad[k].says))
            fail("zero %d (views %d, hook %d, uneven %d) not refused naming '%s': %s", c.zero,
                 c.grad_as_bucket_view, (int)c.hook, c.uneven_inputs, bad[k].says,
                 tutti_ddp_last_error(NULL));
    }
    check_config(&cfg, "none", 0, &calls, &tol);
    cfg.zero = 3;
    cfg.optim = TUTTI_DDP_OPTIM_SGD;
    cfg.lr = lr;
    d = setup(comm, &cfg, NP - 1, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    check_values(NP - 1);
    for (int i = 0; i < NP - 1; i++) {
        want[i] = malloc(count_of(i) * sizeof(float));
        saved[i] = malloc(count_of(i) * sizeof(float));
        if (!want[i] || !saved[i]) {
            fail("out of memory");
            exit(1);
        }
        memcpy(want[i], vals[i], count_of(i) * sizeof(float));
        total += count_of(i);
        biggest = count_of(i) > biggest ? count_of(i) : biggest;
    }
    if (tutti_ddp_param(d, 0))
        fail("parameter 0 is whole before any gather");
    expect_error(d, tutti_ddp_release(d, 0, 2), "tutti_ddp_release", "were not gathered", NULL);
    expect_error(d, tutti_ddp_gather(d, 5, 2), "tutti_ddp_gather(5, 2)", "not registered", NULL);
    expect_error(d, tutti_ddp_no_sync(d, 1), "tutti_ddp_no_sync", "zero 3", NULL);
    if (nranks > 1) { /* one rank out of step: every rank fails, nothing moves, d stays usable */
        int last = rank == nranks - 1;
        expect_error(d, tutti_ddp_gather(d, last ? 2 : 0, 2), "gathers of different ranges",
                     "different ranges", NULL);
        expect_error(d, tutti_ddp_gather(d, last ? 5 : 0, 2), "a gather one rank refuses",
                     last ? "not registered" : "another rank refused", NULL);
        if (tutti_ddp_param(d, 0) || tutti_ddp_param(d, 2))
            fail("a refused gather left a parameter whole");
    }
    for (int s = 0; s < 4; s++) {
        char what[64];
        if (s == 3) { /* saved after step 2; step 3 is undone by the load */
            for (int i = 0; i < NP - 1; i++)
                memcpy(saved[i], want[i], count_of(i) * sizeof(float));
            if (!tmp_path(comm, path, sizeof(path)) ||
                tutti_ddp_save(d, path, NULL, 0) != TUTTI_SUCCESS) {
                fail("tutti_ddp_save: %s", tutti_ddp_last_error(d));
                return;
            }
        }
        if (backward(d, s, 1, 0, -1) != TUTTI_SUCCESS || tutti_ddp_finish(d) != TUTTI_SUCCESS ||
            tutti_ddp_step(d) != TUTTI_SUCCESS) {
            fail("step %d: %s", s, tutti_ddp_last_error(d));
            return;
        }
        for (int i = 0; i < NP - 1; i++)
            for (size_t j = 0; j < count_of(i); j++)
                want[i][j] -= lr * (float)grad_avg(s, i, j);
        snprintf(what, sizeof(what), "after step %d", s);
        check_gathered(d, want, what);
    }
    if (tutti_ddp_load(d, path, NULL, 0, NULL) != TUTTI_SUCCESS)
        fail("tutti_ddp_load: %s", tutti_ddp_last_error(d));
    else
        check_gathered(d, saved, "the checkpoint of step 2, loaded after step 3");
    if (rank == 0)
        unlink(path);
    shard = (total + (size_t)nranks - 1) / (size_t)nranks;
    tutti_ddp_stats(d, &st);
    if (st.param_bytes != shard * sizeof(float) || st.shard_bytes != shard * sizeof(float) ||
        st.optim_bytes > shard * sizeof(float) ||
        st.gathered_peak_bytes < biggest * sizeof(float) ||
        st.gathered_peak_bytes >= total * sizeof(float) || st.grad_peak_bytes == 0)
        fail("stats: parameters %zu, gradient shard %zu, optimizer %zu bytes (the shard is %zu), "
             "gathered at most %zu (a layer is up to %zu, the model %zu), gradient buffers at "
             "most %zu",
             st.param_bytes, st.shard_bytes, st.optim_bytes, shard * sizeof(float),
             st.gathered_peak_bytes, biggest * sizeof(float), total * sizeof(float),
             st.grad_peak_bytes);
    for (int i = 0; i < NP - 1; i++) {
        free(want[i]);
        free(saved[i]);
    }
    tutti_ddp_destroy(d);
}

int main(int argc, char **argv)
{
    tutti_comm_t comm = report_join("ddp_zero3_check");

    if (argc != 2 || strcmp(argv[1], "zero3") != 0) {
        fprintf(stderr, "usage: ddp_zero3_check zero3\n");
        return 2;
    }
    mode_zero3(comm);
    return ddp_end(comm, "ddp_zero3_check", "zero3");
}
