/*
 * test_bootstrap.c -- strangers at the rendezvous and at a rank's bootstrap listener: wrong
 * secrets, garbage, truncated hellos, silent connections and huge lengths are dropped while
 * the real ranks join and talk; refusals (duplicate rank, nranks mismatch, timeout) come back
 * to the rank with a message.
 */
#include "../../../lib/boot/bootstrap.h"
#include "../../../lib/boot/socket.h"
#include "../../../lib/base/wait.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int dial(const struct tt_addr *a)
{
    int fd;
    cr_assert_eq(tt_sock_connect(a, tt_now() + 5, &fd), TUTTI_SUCCESS, "%s", tutti_last_error());
    return fd;
}

static void send_bytes(int fd, const void *p, size_t n)
{
    cr_assert_eq(tt_sock_write(fd, p, n, tt_now() + 5), TUTTI_SUCCESS);
}

struct joiner {
    struct tt_id_info id;
    int rank, nranks;
    double timeout;
    tutti_result_t rc;
    struct tt_boot *b;
    char msg[512];
};

static void *join_main(void *arg)
{
    struct joiner *j = arg;
    j->rc = tt_boot_init(&j->id, j->rank, j->nranks, j->timeout, &j->b);
    snprintf(j->msg, sizeof(j->msg), "%s", tutti_last_error());
    return NULL;
}

static void new_root(struct tt_id_info *id)
{
    cr_assert_eq(tt_addr_resolve("127.0.0.1", 0, &id->root), TUTTI_SUCCESS);
    for (int i = 0; i < TT_SECRET_BYTES; i++)
        id->secret[i] = (unsigned char)(rand() & 0xff);
    cr_assert_eq(tt_boot_root_start(&id->root, id->secret, 20), TUTTI_SUCCESS);
}

static void start(struct joiner *j, pthread_t *t, const struct tt_id_info *id, int rank, int nranks,
                  double timeout)
{
    memset(j, 0, sizeof(*j));
    j->id = *id;
    j->rank = rank;
    j->nranks = nranks;
    j->timeout = timeout;
    pthread_create(t, NULL, join_main, j);
}

Test(bootstrap, strangers_at_the_rendezvous_do_not_join_or_stall_it, .timeout = 60)
{
    struct tt_id_info id;
    struct joiner j[2];
    pthread_t t[2];
    unsigned char hello[TT_HELLO_ROOT_LEN] = {0}, garbage[TT_HELLO_ROOT_LEN];
    int fds[4];

    new_root(&id);
    /* A silent connection, garbage, a truncated hello, and a wrong secret claiming rank 0. */
    fds[0] = dial(&id.root);
    fds[1] = dial(&id.root);
    memset(garbage, 0x41, sizeof(garbage));
    send_bytes(fds[1], garbage, sizeof(garbage));
    fds[2] = dial(&id.root);
    send_bytes(fds[2], "TTBH", 4);
    close(fds[2]);
    fds[3] = dial(&id.root);
    memcpy(hello, "TTBH", 4);
    memset(hello + 4, 0x5a, TT_SECRET_BYTES);
    tt_put32(hello + 36, 0);
    tt_put32(hello + 40, 2);
    tt_addr_pack(&id.root, hello + 44);
    send_bytes(fds[3], hello, sizeof(hello));

    start(&j[0], &t[0], &id, 0, 2, 20);
    start(&j[1], &t[1], &id, 1, 2, 20);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    cr_assert_eq(j[0].rc, TUTTI_SUCCESS, "rank 0: %s", j[0].msg);
    cr_assert_eq(j[1].rc, TUTTI_SUCCESS, "rank 1: %s", j[1].msg);

    /* The ranks talk to each other; the impostor got "wrong secret", then a closed socket. */
    char got[6] = {0};
    cr_assert_eq(tt_boot_send(j[1].b, 0, 7, "hello", 6), TUTTI_SUCCESS);
    cr_assert_eq(tt_boot_recv(j[0].b, 1, 7, got, 6), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_str_eq(got, "hello");
    unsigned char reply[TT_REPLY_HDR_LEN];
    char why[256] = {0}, c;
    cr_assert_eq(tt_sock_read(fds[3], reply, sizeof(reply), tt_now() + 5), TUTTI_SUCCESS);
    cr_assert(memcmp(reply, "TTBR", 4) == 0 && tt_get32(reply + 4) == TUTTI_ERR_INVALID_ARG);
    cr_assert(tt_get32(reply + 8) < sizeof(why));
    cr_assert_eq(tt_sock_read(fds[3], why, tt_get32(reply + 8), tt_now() + 5), TUTTI_SUCCESS);
    cr_assert(strstr(why, "wrong secret"), "%s", why);
    cr_assert_eq(tt_sock_read(fds[3], &c, 1, tt_now() + 5), TUTTI_ERR_REMOTE);
    for (int i = 0; i < 4; i++)
        if (i != 2)
            close(fds[i]);
    tt_boot_close(j[0].b);
    tt_boot_close(j[1].b);
}

Test(bootstrap, strangers_at_a_rank_listener_are_dropped, .timeout = 60)
{
    struct tt_id_info id;
    struct joiner j[2];
    pthread_t t[2];
    unsigned char hello[TT_HELLO_PEER_LEN], hdr[TT_MSG_HDR_LEN];
    const struct tt_addr *listener;
    int bad[4];

    new_root(&id);
    start(&j[0], &t[0], &id, 0, 2, 20);
    start(&j[1], &t[1], &id, 1, 2, 20);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    cr_assert_eq(j[0].rc, TUTTI_SUCCESS, "%s", j[0].msg);
    cr_assert_eq(j[1].rc, TUTTI_SUCCESS, "%s", j[1].msg);
    listener = tt_boot_self_addr(j[0].b);

    /* Wrong secret. */
    bad[0] = dial(listener);
    memcpy(hello, "TTBP", 4);
    memset(hello + 4, 0x11, TT_SECRET_BYTES);
    tt_put32(hello + 36, 1);
    tt_put32(hello + 40, 2);
    send_bytes(bad[0], hello, sizeof(hello));
    /* Right secret (an insider gone wrong), then a length of 1 TiB: no allocation. */
    bad[1] = dial(listener);
    memcpy(hello + 4, id.secret, TT_SECRET_BYTES);
    send_bytes(bad[1], hello, sizeof(hello));
    memcpy(hdr, "TTBM", 4);
    tt_put32(hdr + 4, 7);
    tt_put64(hdr + 8, 1ull << 40);
    send_bytes(bad[1], hdr, sizeof(hdr));
    /* Right secret but a rank number out of range. */
    bad[2] = dial(listener);
    tt_put32(hello + 36, 99);
    send_bytes(bad[2], hello, sizeof(hello));
    /* Silent. */
    bad[3] = dial(listener);

    /* The real peer still gets through, though it sends after the strangers. */
    char got[3] = {0};
    cr_assert_eq(tt_boot_send(j[1].b, 0, 9, "ok", 3), TUTTI_SUCCESS);
    cr_assert_eq(tt_boot_recv(j[0].b, 1, 9, got, 3), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_str_eq(got, "ok");
    /* The huge-length sender was cut off. */
    char c;
    cr_assert_eq(tt_sock_read(bad[1], &c, 1, tt_now() + 5), TUTTI_ERR_REMOTE);
    for (int i = 0; i < 4; i++)
        close(bad[i]);
    tt_boot_close(j[0].b);
    tt_boot_close(j[1].b);
}

Test(bootstrap, duplicate_rank_and_size_mismatch_are_refused_with_a_reason, .timeout = 60)
{
    struct tt_id_info id;
    struct joiner j[4];
    pthread_t t[4];

    new_root(&id);
    start(&j[0], &t[0], &id, 0, 3, 20);
    usleep(200000);
    start(&j[1], &t[1], &id, 0, 3, 20); /* rank 0 again */
    pthread_join(t[1], NULL);
    cr_assert_eq(j[1].rc, TUTTI_ERR_INVALID_ARG, "%s", j[1].msg);
    cr_assert(strstr(j[1].msg, "already joined"), "%s", j[1].msg);
    start(&j[2], &t[2], &id, 1, 4, 20); /* wrong size */
    pthread_join(t[2], NULL);
    cr_assert_eq(j[2].rc, TUTTI_ERR_INVALID_ARG, "%s", j[2].msg);
    cr_assert(strstr(j[2].msg, "nranks mismatch"), "%s", j[2].msg);
    start(&j[2], &t[2], &id, 1, 3, 20);
    start(&j[3], &t[3], &id, 2, 3, 20);
    for (int i = 0; i < 4; i++)
        if (i != 1)
            pthread_join(t[i], NULL);
    for (int i = 0; i < 4; i++)
        if (i != 1) {
            cr_assert_eq(j[i].rc, TUTTI_SUCCESS, "%s", j[i].msg);
            tt_boot_close(j[i].b);
        }
}

Test(bootstrap, missing_rank_times_out_with_its_number, .timeout = 60)
{
    struct tt_id_info id;
    struct joiner j;
    pthread_t t;
    double t0 = tt_now();

    cr_assert_eq(tt_addr_resolve("127.0.0.1", 0, &id.root), TUTTI_SUCCESS);
    memset(id.secret, 3, TT_SECRET_BYTES);
    cr_assert_eq(tt_boot_root_start(&id.root, id.secret, 1.0), TUTTI_SUCCESS);
    start(&j, &t, &id, 0, 2, 10);
    pthread_join(t, NULL);
    cr_assert_eq(j.rc, TUTTI_ERR_TIMEOUT, "%s", j.msg);
    cr_assert(strstr(j.msg, "missing ranks: 1"), "%s", j.msg);
    cr_assert(tt_now() - t0 < 5);
}

Test(bootstrap, no_root_is_a_timeout_not_a_hang, .timeout = 30)
{
    struct tt_id_info id;
    struct tt_boot *b;
    double t0 = tt_now();
    int fd;
    struct tt_addr a;

    /* A port nobody listens on: bind and close one. */
    cr_assert_eq(tt_addr_resolve("127.0.0.1", 0, &a), TUTTI_SUCCESS);
    cr_assert_eq(tt_sock_listen(&a, 1, &fd), TUTTI_SUCCESS);
    close(fd);
    id.root = a;
    memset(id.secret, 1, TT_SECRET_BYTES);
    cr_assert_eq(tt_boot_init(&id, 0, 2, 1.0, &b), TUTTI_ERR_TIMEOUT, "%s", tutti_last_error());
    cr_assert(strstr(tutti_last_error(), "rendezvous"), "%s", tutti_last_error());
    cr_assert(tt_now() - t0 < 5);
}

/* A rank that joined the rendezvous and then closed its connection (it exited or failed): the
 * communicator cannot form, and the ranks that joined are told at once, not at the timeout. */
Test(bootstrap, a_rank_that_leaves_the_rendezvous_fails_the_others_at_once, .timeout = 60)
{
    struct tt_id_info id;
    struct joiner j;
    pthread_t t;
    unsigned char hello[TT_HELLO_ROOT_LEN] = {0};
    int fd;
    double t0;

    new_root(&id); /* it waits 20 s for missing ranks */
    start(&j, &t, &id, 0, 3, 20);
    fd = dial(&id.root);
    memcpy(hello, "TTBH", 4);
    memcpy(hello + 4, id.secret, TT_SECRET_BYTES);
    tt_put32(hello + 36, 1);
    tt_put32(hello + 40, 3);
    tt_addr_pack(&id.root, hello + 44);
    send_bytes(fd, hello, sizeof(hello));
    usleep(200000);
    t0 = tt_now();
    close(fd); /* rank 1 leaves; rank 2 never comes */
    pthread_join(t, NULL);
    cr_assert_eq(j.rc, TUTTI_ERR_REMOTE, "%s", j.msg);
    cr_assert(strstr(j.msg, "rank 1 joined the rendezvous and then closed its connection"), "%s",
              j.msg);
    cr_assert(tt_now() - t0 < 3, "rank 0 learnt it after %.1f s", tt_now() - t0);
}

/* After the rendezvous, a rank that is gone (its listener closed): the rank that sends to it
 * fails at once (a refused connection is final), and tells the others, so a rank waiting for
 * data that would have passed through it fails too, naming who gave up and why. */
Test(bootstrap, a_rank_gone_after_the_rendezvous_fails_every_rank_at_once, .timeout = 60)
{
    struct tt_id_info id;
    struct joiner j[3];
    pthread_t t[3];
    double t0;
    char buf[16];

    new_root(&id);
    for (int r = 0; r < 3; r++)
        start(&j[r], &t[r], &id, r, 3, 20);
    for (int r = 0; r < 3; r++) {
        pthread_join(t[r], NULL);
        cr_assert_eq(j[r].rc, TUTTI_SUCCESS, "%s", j[r].msg);
    }
    tt_boot_close(j[2].b); /* rank 2 is gone */
    t0 = tt_now();
    /* Rank 1 sends to rank 2 (refused: it fails and tells rank 0); rank 0 waits for rank 2. */
    cr_assert_eq(tt_boot_send(j[1].b, 2, 9, "x", 2), TUTTI_ERR_REMOTE);
    cr_assert(strstr(tutti_last_error(), "cannot connect to rank 2"), "%s", tutti_last_error());
    cr_assert(strstr(tutti_last_error(), "refused"), "%s", tutti_last_error());
    cr_assert_eq(tt_boot_recv(j[0].b, 2, 9, buf, 2), TUTTI_ERR_REMOTE);
    cr_assert(strstr(tutti_last_error(), "rank 1 gave up: bootstrap: cannot connect to rank 2"),
              "%s", tutti_last_error());
    cr_assert(tt_now() - t0 < 3, "took %.1f s", tt_now() - t0);
    tt_boot_close(j[0].b);
    tt_boot_close(j[1].b);
}

/* Slurm node lists (srun's rendezvous on the step's first node): the first host, as Slurm's
 * own `scontrol show hostnames` would print it first. */
Test(bootstrap, first_host_of_a_slurm_node_list)
{
    static const char *const cases[][2] = {
        {"node1", "node1"},
        {"gpu[07-12,20],login1", "gpu07"},
        {"gpu[3],x", "gpu3"},
        {"n[1-4]-ib", "n1-ib"},
        {"rack[2-3]-n[010-012]", "rack2-n010"},
        {"a,b[1-2]", "a"},
        {"127.0.0.[1-2]", "127.0.0.1"},
        {"c[5,1-3]", "c5"},
    };
    static const char *const bad[] = {"", ",a", "n[", "n[]", "n[x-2]", "n[1-2", "n]1", "n[1x]"};
    char out[64], tiny[4];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_eq(tt_hostlist_first(cases[i][0], out, sizeof(out)), 0, "%s", cases[i][0]);
        cr_assert_str_eq(out, cases[i][1], "%s", cases[i][0]);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        cr_assert_eq(tt_hostlist_first(bad[i], out, sizeof(out)), -1, "'%s' was accepted", bad[i]);
    cr_assert_eq(tt_hostlist_first("abc", tiny, sizeof(tiny)), 0);
    cr_assert_str_eq(tiny, "abc");
    cr_assert_eq(tt_hostlist_first("abcd", tiny, sizeof(tiny)), -1, "a name too long was cut");
    cr_assert_eq(tt_hostlist_first("ab[123]", tiny, sizeof(tiny)), -1, "a name too long was cut");
}

/* More strangers than the service keeps waiting (ROOT_MAX_PENDING, 256), holding their
 * connections open and silent, plus garbage: the oldest stranger is dropped for each newcomer,
 * and the real ranks, which connect again if dropped unheard, still join. */
Test(bootstrap, a_flood_of_idle_connections_does_not_block_the_rendezvous, .timeout = 60)
{
    enum { IDLE = 400 };
    struct rlimit rl;
    struct tt_id_info id;
    struct joiner j[2];
    pthread_t t[2];
    static int fds[IDLE];
    unsigned char garbage[TT_HELLO_ROOT_LEN];

    getrlimit(RLIMIT_NOFILE, &rl);
    if (rl.rlim_cur < 4 * IDLE && rl.rlim_max >= 4 * IDLE) {
        rl.rlim_cur = 4 * IDLE;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    new_root(&id);
    memset(garbage, 0x41, sizeof(garbage));
    for (int i = 0; i < IDLE; i++) {
        fds[i] = dial(&id.root);
        if (i % 8 == 0)
            send_bytes(fds[i], garbage, 20); /* part of something that is no hello */
    }
    start(&j[0], &t[0], &id, 0, 2, 20);
    start(&j[1], &t[1], &id, 1, 2, 20);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    cr_assert_eq(j[0].rc, TUTTI_SUCCESS, "rank 0: %s", j[0].msg);
    cr_assert_eq(j[1].rc, TUTTI_SUCCESS, "rank 1: %s", j[1].msg);
    for (int i = 0; i < IDLE; i++)
        close(fds[i]);
    tt_boot_close(j[0].b);
    tt_boot_close(j[1].b);
}

/* A rank with another secret (another job's id, another TUTTI_SECRET) is told so. */
Test(bootstrap, a_wrong_secret_is_named_to_the_refused_rank, .timeout = 30)
{
    struct tt_id_info id, wrong;
    struct joiner j;
    pthread_t t;

    new_root(&id);
    wrong = id;
    wrong.secret[0] ^= 1;
    start(&j, &t, &wrong, 0, 2, 5);
    pthread_join(t, NULL);
    cr_assert_eq(j.rc, TUTTI_ERR_INVALID_ARG, "%s", j.msg);
    cr_assert(strstr(j.msg, "refused: wrong secret"), "%s", j.msg);
}

/* The service and a rank that started together time out together: the rank still learns the
 * service's verdict (the missing ranks, who joined from where, whom it turned away), not just
 * that its own wait ran out. */
Test(bootstrap, missing_ranks_are_named_when_the_waits_end_together, .timeout = 30)
{
    struct tt_id_info id, wrong;
    struct joiner j[2];
    pthread_t t[2];

    cr_assert_eq(tt_addr_resolve("127.0.0.1", 0, &id.root), TUTTI_SUCCESS);
    memset(id.secret, 7, TT_SECRET_BYTES);
    cr_assert_eq(tt_boot_root_start(&id.root, id.secret, 2.0), TUTTI_SUCCESS);
    start(&j[0], &t[0], &id, 0, 4, 2.0);
    wrong = id;
    wrong.secret[5] ^= 1;
    start(&j[1], &t[1], &wrong, 2, 4, 2.0);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    cr_assert_eq(j[0].rc, TUTTI_ERR_TIMEOUT, "%s", j[0].msg);
    cr_assert(strstr(j[0].msg, "missing ranks: 1 2 3"), "%s", j[0].msg);
    cr_assert(strstr(j[0].msg, "joined: ranks 0 from 127.0.0.1"), "%s", j[0].msg);
    cr_assert(strstr(j[0].msg, "1 hello(s) with a wrong secret"), "%s", j[0].msg);
}
