/* comm_gloo.cc — comm.h's Gloo backend (TCP transport, CPU float buffers).
 *
 * Owns, per Comm: one TCP device (and with it Gloo's event-loop thread),
 * two full meshes of pairs over it (one for the old-style ring, one for
 * everything else; see struct GlooComm for why), and a small cache of set-up
 * ring objects. Does not own the rendezvous store: the CommStore is used
 * only inside comm_new, wrapped as a gloo::rendezvous::Store under
 * cfg->prefix, and never touched afterwards.
 *
 * Threads: every call runs on the caller's thread, one call at a time per
 * Comm (comm.h); Gloo's device thread does the socket I/O underneath.
 *
 * Reached through comm.c's dispatch (comm_gloo_ops, comm_backend.h); comm.c
 * also stages CUDA buffers through host memory for it, so everything here
 * sees host memory only.
 *
 * Element types: float, and bf16 bits for --grad-dtype bf16 (comm.h's
 * _bf16 calls), summed with every partial sum rounded to bf16.
 *
 * C++ stays in this file. Every exception Gloo or the standard library
 * throws on the caller's thread is caught at the ops-table edge and turned
 * into -1 plus "comm_gloo.cc:LINE: op: what" in the caller's err. After a
 * collective fails the Comm is poisoned: pairs may be closed and slots half
 * used, so every later call fails at once with the first error instead of
 * hanging or pairing up the wrong messages. Only comm_free is left to do.
 *
 * comm_new sets SIGPIPE to ignored if it was at its default (see
 * ignore_sigpipe_if_default). DDPTOP_GLOO_ALLREDUCE=ring|opts|bcube forces
 * one all-reduce implementation, for measuring; the default is auto.
 */
#include "comm/comm_backend.h"
#include "comm/shm_reduce.h"
extern "C" {
#include "base/err.h"
#include "nn/bf16.h"
}

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <gloo/allreduce.h>
#include <gloo/allreduce_ring.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/config.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

namespace
{

using Ms = std::chrono::milliseconds;

/* Which all-reduce implementation a call uses. AUTO picks by size; the
 * others exist for measuring (DDPTOP_GLOO_ALLREDUCE=ring|opts|bcube). */
enum class Algo { AUTO, RING, OPTS, BCUBE };

/* AUTO picks the old AllreduceRing at 2 ranks while the buffer stays within
 * kRingMaxTrafficBytes, gloo::allreduce (new API, ring) above it and at
 * every other world size: at 3 or more ranks the old ring's per-rank
 * summation order gives the ranks different bits (gloo_allreduce). The old
 * ring forwards the whole buffer world-1 times, one message per hop with
 * no handshake: cheapest while latency dominates. The new ring moves
 * 2(world-1)/world of it in pipelined segments, but every message costs a
 * send-ready/recv-ready handshake through Gloo's device thread.
 *
 * Measured with tests/tools/bench_comm.c (forked ranks, loopback TCP), median ms
 * per call, old ring / new API:
 *  This 2-vCPU VM, shared with other builds, 2 ranks, 3-5 runs:
 *    4 KB 0.09 / 0.26   256 KB 0.21 / 0.39   1 MB 0.79 / 1.3-3.9
 *    2 MB 1.5-2.3 / 3.2-4.1   4 MB 3.8-4.7 / 3.3-7.4
 *    (means: 4 KB 0.11 / 0.5-2.1; the new API stalls for a 4 ms scheduler
 *    tick whenever its extra thread hand-offs meet a busy CPU)
 *  An idle 16-core machine:
 *    2 ranks: 4 KB 0.031 / 0.10   256 KB 0.12 / 0.19   1 MB 0.47 / 0.46
 *             2 MB 1.14 / 0.92    4 MB 2.1 / 1.7       16 MB 8.7 / 6.8
 *    4 ranks: 4 KB 0.11 / 0.35    256 KB 0.39-0.51 / 0.46   1 MB 2.0 / 0.75
 *             4 MB 7.3 / 2.2      16 MB 28 / 8.3
 *    8 ranks: 4 KB 0.27 / 0.84    64 KB 0.47 / 0.98    256 KB 1.16 / 1.03
 *             1 MB 4.9 / 1.5
 * The idle machine breaks even at bytes * (world-1) of about 1 MB for 2, 4
 * and 8 ranks (1 MB, 256-341 KB, ~150-200 KB). At 2 ranks that keeps the
 * old ring for 4 KB, 256 KB and 1 MB and the new API for 4 MB, which is
 * also what this VM prefers, except that here the old ring still wins
 * at 2 MB: oversubscribed cores favour it, and they are not the case to
 * tune for. The limit is 1.25 MiB rather than 1 MiB so that the default
 * MLP's single 1.08 MB bucket at 2 ranks (a tie on the idle machine) takes
 * the old ring: 1.23x / 1.29x PyTorch DDP's steps/s end to end on the
 * 2-core VM, 0.3-0.5 ms less exposed communication a step (docs/BENCHMARKS.md,
 * "Figures that code and decisions cite"), while 4 ranks x 1 MB stays on the
 * new API. */
constexpr size_t kRingMaxTrafficBytes = (5u << 20) / 4;

/* Cached ring objects hold two private copies of their buffer (inbox and
 * outbox); bound what the cache may keep. */
constexpr size_t kRingCacheMaxBytes = 64u << 20;
constexpr size_t kRingCacheMaxEntries = 64;

/* "comm_gloo.cc:LINE: what" into the caller's buffer (err_set). */
#define put_err(err, errlen, line, fmt, ...) \
    ((void)err_set((err), (errlen), "comm_gloo.cc:%d: " fmt, (line), ##__VA_ARGS__))

/* Gloo's messages span lines (EnforceNotMet adds a stack); err is one line. */
std::string one_line(std::string s)
{
    for (char &ch : s)
        if (ch == '\n' || ch == '\r') ch = ' ';
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

/* gloo::rendezvous::Store over the caller's CommStore callbacks. Failures
 * throw gloo::IoException naming the key, so they surface through
 * connectFullMesh like any other rendezvous error. */
/* What comm_new and the thread that runs its rendezvous share. Every call
 * into the caller's store (set, get, interrupted) holds mu, so the store
 * (not thread-safe) is used by one thread at a time; once abandoned, the
 * thread never touches the store again and ends at Gloo's own timeout. */
struct Gate {
    std::mutex mu;
    bool abandoned = false;
};

class CallbackStore : public gloo::rendezvous::Store
{
  public:
    CallbackStore(const CommStore &s, Ms timeout, std::shared_ptr<Gate> gate)
        : s_(s), timeout_(timeout), gate_(std::move(gate))
    {
    }

    void set(const std::string &key, const std::vector<char> &data) override
    {
        std::lock_guard<std::mutex> hold(gate_->mu);
        if (gate_->abandoned) throw gloo::IoException("store set '" + key + "': the rendezvous was given up");
        char err[256] = "";
        if (s_.set(s_.ctx, key.c_str(), data.data(), data.size(), err, sizeof err) != 0)
            throw gloo::IoException("store set '" + key + "': " + err);
        /* Test hook: die right after publishing a key ending so (e.g.
         * "coll/rank_1": rank 1's address), the window a peer's death
         * leaves the others in Gloo's connect (tests/scenario/train/t_connect_dead.sh). */
        const char *die = getenv("DDPTOP_TEST_KILL_AFTER_SET");
        if (die && *die && key.size() >= strlen(die) && !key.compare(key.size() - strlen(die), std::string::npos, die))
            raise(SIGKILL);
    }

    /* Gloo's rendezvous calls get() on keys it never waited for, so get
     * waits too, for the context timeout. */
    std::vector<char> get(const std::string &key) override { return fetch(key, timeout_); }

    void wait(const std::vector<std::string> &keys) override { wait(keys, timeout_); }

    void wait(const std::vector<std::string> &keys, const Ms &timeout) override
    {
        Ms t = timeout.count() > 0 ? timeout : timeout_;
        auto deadline = std::chrono::steady_clock::now() + t;
        for (const auto &key : keys) {
            auto left = std::chrono::duration_cast<Ms>(deadline - std::chrono::steady_clock::now());
            fetch(key, std::max(left, Ms(0)));
        }
    }

  private:
    std::vector<char> fetch(const std::string &key, Ms timeout)
    {
        std::lock_guard<std::mutex> hold(gate_->mu);
        if (gate_->abandoned) throw gloo::IoException("store get '" + key + "': the rendezvous was given up");
        void *val = nullptr;
        size_t len = 0;
        char err[256] = "";
        int rc = s_.get(s_.ctx, key.c_str(), &val, &len, (int64_t)timeout.count(), err, sizeof err);
        if (rc == 1) {
            free(val);
            throw gloo::IoException("store: timed out after " + std::to_string(timeout.count()) +
                                    " ms waiting for key '" + key + "'");
        }
        if (rc != 0) {
            free(val);
            throw gloo::IoException("store get '" + key + "': " + err);
        }
        std::vector<char> out;
        if (val && len) out.assign((const char *)val, (const char *)val + len);
        free(val);
        return out;
    }

    CommStore s_;
    Ms timeout_;
    std::shared_ptr<Gate> gate_;
};

/* The old-style ring, reusable on any buffer of its length. Its pair
 * buffers point at its own inbox/outbox, never at the caller's memory, so
 * one object per (tag, n, dtype) can serve whatever pointer a call brings.
 * One class per element type (float, bf16 bits) behind one face. */
class RingBase
{
  public:
    virtual ~RingBase() noexcept(false) = default; /* gloo::Algorithm's is */
    virtual void run_on(void *p) = 0;
    virtual size_t bytes() const = 0;
};

template <typename T> class Ring : public RingBase, public gloo::AllreduceRing<T>
{
  public:
    Ring(const std::shared_ptr<gloo::Context> &ctx, T *p, int n, const gloo::ReductionFunction<T> *fn)
        : gloo::AllreduceRing<T>(ctx, std::vector<T *>{ p }, n, fn)
    {
    }

    void run_on(void *p) override
    {
        this->ptrs_[0] = (T *)p;
        this->run();
        /* run() never waits for its "ready" notifications to the left
         * neighbour; wait here so that nothing of this object is still in
         * flight when it is reused or evicted (freeing a buffer with a send
         * queued on it would be a use-after-free in the device thread). */
        for (int i = 0; i < this->contextSize_ - 1; i++) this->sendNotificationBuf_->waitSend();
    }

    size_t bytes() const override { return 2 * (size_t)this->count_ * sizeof(T); }
};

struct RingEntry {
    std::unique_ptr<RingBase> ring;
    uint64_t last_use;
};

/* Not gloo::sum<float>: that one counts elements in an int. */
void sum_f32(void *c, const void *a, const void *b, size_t n)
{
    float *out = (float *)c;
    const float *x = (const float *)a, *y = (const float *)b;
    for (size_t i = 0; i < n; i++) out[i] = x[i] + y[i];
}

/* bf16 bits (nn/bf16.h) summed as torch's c10::BFloat16 a + b: the float
 * sum of the two, rounded to nearest even. Every partial sum of Gloo's ring
 * goes through here, so each one is rounded, as bf16 tensors add in torch
 * (torch 1.13's ProcessGroupGloo itself refuses bf16: "Invalid scalar
 * type"; docs/TRAINING.md "Gradient dtype"). */
void sum_bf16(void *c, const void *a, const void *b, size_t n)
{
    uint16_t *out = (uint16_t *)c;
    const uint16_t *x = (const uint16_t *)a, *y = (const uint16_t *)b;
    size_t i = 0;
    /* blocks of 16 through a local array, which the compiler vectorizes at
     * -O2 even though out and x may be the same array (shm_reduce.c) */
    for (; i + 16 <= n; i += 16) {
        uint16_t t[16];
        for (size_t k = 0; k < 16; k++) t[k] = bf16_from_f32(bf16_to_f32(x[i + k]) + bf16_to_f32(y[i + k]));
        memcpy(out + i, t, sizeof t);
    }
    for (; i < n; i++) out[i] = bf16_from_f32(bf16_to_f32(x[i]) + bf16_to_f32(y[i]));
}

/* The old ring's form of sum_bf16: x += y. */
void sum_bf16_into(uint16_t *x, const uint16_t *y, size_t n) { sum_bf16(x, x, y, n); }
const gloo::ReductionFunction<uint16_t> kRingSumBf16(gloo::SUM, &sum_bf16_into);

int parse_algo(Algo *out, char *err, size_t errlen)
{
    const char *s = getenv("DDPTOP_GLOO_ALLREDUCE");
    if (!s || !*s || !strcmp(s, "auto"))
        *out = Algo::AUTO;
    else if (!strcmp(s, "ring"))
        *out = Algo::RING;
    else if (!strcmp(s, "opts"))
        *out = Algo::OPTS;
    else if (!strcmp(s, "bcube"))
        *out = Algo::BCUBE;
    else {
        put_err(err, errlen, __LINE__, "DDPTOP_GLOO_ALLREDUCE=%s: expected auto, ring, opts or bcube", s);
        return -1;
    }
    return 0;
}

} // namespace

struct GlooComm {
    int rank = 0, world = 1;
    Ms timeout{ 0 };
    Algo algo = Algo::AUTO;
    std::shared_ptr<gloo::transport::Device> dev;
    /* Two meshes over one device. Old-style sends (AllreduceRing's bound
     * buffers) set a pair's SO_SNDBUF to their own message size with
     * setsockopt, from zero: the first small ring pins the socket's send
     * buffer at a few KB and turns off the kernel's autotuning for good
     * (the ring's "ready" notifications alone do it to the left pair). Any
     * large transfer on that pair afterwards crawls: a 4 MB new-API
     * all-reduce took 3.6 s instead of 18 ms with 4 ranks, 100 ms instead
     * of 4 ms with 2. So the old rings get a mesh of their own, and the
     * new API (large all-reduce, broadcast, barrier) keeps sockets the
     * kernel sizes. Costs world-1 more sockets per rank. */
    std::shared_ptr<gloo::rendezvous::Context> ctx;      /* new API */
    std::shared_ptr<gloo::rendezvous::Context> ring_ctx; /* old rings only */
    /* Keyed by what every rank agrees on (tag, n), not by pointer: buffers
     * sit at different addresses on different ranks, and a cache hit on one
     * rank with a miss on another would pair up different slots. Creation
     * and LRU eviction depend only on the call sequence, which is the same
     * on all ranks, so slots stay matched. */
    std::map<std::tuple<uint32_t, size_t, int>, RingEntry> rings;
    size_t ring_bytes = 0;
    uint64_t calls = 0;
    std::string failed; /* first collective error; non-empty = poisoned */
    /* Every rank on this host: all-reduces go through shared memory
     * (shm_reduce.h); NULL: over the meshes. */
    ShmReduce *shm = nullptr;

    ~GlooComm()
    {
        shm_reduce_close(&shm);
        /* Order matters: rings hold the context, pairs hold the device, and
         * the device's loop thread is joined when its last owner goes. */
        rings.clear();
        ring_ctx.reset();
        ctx.reset();
        dev.reset();
    }
};

namespace
{

void ring_evict(GlooComm *c, size_t need)
{
    while (!c->rings.empty() &&
           (c->rings.size() + 1 > kRingCacheMaxEntries || c->ring_bytes + need > kRingCacheMaxBytes)) {
        auto lru = c->rings.begin();
        for (auto it = c->rings.begin(); it != c->rings.end(); ++it)
            if (it->second.last_use < lru->second.last_use) lru = it;
        c->ring_bytes -= lru->second.ring->bytes();
        c->rings.erase(lru);
    }
}

void allreduce_ring(GlooComm *c, void *buf, size_t n, CommDtype dtype, uint32_t tag)
{
    auto key = std::make_tuple(tag, n, (int)dtype);
    auto it = c->rings.find(key);
    if (it == c->rings.end()) {
        size_t need = 2 * n * comm_dtype_size(dtype);
        ring_evict(c, need);
        std::unique_ptr<RingBase> ring;
        if (dtype == COMM_BF16)
            ring = std::make_unique<Ring<uint16_t>>(c->ring_ctx, (uint16_t *)buf, (int)n, &kRingSumBf16);
        else
            ring =
                std::make_unique<Ring<float>>(c->ring_ctx, (float *)buf, (int)n, gloo::ReductionFunction<float>::sum);
        it = c->rings.emplace(key, RingEntry{ std::move(ring), 0 }).first;
        c->ring_bytes += need;
    }
    it->second.last_use = ++c->calls;
    it->second.ring->run_on(buf);
}

/* The new API, for either dtype: only the element size and the sum differ. */
void allreduce_opts(GlooComm *c, void *buf, size_t n, CommDtype dtype, uint32_t tag, Algo algo)
{
    gloo::AllreduceOptions opts(c->ctx);
    if (dtype == COMM_BF16) {
        opts.setOutput((uint16_t *)buf, n);
        opts.setReduceFunction(sum_bf16);
    } else {
        opts.setOutput((float *)buf, n);
        opts.setReduceFunction(sum_f32);
    }
    opts.setTag(tag);
    opts.setTimeout(c->timeout);
    opts.setAlgorithm(algo == Algo::BCUBE ? gloo::AllreduceOptions::Algorithm::BCUBE
                                          : gloo::AllreduceOptions::Algorithm::RING);
    gloo::allreduce(opts);
}

/* Ranks on one host sum through shared memory (shm_reduce.h), unless
 * DDPTOP_SHM=0 or DDPTOP_GLOO_ALLREDUCE forces a Gloo algorithm (for
 * measuring). Every rank publishes its host key; all ranks read all keys,
 * so they reach the same verdict; then they agree (an all-reduce over the
 * mesh) that every one of them mapped the segment before it is used, and
 * rank 0 removes its name. */
void setup_shm(GlooComm *cm, gloo::rendezvous::Store &st, int64_t timeout_ms)
{
    const char *e = getenv("DDPTOP_SHM");
    if ((e && !strcmp(e, "0")) || cm->algo != Algo::AUTO || cm->world < 2 || cm->world > SHM_REDUCE_MAX_WORLD) return;
    char key[512];
    std::string mine = shm_host_key(key, sizeof key) == 0 ? std::string(key) : "none " + std::to_string(cm->rank);
    st.set("host/" + std::to_string(cm->rank), std::vector<char>(mine.begin(), mine.end()));
    bool same = true;
    for (int r = 0; r < cm->world; r++) {
        std::vector<char> v = st.get("host/" + std::to_string(r));
        if (std::string(v.begin(), v.end()) != mine) same = false;
    }
    if (!same) return;
    /* rank 0 creates the segment before it publishes the name ("" when it
     * could not), so the others never look for one that is not there yet */
    char name[96] = "", err[256];
    ShmReduce *s = nullptr;
    float ok = 0.0f;
    if (cm->rank == 0) {
        shm_reduce_name(name, sizeof name);
        if (shm_reduce_open(&s, name, 0, cm->world, timeout_ms, err, sizeof err) == 0) ok = 1.0f;
        std::string pub = ok != 0.0f ? std::string(name) : std::string();
        st.set("name", std::vector<char>(pub.begin(), pub.end()));
    } else {
        std::vector<char> v = st.get("name");
        snprintf(name, sizeof name, "%.*s", (int)v.size(), v.data());
        if (name[0] && shm_reduce_open(&s, name, cm->rank, cm->world, timeout_ms, err, sizeof err) == 0) ok = 1.0f;
    }
    gloo::AllreduceOptions opts(cm->ctx);
    opts.setOutput(&ok, 1);
    opts.setReduceFunction(sum_f32);
    opts.setTag(0x73686d);
    opts.setTimeout(cm->timeout);
    try {
        gloo::allreduce(opts);
    } catch (...) {
        /* a peer gone before the agreement: the name must not outlive it */
        if (cm->rank == 0 && name[0]) shm_reduce_unlink(name);
        shm_reduce_close(&s);
        throw;
    }
    if (cm->rank == 0 && name[0]) shm_reduce_unlink(name);
    if (ok != (float)cm->world) {
        shm_reduce_close(&s);
        return;
    }
    cm->shm = s;
}

/* The old ring counts bytes in an int. */
bool ring_fits(size_t n, size_t esize) { return n <= (size_t)INT32_MAX / esize; }

/* Runs fn, turning any exception into -1 and a message. `line` is the
 * caller's line, so the message points at the operation that failed. */
template <typename F> int guarded(GlooComm *c, const std::string &op, int line, char *err, size_t errlen, F fn)
{
    std::string what;
    try {
        fn();
        return 0;
    } catch (const gloo::IoException &e) {
        what = std::string("gloo::IoException: ") + e.what();
    } catch (const gloo::EnforceNotMet &e) {
        what = std::string("gloo::EnforceNotMet: ") + e.what();
    } catch (const gloo::Exception &e) {
        what = std::string("gloo::Exception: ") + e.what();
    } catch (const std::bad_alloc &) {
        what = "out of memory";
    } catch (const std::exception &e) {
        what = e.what();
    } catch (...) {
        what = "unknown exception";
    }
    what = one_line(what);
    if (c && c->failed.empty()) c->failed = op + ": " + what;
    put_err(err, errlen, line, "%s: %s", op.c_str(), what.c_str());
    return -1;
}

int check_usable(GlooComm *c, const char *op, int line, char *err, size_t errlen)
{
    if (!c) {
        put_err(err, errlen, line, "%s: no communicator", op);
        return -1;
    }
    if (!c->failed.empty()) {
        put_err(err, errlen, line, "%s: communicator failed earlier (%s)", op, c->failed.c_str());
        return -1;
    }
    return 0;
}

/* A peer that dies mid-send would otherwise kill this process with SIGPIPE:
 * Gloo writes with writev(), without MSG_NOSIGNAL. Leave a handler the
 * program installed alone; replace only the default, which never suits a
 * program with sockets. */
void ignore_sigpipe_if_default(void)
{
    struct sigaction old;
    if (sigaction(SIGPIPE, nullptr, &old) == 0 && old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_IGN;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGPIPE, &sa, nullptr);
    }
}

/* The operations, reached only through comm_gloo_ops (comm.c). */

int gloo_create(void **out, const CommConfig *cfg, char *err, size_t errlen)
{
    if (!out) {
        put_err(err, errlen, __LINE__, "comm_new: out is NULL");
        return -1;
    }
    *out = nullptr;
    if (!cfg || !cfg->store || !cfg->store->set || !cfg->store->get) {
        put_err(err, errlen, __LINE__, "comm_new: missing config or store callbacks");
        return -1;
    }
    if (!cfg->backend || strcmp(cfg->backend, "gloo") != 0) {
        put_err(err, errlen, __LINE__, "comm_new: backend '%s' is not built in (this is gloo)",
                cfg->backend ? cfg->backend : "(null)");
        return -1;
    }
    if (cfg->world < 1 || cfg->rank < 0 || cfg->rank >= cfg->world) {
        put_err(err, errlen, __LINE__, "comm_new: rank %d out of range for world size %d", cfg->rank, cfg->world);
        return -1;
    }
    if (!cfg->host || !*cfg->host || !cfg->prefix || !*cfg->prefix) {
        put_err(err, errlen, __LINE__, "comm_new: host and prefix are required");
        return -1;
    }
    if (cfg->timeout_ms <= 0) {
        put_err(err, errlen, __LINE__, "comm_new: timeout_ms must be > 0 (got %lld)", (long long)cfg->timeout_ms);
        return -1;
    }
    Algo algo;
    if (parse_algo(&algo, err, errlen) != 0) return -1;
    ignore_sigpipe_if_default();

    /* The rendezvous runs on a thread of its own, so this one can ask the
     * caller whether to give up while Gloo connects (a peer that died
     * after publishing its address leaves the others there until the
     * timeout; no Gloo call can be interrupted). Everything the thread
     * reads is copied: it may outlive this call. */
    struct Job {
        int rank, world;
        int64_t timeout_ms;
        Algo algo;
        std::string host, prefix, op;
        CommStore store;
        std::shared_ptr<Gate> gate = std::make_shared<Gate>();
        std::promise<void> done;
        int rc = -1;
        char err[1024] = "";
        GlooComm *c = nullptr;
    };
    auto job = std::make_shared<Job>();
    job->rank = cfg->rank;
    job->world = cfg->world;
    job->timeout_ms = cfg->timeout_ms;
    job->algo = algo;
    job->host = cfg->host;
    job->prefix = cfg->prefix;
    job->store = *cfg->store;
    job->op = "rendezvous (rank " + std::to_string(cfg->rank) + "/" + std::to_string(cfg->world) + ")";
    auto run = [job] {
        job->rc = guarded(nullptr, job->op, __LINE__, job->err, sizeof job->err, [&] {
            std::unique_ptr<GlooComm> cm(new GlooComm);
            cm->rank = job->rank;
            cm->world = job->world;
            cm->timeout = Ms(job->timeout_ms);
            cm->algo = job->algo;

            CallbackStore base(job->store, cm->timeout, job->gate);
            gloo::transport::tcp::attr attr;
            attr.hostname = job->host;
            cm->dev = gloo::transport::tcp::CreateDevice(attr);

            /* One rendezvous per mesh, under sub-prefixes of the job's. The
             * timeout is set before connecting: pairs copy it when they are
             * made, and it bounds the rendezvous waits and every later
             * send/recv. */
            gloo::rendezvous::PrefixStore store(job->prefix + "/coll", base);
            cm->ctx = std::make_shared<gloo::rendezvous::Context>(job->rank, job->world);
            cm->ctx->setTimeout(cm->timeout);
            cm->ctx->connectFullMesh(store, cm->dev);

            gloo::rendezvous::PrefixStore ring_store(job->prefix + "/ring", base);
            cm->ring_ctx = std::make_shared<gloo::rendezvous::Context>(job->rank, job->world);
            cm->ring_ctx->setTimeout(cm->timeout);
            cm->ring_ctx->connectFullMesh(ring_store, cm->dev);

            gloo::rendezvous::PrefixStore shm_store(job->prefix + "/shm", base);
            setup_shm(cm.get(), shm_store, job->timeout_ms);
            job->c = cm.release();
        });
        job->done.set_value();
    };
    if (!job->store.interrupted) {
        run();
    } else {
        std::future<void> done = job->done.get_future();
        try {
            std::thread(run).detach();
        } catch (const std::exception &e) {
            put_err(err, errlen, __LINE__, "%s: cannot start a thread: %s", job->op.c_str(), e.what());
            return -1;
        }
        while (done.wait_for(Ms(20)) != std::future_status::ready) {
            /* not while the thread is in a store call: those end on a stop themselves */
            std::unique_lock<std::mutex> hold(job->gate->mu, std::try_to_lock);
            if (!hold.owns_lock()) continue;
            char why[256] = "";
            if (job->store.interrupted(job->store.ctx, why, sizeof why)) {
                job->gate->abandoned = true;
                put_err(err, errlen, __LINE__, "%s: given up while connecting to the peers: %s", job->op.c_str(), why);
                return -1;
            }
        }
    }
    if (job->rc != 0) {
        snprintf(err, errlen, "%s", job->err);
        return -1;
    }
    *out = job->c;
    return 0;
}

int gloo_allreduce(void *impl, void *buf, size_t n, CommDtype dtype, uint32_t tag, void *ready, int async,
                   int64_t ticket, char *err, size_t errlen)
{
    /* Host buffers, run now: comm.c waited for `ready` and keeps the times. */
    (void)ready;
    (void)async;
    (void)ticket;
    GlooComm *c = (GlooComm *)impl;
    if (check_usable(c, "allreduce", __LINE__, err, errlen) != 0) return -1;
    if (n == 0) return 0;
    if (!buf) {
        put_err(err, errlen, __LINE__, "allreduce: buffer is NULL");
        return -1;
    }
    const bool bf16 = dtype == COMM_BF16;
    const size_t esize = comm_dtype_size(dtype);
    /* With one rank the new API returns at once; the old ring would copy
     * the buffer through its outbox, so world 1 takes the new API. The old
     * ring serves 2 ranks only: each rank there adds the others in its own
     * order (own + left + left's left ...), and with rounding (FP32 as much
     * as bf16) 3 or more ranks end with different bits — DDP's replicas
     * would drift apart (test_comm allreduce_same_bits_on_every_rank). The
     * new API's reduce-scatter + all-gather gives every rank the same bits
     * (and is what torch's ProcessGroupGloo runs). With 2, a + b = b + a.
     * DDPTOP_GLOO_ALLREDUCE=ring still forces it, for measuring. */
    Algo a = c->algo;
    if (a == Algo::AUTO)
        a = c->world == 2 && n * esize <= kRingMaxTrafficBytes ? Algo::RING : Algo::OPTS;
    if (a == Algo::RING && ((bf16 && c->world > 2) || !ring_fits(n, esize))) a = Algo::OPTS;
    /* Gloo names a peer only by address; say which rank and which call. */
    std::string op = "allreduce (rank " + std::to_string(c->rank) + "/" + std::to_string(c->world) + ", " +
                     std::to_string(n) + (bf16 ? " bf16" : " floats") + ", tag " + std::to_string(tag) + ")";
    if (c->shm) {
        char why[300];
        int rc = bf16 ? shm_reduce_allreduce_bf16(c->shm, (uint16_t *)buf, n, why, sizeof why)
                      : shm_reduce_allreduce(c->shm, (float *)buf, n, why, sizeof why);
        if (rc == 0) return 0;
        if (c->failed.empty()) c->failed = op + ": " + why;
        put_err(err, errlen, __LINE__, "%s: %s", op.c_str(), why);
        return -1;
    }
    return guarded(c, op, __LINE__, err, errlen, [&] {
        if (a == Algo::RING)
            allreduce_ring(c, buf, n, dtype, tag);
        else
            allreduce_opts(c, buf, n, dtype, tag, a);
    });
}

int gloo_broadcast(void *impl, float *buf, size_t n, int root, int64_t ticket, char *err, size_t errlen)
{
    (void)ticket;
    GlooComm *c = (GlooComm *)impl;
    if (check_usable(c, "broadcast", __LINE__, err, errlen) != 0) return -1;
    if (root < 0 || root >= c->world) {
        put_err(err, errlen, __LINE__, "broadcast: root %d out of range for world size %d", root, c->world);
        return -1;
    }
    if (n == 0) return 0;
    if (!buf) {
        put_err(err, errlen, __LINE__, "broadcast: buffer is NULL");
        return -1;
    }
    std::string op = "broadcast (rank " + std::to_string(c->rank) + "/" + std::to_string(c->world) + ", " +
                     std::to_string(n) + " floats, root " + std::to_string(root) + ")";
    return guarded(c, op, __LINE__, err, errlen, [&] {
        /* In place on every rank; tag 0 is enough because calls on one Comm
         * never overlap (comm.h) and broadcast slots are apart from
         * all-reduce slots. */
        gloo::BroadcastOptions opts(c->ctx);
        opts.setOutput(buf, n);
        opts.setRoot(root);
        opts.setTag(0);
        opts.setTimeout(c->timeout);
        gloo::broadcast(opts);
    });
}

int gloo_barrier(void *impl, char *err, size_t errlen)
{
    GlooComm *c = (GlooComm *)impl;
    if (check_usable(c, "barrier", __LINE__, err, errlen) != 0) return -1;
    std::string op = "barrier (rank " + std::to_string(c->rank) + "/" + std::to_string(c->world) + ")";
    return guarded(c, op, __LINE__, err, errlen, [&] {
        gloo::BarrierOptions opts(c->ctx);
        opts.setTag(0);
        opts.setTimeout(c->timeout);
        gloo::barrier(opts);
    });
}

int gloo_destroy(void *impl, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    /* Closes both meshes and joins the device thread (see ~GlooComm).
     * Nothing here throws: the ring destructors only free memory and the
     * pairs close their sockets. */
    delete (GlooComm *)impl;
    return 0;
}

#define COMM_STR_(x) #x
#define COMM_STR(x)  COMM_STR_(x)

const char *gloo_describe(void *impl)
{
    GlooComm *c = (GlooComm *)impl;
    if (c && c->shm) return "gloo; all-reduce through shared memory (every rank on this host)";
    if (c && c->world > 1) return "gloo over TCP";
    return "gloo";
}

const char *gloo_version(void)
{
    return "gloo " COMM_STR(GLOO_VERSION_MAJOR) "." COMM_STR(GLOO_VERSION_MINOR) "." COMM_STR(GLOO_VERSION_PATCH);
}

} // namespace

/* No join or timing (calls are finished when they return; comm.c keeps
 * the host times), no abort (Gloo's calls end at the timeout). */
extern "C" const CommOps comm_gloo_ops = {
    "gloo",         /* name */
    1,              /* compiled */
    0,              /* device_buffers: comm.c stages device memory */
    gloo_create,    /* create */
    gloo_allreduce, /* allreduce */
    gloo_broadcast, /* broadcast */
    gloo_barrier,   /* barrier */
    nullptr,        /* join */
    nullptr,        /* timing */
    gloo_destroy,   /* destroy */
    nullptr,        /* abort */
    gloo_version,   /* version */
    gloo_describe,  /* describe */
};
