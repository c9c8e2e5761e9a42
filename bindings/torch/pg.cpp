/*
 * pg.cpp -- ProcessGroupTutti's life (rendezvous through PyTorch's store, teardown), its
 * worker (the group's tutti host stream) and WorkTutti. The operations: ops.cpp.
 */
#include "pg.hpp"

#include <Python.h>

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace tutti_torch
{

namespace
{

/* The group whose worker this thread is, while it runs an operation. */
thread_local ProcessGroupTutti *running_on = nullptr;

/* The store key of the communicator's id (PyTorch prefixes it per group). */
const char *const kIdKey = "tutti_id";

/* One launch onto the worker: operations run alone, or together as one tutti group. */
struct Batch {
    ProcessGroupTutti *pg;
    std::vector<Op> ops;
    bool group;
};

std::string message(tutti_result_t r, const char *what, tutti_comm_t comm)
{
    const char *m = tutti_comm_last_error(comm);
    if (!m || !*m)
        m = tutti_last_error();
    std::string s = std::string("tutti: ") + what + " failed (" + tutti_strerror(r) + ")";
    if (m && *m)
        s += std::string(": ") + m;
    return s;
}

/* Drops the GIL for the scope if this thread holds it: teardown waits for the worker, whose
 * Future callbacks may be Python. */
class NoGil
{
  public:
    NoGil()
    {
        if (Py_IsInitialized() && PyGILState_Check())
            state_ = PyEval_SaveThread();
    }
    ~NoGil()
    {
        if (state_)
            PyEval_RestoreThread(state_);
    }

  private:
    PyThreadState *state_ = nullptr;
};

} // namespace

void check(tutti_result_t r, const char *what, tutti_comm_t comm)
{
    if (r != TUTTI_SUCCESS)
        throw std::runtime_error(message(r, what, comm));
}

/* ---- WorkTutti ---- */

WorkTutti::WorkTutti(int rank, c10d::OpType type, const char *title,
                     std::vector<at::Tensor> outputs, ProcessGroupTutti *batch_of)
    : c10d::Work(rank, type, title), outputs_(std::move(outputs)), batch_of_(batch_of)
{
    future_ =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
}

void WorkTutti::runBatch() const
{
    ProcessGroupTutti *pg;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        pg = completed_ ? nullptr : batch_of_;
    }
    if (pg)
        pg->flushBatch();
}

bool WorkTutti::isCompleted()
{
    runBatch();
    return c10d::Work::isCompleted();
}

bool WorkTutti::isSuccess() const
{
    runBatch();
    return c10d::Work::isSuccess();
}

std::exception_ptr WorkTutti::exception() const
{
    runBatch();
    return c10d::Work::exception();
}

bool WorkTutti::wait(std::chrono::milliseconds timeout)
{
    runBatch();
    NoGil nogil;
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == kNoTimeout) {
        cv_.wait(lock, [&] { return completed_; });
    } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
        throw std::runtime_error("tutti: wait(timeout=" + std::to_string(timeout.count()) +
                                 " ms) ran out before the " + c10d::opTypeToString(opType_) +
                                 " completed");
    }
    if (exception_)
        std::rethrow_exception(exception_);
    return true;
}

std::vector<at::Tensor> WorkTutti::result()
{
    return outputs_;
}

c10::intrusive_ptr<c10::ivalue::Future> WorkTutti::getFuture()
{
    runBatch();
    return future_;
}

void WorkTutti::abort()
{
    ProcessGroupTutti *pg;
    {
        std::lock_guard<std::mutex> lock(mutex_);
        pg = batch_of_;
    }
    TORCH_CHECK(pg, "tutti: Work.abort() aborts the group's communicator, which only a send or "
                    "receive Work knows; use the process group's abort instead");
    pg->abortComm();
}

void WorkTutti::complete(std::exception_ptr error)
{
    {
        std::lock_guard<std::mutex> lock(mutex_);
        batch_of_ = nullptr;
    }
    finish(error);
    if (error)
        future_->setError(error);
    else
        future_->markCompleted(c10::IValue(outputs_));
}

/* ---- ProcessGroupTutti ---- */

ProcessGroupTutti::ProcessGroupTutti(const c10::intrusive_ptr<c10d::Store> &store, int rank,
                                     int size, double timeout_s)
    : Base(rank, size)
{
    tutti_id_t id;
    char text[TUTTI_ID_STRLEN];
    tutti_config_t config = TUTTI_CONFIG_INIT;

    if (rank == 0) {
        check(tutti_get_id(&id), "tutti_get_id", nullptr);
        check(tutti_id_to_string(&id, text, sizeof(text)), "tutti_id_to_string", nullptr);
        store->set(kIdKey, std::vector<uint8_t>(text, text + std::strlen(text)));
    } else {
        std::vector<uint8_t> got = store->get(kIdKey); /* waits, within the store's timeout */
        std::string s(got.begin(), got.end());
        check(tutti_id_from_string(s.c_str(), &id), "reading rank 0's id from the store", nullptr);
    }
    config.timeout_s = timeout_s;
    check(tutti_comm_init(&comm_, size, &id, rank, &config), "tutti_comm_init", nullptr);
    if (tutti_stream_create(&stream_) != TUTTI_SUCCESS) {
        std::string m = message(TUTTI_ERR_SYSTEM, "tutti_stream_create", nullptr);
        tutti_comm_destroy(comm_);
        throw std::runtime_error(m);
    }
#if TORCH_VERSION_MAJOR < 2
    init();
#endif
}

ProcessGroupTutti::~ProcessGroupTutti()
{
    NoGil nogil;
    try {
        flushBatch();
    } catch (...) {
    }
    tutti_stream_destroy(stream_); /* runs what is queued; its errors are the Works' */
    tutti_comm_destroy(comm_);
}

c10::intrusive_ptr<WorkTutti> ProcessGroupTutti::newWork(c10d::OpType type, const char *title,
                                                         std::vector<at::Tensor> outputs,
                                                         bool batched)
{
    return c10::make_intrusive<WorkTutti>(getRank(), type, title, std::move(outputs),
                                          batched ? this : nullptr);
}

tutti_result_t ProcessGroupTutti::runOnWorker(void *arg)
{
    std::unique_ptr<Batch> b(static_cast<Batch *>(arg));
    b->pg->execute(b->ops, b->group);
    /* The stream never fails: a failed operation fails its Work, and the communicator's error
     * state fails those after it at once. */
    return TUTTI_SUCCESS;
}

void ProcessGroupTutti::execute(std::vector<Op> &ops, bool group)
{
    ProcessGroupTutti *outer = running_on;
    tutti_result_t r = TUTTI_SUCCESS;
    const char *failed = ops.empty() ? "" : ops[0].name;
    std::exception_ptr error;

    running_on = this;
    try {
        if (group) {
            tutti_group_start();
            for (Op &op : ops)
                if ((r = op.run()) != TUTTI_SUCCESS) {
                    failed = op.name;
                    break;
                }
            tutti_result_t e = tutti_group_end();
            if (r == TUTTI_SUCCESS)
                r = e;
        } else {
            r = ops[0].run();
        }
        if (r != TUTTI_SUCCESS)
            error = std::make_exception_ptr(std::runtime_error(message(r, failed, comm_)));
        else
            for (Op &op : ops)
                if (op.done)
                    op.done();
    } catch (...) {
        error = std::current_exception();
    }
    for (Op &op : ops) {
        op.run = nullptr; /* the tensors go before the callbacks run */
        op.done = nullptr;
        op.work->complete(error);
    }
    running_on = outer;
}

void ProcessGroupTutti::enqueue(std::vector<Op> ops, bool group)
{
    auto *b = new Batch{this, std::move(ops), group};
    tutti_result_t r = tutti_stream_launch(stream_, runOnWorker, b);
    if (r != TUTTI_SUCCESS) {
        auto e = std::make_exception_ptr(
            std::runtime_error(message(r, "queueing on the group's stream", comm_)));
        for (Op &op : b->ops)
            op.work->complete(e);
        delete b;
    }
}

void ProcessGroupTutti::launch(std::vector<Op> ops, bool group)
{
    std::unique_lock<std::mutex> lock(mu_);
    std::vector<Op> pending;
    pending.swap(batch_);
    if (running_on == this) {
        /* From a callback on the worker: now, before anything queued, so that every rank runs
         * it at the same point whichever thread happened to complete the Future. */
        lock.unlock();
        if (!pending.empty())
            execute(pending, true);
        if (!ops.empty())
            execute(ops, group);
        return;
    }
    if (!pending.empty())
        enqueue(std::move(pending), true);
    if (!ops.empty())
        enqueue(std::move(ops), group);
}

void ProcessGroupTutti::flushBatch()
{
    launch({}, false);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::submit(Op op)
{
    c10::intrusive_ptr<c10d::Work> work = op.work;
    std::vector<Op> ops;
    ops.push_back(std::move(op));
    launch(std::move(ops), false);
    return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTutti::submitP2P(Op op)
{
    c10::intrusive_ptr<c10d::Work> work = op.work;
    std::lock_guard<std::mutex> lock(mu_);
    batch_.push_back(std::move(op));
    return work;
}

void ProcessGroupTutti::refused(const char *fn) noexcept
{
    if (getSize() == 1)
        return;
    std::fprintf(stderr,
                 "tutti: rank %d refused %s: the group's communicator is aborted in that call's "
                 "turn, so its other ranks fail there instead of waiting for it or pairing it "
                 "with this rank's next call\n",
                 getRank(), fn);
    try {
        tutti_comm_t c = comm_;
        submit({"refused call",
                [c] {
                    tutti_comm_abort(c);
                    return TUTTI_SUCCESS;
                },
                nullptr, newWork(c10d::OpType::UNKNOWN, nullptr, {}, false)});
    } catch (...) {
        tutti_comm_abort(comm_); /* out of memory: at once, rather than not at all */
    }
}

void ProcessGroupTutti::abortComm()
{
    tutti_comm_abort(comm_);
}

std::string ProcessGroupTutti::errorState() const
{
    tutti_result_t e = TUTTI_SUCCESS;
    char msg[1024] = "";
    if (tutti_comm_get_error(comm_, &e, msg, sizeof(msg)) != TUTTI_SUCCESS || e == TUTTI_SUCCESS)
        return "";
    return std::string(tutti_strerror(e)) + ": " + msg;
}

} // namespace tutti_torch
