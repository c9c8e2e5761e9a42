/*
 * ddp_join_check -- run under tutti-run: uneven inputs (tutti_ddp_join), against values every
 * rank can compute for every other rank (ddp_common.h).
 *
 *   ddp_join_check join HOOK VIEWS OPT
 *       two epochs in which ranks train different numbers of steps (rank 0 none in the
 *       first) and then call tutti_ddp_join. After each step every gradient is the sum of the
 *       training ranks' over the number of ranks; after each join every rank holds the same
 *       parameters, those of plain SGD (lr 0.25) on those averages; the buffers are those of
 *       the highest rank training in each step, and after a join those of the last one.
 *       OPT: app (the application updates the parameters), sgd0, sgd1, sgd2 (tutti_ddp_step
 *       with that zero; sgd2 reduces each rank only its shard of the gradients, so there
 *       only the parameters are checked). HOOK: none, fp16, bf16, int8, user, or topk or
 *       powersgd, approximations, where only the ranks' agreement is checked; VIEWS: 0 or 1
 *   ddp_join_check errors
 *       join without uneven_inputs, with no_sync on and mid-step fails naming the cause; then
 *       every rank joins at once
 *
 * Exit status 0 means every check on this rank passed.
 */
#include "ddp_common.h"

/* Uneven inputs: the steps rank r trains in epoch e. In epoch 0 rank 0 trains none, so it
 * shadows the first step, whose bucket order it broadcasts; in epoch 1 rank 0 trains longest. */
static int steps_of(int e, int r)
{
    return e == 0 ? (r ? r + 1 : 0) : nranks - r;
}

/* Step s of epoch e is global step 10 e + s: the training ranks' gradients over nranks. */
static double join_avg(int gs, int i, size_t j)
{
    double sum = 0;
    for (int r = 0; r < nranks; r++)
        if (gs % 10 < steps_of(gs / 10, r))
            sum += grad_value(gs, r, i, j);
    return sum / nranks;
}

/* The highest rank training in global step gs: the one whose buffers every rank takes. */
static int top_rank(int gs)
{
    int top = -1;
    for (int r = 0; r < nranks; r++)
        if (gs % 10 < steps_of(gs / 10, r))
            top = r;
    return top;
}

/* Every rank holds bitwise the same parameters (a hash of them, all-gathered). */
static void check_same_params(tutti_comm_t comm, const char *what)
{
    uint64_t h = 1469598103934665603ull, *all = calloc((size_t)nranks, sizeof(*all));
    for (int i = 0; i < NP - 1; i++) {
        const unsigned char *b = (const unsigned char *)vals[i];
        for (size_t k = 0; k < count_of(i) * sizeof(float); k++)
            h = (h ^ b[k]) * 1099511628211ull;
    }
    if (!all || tutti_all_gather(&h, all, 1, TUTTI_UINT64, comm, NULL) != TUTTI_SUCCESS) {
        fail("%s: all-gathering the parameters' hashes: %s", what, tutti_comm_last_error(comm));
        free(all);
        return;
    }
    for (int r = 1; r < nranks; r++)
        if (all[r] != all[0])
            fail("%s: rank %d's parameters differ from rank 0's", what, r);
    free(all);
}

static void mode_join(tutti_comm_t comm, const char *hook, int views, const char *opt)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    const double lr = 0.25;
    double tol, *want[NP - 1];
    long long total = 0;
    tutti_ddp_stats_t st;
    int calls = 0, app = !strcmp(opt, "app"), last_gs = -1;

    check_config(&cfg, hook, views, &calls, &tol);
    cfg.uneven_inputs = 1;
    if (!app) {
        if (strncmp(opt, "sgd", 3) != 0 || opt[3] < '0' || opt[3] > '2' || opt[4]) {
            fprintf(stderr, "ddp_check: join: OPT is app, sgd0, sgd1 or sgd2, not %s\n", opt);
            exit(2);
        }
        cfg.optim = TUTTI_DDP_OPTIM_SGD;
        cfg.lr = lr;
        cfg.zero = opt[3] - '0';
    }
    tutti_ddp_t d = setup(comm, &cfg, NP - 1, 0);
    add_buffers(d, buf_counts[0]);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    check_values(NP - 1);
    for (int i = 0; i < NP - 1; i++) {
        want[i] = malloc(count_of(i) * sizeof(double));
        if (!want[i]) {
            fail("out of memory");
            exit(1);
        }
        for (size_t j = 0; j < count_of(i); j++)
            want[i][j] = (double)((long)j % 1000);
    }
    for (int e = 0; e < 2; e++) {
        int most =
            steps_of(e, nranks - 1) > steps_of(e, 0) ? steps_of(e, nranks - 1) : steps_of(e, 0);
        char what[96];
        tutti_result_t rc;
        for (int s = 0; s < most; s++) {
            int gs = 10 * e + s;
            for (int i = 0; i < NP - 1; i++)
                for (size_t j = 0; j < count_of(i); j++)
                    want[i][j] -= lr * join_avg(gs, i, j);
            last_gs = gs;
            if (s >= steps_of(e, rank))
                continue;    /* this rank has joined: its tutti_ddp_join runs this step */
            set_buffers(gs); /* this rank's forward pass */
            if (backward(d, gs, views, 0, -1) != TUTTI_SUCCESS ||
                tutti_ddp_finish(d) != TUTTI_SUCCESS) {
                fail("epoch %d step %d: %s", e, s, tutti_ddp_last_error(d));
                return;
            }
            snprintf(what, sizeof(what), "epoch %d step %d, hook %s, views %d, %s", e, s, hook,
                     views, opt);
            if (tol >= 0 && cfg.zero < 2) /* zero 2 leaves each rank its shard's average */
                check_against(d, views, gs, gs, tol, what, join_avg);
            check_buffers(gs, top_rank(gs), what);
            if (!app && tutti_ddp_step(d) != TUTTI_SUCCESS) {
                fail("%s: tutti_ddp_step: %s", what, tutti_ddp_last_error(d));
                return;
            }
            for (int i = 0; i < NP - 1 && app; i++) {
                const float *g = grad_ptr(d, i, views);
                for (size_t j = 0; j < count_of(i); j++)
                    vals[i][j] -= (float)lr * g[j];
            }
        }
        rc = tutti_ddp_join(d);
        printf("rank %d: epoch %d: trained %d of %d steps, joined: %s\n", rank, e,
               steps_of(e, rank), most, rc == TUTTI_SUCCESS ? "ok" : tutti_ddp_last_error(d));
        if (rc != TUTTI_SUCCESS) {
            fail("epoch %d: tutti_ddp_join: %s", e, tutti_ddp_last_error(d));
            return;
        }
        total += most;
        snprintf(what, sizeof(what), "after epoch %d's join, hook %s, views %d, %s", e, hook, views,
                 opt);
        check_same_params(comm, what);
        check_buffers(last_gs, last_gs < 0 ? 0 : top_rank(last_gs), what);
        /* Float steps against double ones: a few ulps of values below 1000 a step, plus the
         * hook's error on each gradient (|g| <= 3) times lr. */
        for (int i = 0; i < NP - 1 && tol >= 0; i++)
            for (size_t j = 0; j < count_of(i); j++) {
                double lim = 1e-5 * (1 + fabs(want[i][j])) + (double)total * lr * tol * 4;
                if (fabs(vals[i][j] - want[i][j]) > lim) {
                    fail("%s: %s[%zu] = %.9g, SGD on the training ranks' averages gives %.9g", what,
                         names[i], j, vals[i][j], want[i][j]);
                    break;
                }
            }
    }
    tutti_ddp_stats(d, &st);
    if (st.steps != total)
        fail("stats: %lld steps; %lld were synchronised (joined ones included)", st.steps, total);
    for (int i = 0; i < NP - 1; i++)
        free(want[i]);
    tutti_ddp_destroy(d);
}

static void mode_join_errors(tutti_comm_t comm)
{
    tutti_ddp_config_t cfg = TUTTI_DDP_CONFIG_INIT;
    tutti_ddp_t d;
    tutti_result_t rc;

    cfg.bucket_cap_mb = 0.1;
    cfg.first_bucket_mb = 0.005;
    d = setup(comm, &cfg, NP - 1, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    expect_error(d, tutti_ddp_join(d), "tutti_ddp_join without uneven_inputs", "uneven_inputs",
                 NULL);
    tutti_ddp_destroy(d);
    for (int i = 0; i < NP - 1; i++) {
        free(vals[i]);
        free(grads[i]);
    }

    cfg.uneven_inputs = 1;
    d = setup(comm, &cfg, NP - 1, 0);
    if (tutti_ddp_init(d) != TUTTI_SUCCESS) {
        fail("tutti_ddp_init: %s", tutti_ddp_last_error(d));
        return;
    }
    tutti_ddp_no_sync(d, 1);
    expect_error(d, tutti_ddp_join(d), "tutti_ddp_join with no_sync on", "no_sync", NULL);
    tutti_ddp_no_sync(d, 0);
    /* Mid-step: every parameter but l0.weight (the last one backward marks) is ready. */
    rc = backward(d, 0, 0, 0, 0);
    if (rc != TUTTI_SUCCESS) {
        fail("backward: %s", tutti_ddp_last_error(d));
        return;
    }
    expect_error(d, tutti_ddp_join(d), "tutti_ddp_join mid-step", "in flight", NULL);
    for (size_t j = 0; j < count_of(0); j++)
        grads[0][j] = grad_value(0, rank, 0, j);
    if (tutti_ddp_grad_ready(d, 0) != TUTTI_SUCCESS || tutti_ddp_finish(d) != TUTTI_SUCCESS) {
        fail("ending the step: %s", tutti_ddp_last_error(d));
        return;
    }
    check_grads(d, 0, 0, 0, 1e-6, "the step the refused joins interrupted");
    if (tutti_ddp_join(d) != TUTTI_SUCCESS)
        fail("tutti_ddp_join, every rank at once: %s", tutti_ddp_last_error(d));
    check_same_params(comm, "after every rank joined at once");
    tutti_ddp_destroy(d);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    tutti_comm_t comm = report_join("ddp_join_check");

    if (!strcmp(mode, "join") && argc == 5)
        mode_join(comm, argv[2], atoi(argv[3]), argv[4]);
    else if (!strcmp(mode, "errors"))
        mode_join_errors(comm);
    else {
        fprintf(stderr, "usage: ddp_join_check join HOOK {0,1} {app,sgd0,sgd1,sgd2} | errors\n");
        return 2;
    }
    return ddp_end(comm, "ddp_join_check", mode);
}
