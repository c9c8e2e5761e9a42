/*
 * stream.c -- host streams and events (tutti.h, "Streams and events").
 *
 * A stream is a growable ring of work items guarded by one mutex, and a worker thread that
 * takes them in order. Every item gets a ticket (1, 2, ...) when it is queued; `done` is the
 * ticket of the last item finished, so "everything queued before X has run" is
 * `done >= ticket_of_X`, which is all an event needs: it records (stream, ticket). The first
 * failure is kept with its ticket, so an event recorded before it still reports success.
 *
 * The worker sleeps on a condition variable while the queue is empty; waiters (sync, events,
 * other streams' WAIT items) sleep on another. Nothing spins.
 */
#include "lib/stream/stream_int.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/trace.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned next_stream_id = 1;

unsigned tt_stream_next_id(void)
{
    return __atomic_fetch_add(&next_stream_id, 1, __ATOMIC_RELAXED);
}

struct tutti_event {
    uint64_t magic;
    struct tutti_stream *stream; /* NULL: never recorded */
    unsigned long long ticket;
};

#define TT_EVENT_MAGIC 0x74746576656e7421ull

/* The stream whose worker is the calling thread; NULL on other threads. */
static _Thread_local struct tutti_stream *in_worker;

/* A host stream: a worker thread runs its items (the other kind: stream_cuda.c). */
static tutti_result_t host_sync(tutti_stream_t s);
static tutti_result_t host_query(tutti_stream_t s);
static tutti_result_t host_destroy(tutti_stream_t s);
static const struct tt_stream_kind host_kind = {host_sync, host_query, host_destroy};

int tt_stream_in_worker(void)
{
    return in_worker != NULL;
}

tutti_result_t tt_stream_check(tutti_stream_t s, struct tutti_comm *comm, const char *fn)
{
    if (s && s->magic != TT_STREAM_MAGIC)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "%s: stream is not a live tutti stream (destroyed, or not from "
                       "tutti_stream_create)",
                       fn);
    return TUTTI_SUCCESS;
}

int tt_stream_failed(tutti_stream_t s)
{
    return __atomic_load_n(&s->error, __ATOMIC_ACQUIRE) != TUTTI_SUCCESS;
}

void tt_stream_record_failure(tutti_stream_t s, tutti_result_t rc, const char *msg)
{
    pthread_mutex_lock(&s->lock);
    if (s->error == TUTTI_SUCCESS) {
        snprintf(s->msg, sizeof(s->msg), "%s", msg);
        __atomic_store_n(&s->error, rc, __ATOMIC_RELEASE);
        s->failed_at = 1;
    }
    pthread_mutex_unlock(&s->lock);
}

/* The operations a CUDA-wrapped stream does not have. */
static tutti_result_t not_on_cuda(tutti_stream_t s, const char *fn, const char *instead)
{
    if (s && s->magic == TT_STREAM_MAGIC && tt_stream_is_cuda(s))
        return tt_fail(NULL, TUTTI_ERR_UNSUPPORTED, "%s: not on a CUDA-wrapped stream (%s)", fn,
                       instead);
    return TUTTI_SUCCESS;
}

void tt_work_release(struct tt_work *w)
{
    free(w->ops);
    w->ops = NULL;
}

/* Record the stream's first failure; called with the lock held. */
static void stream_fail(struct tutti_stream *s, unsigned long long ticket, tutti_result_t rc,
                        const char *msg)
{
    if (s->error != TUTTI_SUCCESS)
        return;
    s->failed_at = ticket;
    snprintf(s->msg, sizeof(s->msg), "%s", msg[0] ? msg : tutti_strerror(rc));
    __atomic_store_n(&s->error, rc, __ATOMIC_RELEASE); /* after msg: last_error reads it */
}

/* Block until `other` has finished `ticket`; returns its failure if that work failed. */
static tutti_result_t wait_ticket(struct tutti_stream *o, unsigned long long ticket)
{
    tutti_result_t rc = TUTTI_SUCCESS;

    pthread_mutex_lock(&o->lock);
    while (o->done < ticket && !(o->failed_at && o->failed_at <= ticket))
        pthread_cond_wait(&o->done_cv, &o->lock);
    if (o->failed_at && o->failed_at <= ticket) {
        rc = o->error;
        tt_fail_quiet(NULL, rc, "%s", o->msg);
    }
    pthread_mutex_unlock(&o->lock);
    return rc;
}

static tutti_result_t run_item(struct tt_work *w)
{
    tutti_result_t rc;

    switch (w->kind) {
    case TT_WORK_COLL:
    case TT_WORK_P2P: return w->how->run(w);
    case TT_WORK_HOST:
        rc = w->fn(w->arg);
        if (rc != TUTTI_SUCCESS && strcmp(tt_thread_error(), "") == 0)
            tt_fail_quiet(NULL, rc, "a host function queued with tutti_stream_launch failed: %s",
                          tutti_strerror(rc));
        return rc;
    case TT_WORK_WAIT: return wait_ticket(w->wait_stream, w->wait_ticket);
    }
    return tt_fail(NULL, TUTTI_ERR_INTERNAL, "stream: unknown work item %d", (int)w->kind);
}

static void *worker_main(void *arg)
{
    struct tutti_stream *s = arg;

    in_worker = s;
    tt_error_keep_to_thread();
    if (tt_trace_on) {
        char name[32];
        snprintf(name, sizeof(name), "stream %u", s->id);
        tt_trace_thread_name(name);
    }
    pthread_mutex_lock(&s->lock);
    for (;;) {
        struct tt_work w;
        unsigned long long ticket;
        tutti_result_t rc, err;
        char why[TT_ERRMSG_LEN];

        while (s->len == 0 && !s->stop)
            pthread_cond_wait(&s->work_cv, &s->lock);
        if (s->len == 0)
            break;
        w = s->ring[s->head];
        ticket = s->done + 1;
        err = s->error;
        snprintf(why, sizeof(why), "%s", s->msg);
        pthread_mutex_unlock(&s->lock);

        if (err == TUTTI_SUCCESS) {
            /* Clear the thread's message so a host function's own tt_fail text is kept. */
            tt_fail_quiet(NULL, TUTTI_SUCCESS, "%s", "");
            rc = run_item(&w);
        } else {
            if (w.kind == TT_WORK_COLL || w.kind == TT_WORK_P2P)
                w.how->skip(&w, why);
            rc = TUTTI_SUCCESS; /* already failed; keep the first message */
        }
        tt_work_release(&w);
        if (w.comm)
            w.how->done(w.comm); /* the last touch: comm may be destroyed after it */

        pthread_mutex_lock(&s->lock);
        if (rc != TUTTI_SUCCESS)
            stream_fail(s, ticket, rc, tt_thread_error());
        s->head = (s->head + 1) % s->cap;
        s->len--;
        s->done = ticket;
        pthread_cond_broadcast(&s->done_cv);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

tutti_result_t tutti_stream_create(tutti_stream_t *stream)
{
    struct tutti_stream *s;
    int err;

    tt_base_init();
    if (!stream)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_stream_create: stream is NULL");
    s = calloc(1, sizeof(*s));
    if (!s)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_stream_create: out of memory");
    s->cap = 64;
    s->ring = calloc(s->cap, sizeof(*s->ring));
    if (!s->ring) {
        free(s);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_stream_create: out of memory");
    }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->work_cv, NULL);
    pthread_cond_init(&s->done_cv, NULL);
    s->magic = TT_STREAM_MAGIC;
    s->kind = &host_kind;
    s->id = tt_stream_next_id();
    err = pthread_create(&s->worker, NULL, worker_main, s);
    if (err != 0) {
        pthread_cond_destroy(&s->done_cv);
        pthread_cond_destroy(&s->work_cv);
        pthread_mutex_destroy(&s->lock);
        free(s->ring);
        free(s);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_stream_create: pthread_create: %s",
                       strerror(err));
    }
    *stream = s;
    return TUTTI_SUCCESS;
}

tutti_result_t tt_stream_push(tutti_stream_t s, const struct tt_work *w)
{
    pthread_mutex_lock(&s->lock);
    if (s->len == s->cap) {
        size_t cap = 2 * s->cap;
        struct tt_work *r = malloc(cap * sizeof(*r));
        if (!r) {
            pthread_mutex_unlock(&s->lock);
            return tt_fail(w->comm, TUTTI_ERR_SYSTEM, "stream: out of memory queueing work");
        }
        for (size_t i = 0; i < s->len; i++)
            r[i] = s->ring[(s->head + i) % s->cap];
        free(s->ring);
        s->ring = r;
        s->cap = cap;
        s->head = 0;
    }
    s->ring[(s->head + s->len) % s->cap] = *w;
    s->len++;
    s->queued++;
    if (w->comm)
        w->how->queued(w->comm);
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->lock);
    return TUTTI_SUCCESS;
}

static tutti_result_t stream_arg(tutti_stream_t s, const char *fn)
{
    if (!s)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s: stream is NULL", fn);
    return tt_stream_check(s, NULL, fn);
}

tutti_result_t tutti_stream_sync(tutti_stream_t s)
{
    TT_CHECK(stream_arg(s, "tutti_stream_sync"));
    return s->kind->sync(s);
}

static tutti_result_t host_sync(tutti_stream_t s)
{
    unsigned long long t;

    if (in_worker)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_stream_sync: called from a stream's host function (it would wait "
                       "for itself)");
    pthread_mutex_lock(&s->lock);
    t = s->queued;
    pthread_mutex_unlock(&s->lock);
    return wait_ticket(s, t);
}

tutti_result_t tutti_stream_query(tutti_stream_t s)
{
    TT_CHECK(stream_arg(s, "tutti_stream_query"));
    return s->kind->query(s);
}

static tutti_result_t host_query(tutti_stream_t s)
{
    tutti_result_t rc;

    pthread_mutex_lock(&s->lock);
    rc = s->error != TUTTI_SUCCESS ? s->error
         : s->done < s->queued     ? TUTTI_IN_PROGRESS
                                   : TUTTI_SUCCESS;
    if (s->error != TUTTI_SUCCESS)
        tt_fail_quiet(NULL, rc, "%s", s->msg);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

tutti_result_t tutti_stream_destroy(tutti_stream_t s)
{
    if (!s)
        return TUTTI_SUCCESS;
    TT_CHECK(stream_arg(s, "tutti_stream_destroy"));
    return s->kind->destroy(s);
}

static tutti_result_t host_destroy(tutti_stream_t s)
{
    tutti_result_t rc;

    if (in_worker)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_stream_destroy: called from a stream's host function");
    pthread_mutex_lock(&s->lock);
    s->stop = 1;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->worker, NULL);
    rc = s->error;
    if (rc != TUTTI_SUCCESS)
        tt_fail_quiet(NULL, rc, "%s", s->msg);
    s->magic = 0;
    pthread_cond_destroy(&s->done_cv);
    pthread_cond_destroy(&s->work_cv);
    pthread_mutex_destroy(&s->lock);
    free(s->ring);
    free(s);
    return rc;
}

tutti_result_t tutti_stream_launch(tutti_stream_t s, tutti_host_fn_t fn, void *arg)
{
    struct tt_work w = {.kind = TT_WORK_HOST, .fn = fn, .arg = arg};

    TT_CHECK(stream_arg(s, "tutti_stream_launch"));
    TT_CHECK(not_on_cuda(s, "tutti_stream_launch", "use cudaLaunchHostFunc"));
    if (!fn)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_stream_launch: fn is NULL");
    return tt_stream_push(s, &w);
}

const char *tutti_stream_last_error(tutti_stream_t s)
{
    if (!s || s->magic != TT_STREAM_MAGIC)
        return "";
    /* Written once, before `error` is set under the lock; stable afterwards. */
    return __atomic_load_n(&s->error, __ATOMIC_ACQUIRE) != TUTTI_SUCCESS ? s->msg : "";
}

static tutti_result_t event_arg(tutti_event_t e, const char *fn)
{
    if (!e)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s: event is NULL", fn);
    if (e->magic != TT_EVENT_MAGIC)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s: event is not a live tutti event", fn);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_stream_wait_event(tutti_stream_t s, tutti_event_t e)
{
    struct tt_work w = {.kind = TT_WORK_WAIT};

    TT_CHECK(stream_arg(s, "tutti_stream_wait_event"));
    TT_CHECK(not_on_cuda(s, "tutti_stream_wait_event", "use cudaStreamWaitEvent"));
    TT_CHECK(event_arg(e, "tutti_stream_wait_event"));
    if (!e->stream || e->stream == s)
        return TUTTI_SUCCESS; /* nothing to wait for, or already in order */
    w.wait_stream = e->stream;
    w.wait_ticket = e->ticket;
    return tt_stream_push(s, &w);
}

tutti_result_t tutti_event_create(tutti_event_t *event)
{
    struct tutti_event *e;

    if (!event)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_event_create: event is NULL");
    e = calloc(1, sizeof(*e));
    if (!e)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_event_create: out of memory");
    e->magic = TT_EVENT_MAGIC;
    *event = e;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_event_destroy(tutti_event_t e)
{
    if (!e)
        return TUTTI_SUCCESS;
    TT_CHECK(event_arg(e, "tutti_event_destroy"));
    e->magic = 0;
    free(e);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_event_record(tutti_event_t e, tutti_stream_t s)
{
    TT_CHECK(event_arg(e, "tutti_event_record"));
    TT_CHECK(stream_arg(s, "tutti_event_record"));
    TT_CHECK(not_on_cuda(s, "tutti_event_record", "use cudaEventRecord"));
    pthread_mutex_lock(&s->lock);
    e->ticket = s->queued;
    pthread_mutex_unlock(&s->lock);
    e->stream = s;
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_event_query(tutti_event_t e)
{
    struct tutti_stream *s;
    tutti_result_t rc;

    TT_CHECK(event_arg(e, "tutti_event_query"));
    s = e->stream;
    if (!s)
        return TUTTI_SUCCESS;
    pthread_mutex_lock(&s->lock);
    if (s->failed_at && s->failed_at <= e->ticket) {
        rc = s->error;
        tt_fail_quiet(NULL, rc, "%s", s->msg);
    } else {
        rc = s->done >= e->ticket ? TUTTI_SUCCESS : TUTTI_IN_PROGRESS;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

tutti_result_t tutti_event_sync(tutti_event_t e)
{
    TT_CHECK(event_arg(e, "tutti_event_sync"));
    if (!e->stream)
        return TUTTI_SUCCESS;
    if (in_worker == e->stream)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_event_sync: called from a host function of the event's own stream "
                       "(it would wait for itself)");
    return wait_ticket(e->stream, e->ticket);
}
