// _hook.cpp — DDP's comm hook in C++ for the torch adapter (ddptop._hook).
//
// Owns: the hook torch calls for every gradient bucket (the bucket times
// 1/world as DDP's default does, Gloo's all-reduce of the bucket alone: the
// commands' agreement has a group of its own, steer.py), each bucket's record in a
// fixed-size lock-free ring, the buckets in flight for the heartbeat, the
// bucket layout, and the adapter's collective counter (collectives.py takes
// its numbers here too, so DDP's buckets and the script's own collectives
// share one sequence). Not: the wire, the steering decisions, CUDA (the
// Python hook, ddp_hook.py, does those on torch 2.x and on GPUs).
//
// Threads: runHook runs on the script's thread (the autograd engine, GIL
// released); the completion callback on Gloo's worker threads, or inline on
// the script's thread when the work is done before the callback is added:
// neither takes the GIL. drain/oldest are called from Python (the
// script's thread or the heartbeat thread) with the GIL held, which
// serialises the consumers. Only for the torch it was built against: the
// adapter compares DDPTOP_TORCH_VERSION with torch.__version__ (cxx_hook.py).
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/extension.h>

#include "_hook.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <vector>

#ifndef DDPTOP_TORCH_VERSION
#error "build with -DDDPTOP_TORCH_VERSION=\"the torch.__version__ the headers belong to\""
#endif

namespace c10d
{
// Debian's libtorch-dev 1.13 lacks headers reducer.hpp includes: only the
// member used is declared (exported by libtorch_cpu.so).
class Reducer
{
  public:
    void register_comm_hook(std::unique_ptr<CommHookInterface> iface);

  private:
    Reducer() = delete;
};
} // namespace c10d

namespace
{

constexpr size_t RING_N = 4096; // records between two drains (a step's buckets, or a second's at the beat)
constexpr size_t FLIGHT_N = 64; // buckets in flight at once

int64_t wall_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

int64_t mono_ns()
{
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// A dtype's name on the wire, as collectives.dtype_name says torch's
// ("float32"): a gradient bucket is one of these.
const char *dtype_name(c10::ScalarType t)
{
    switch (t) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Double: return "float64";
    default: return c10::toString(t);
    }
}

// ---- the collective counter (collectives.py's numbers) ----
std::atomic<int64_t> g_key{ 0 };

// Multi-producer (Gloo's threads), one consumer at a time (under the GIL).
// A producer claims a slot by CAS on head while there is room, writes it,
// then publishes it by its ready stamp (position + 1). A full ring drops
// the record and counts it: it never blocks Gloo's thread.
struct Slot {
    std::atomic<uint64_t> ready{ 0 };
    Record rec;
};
std::array<Slot, RING_N> g_ring;
std::atomic<uint64_t> g_head{ 0 }, g_tail{ 0 };
std::atomic<int64_t> g_dropped{ 0 };

void ring_push(const Record &rec)
{
    uint64_t pos = g_head.load(std::memory_order_relaxed);
    do {
        if (pos - g_tail.load(std::memory_order_acquire) >= RING_N) {
            g_dropped.fetch_add(1, std::memory_order_relaxed);
            return;
        }
    } while (!g_head.compare_exchange_weak(pos, pos + 1, std::memory_order_acq_rel, std::memory_order_relaxed));
    Slot &s = g_ring[pos % RING_N];
    s.rec = rec;
    s.ready.store(pos + 1, std::memory_order_release);
}

// ---- buckets in flight, for the heartbeat ----
struct Flight {
    std::atomic<int64_t> key{ 0 }; // 0: free
    std::atomic<int64_t> seq{ 0 }, bucket{ 0 }, start_ns{ 0 };
};
std::array<Flight, FLIGHT_N> g_flight;

Flight *flight_take(int64_t key, int64_t seq, int64_t bucket, int64_t start_ns)
{
    for (size_t k = 0; k < FLIGHT_N; k++) {
        Flight &f = g_flight[(static_cast<size_t>(key) + k) % FLIGHT_N];
        int64_t zero = 0;
        if (f.key.load(std::memory_order_relaxed) == 0 &&
            f.key.compare_exchange_strong(zero, -1, std::memory_order_acquire)) {
            f.seq.store(seq, std::memory_order_relaxed);
            f.bucket.store(bucket, std::memory_order_relaxed);
            f.start_ns.store(start_ns, std::memory_order_relaxed);
            f.key.store(key, std::memory_order_release);
            return &f;
        }
    }
    return nullptr; // more in flight than slots: the beat names an older one
}

// ---- the bucket layout (logged by Python when it changes) ----
std::mutex g_layout_mu;
bool g_layout_new = false;
std::atomic<bool> g_layout_new_fast{ false };
std::vector<std::pair<int64_t, int64_t>> g_layout; // (bytes, tensors) per index, as last logged

class Hook : public c10d::CommHookInterface
{
  public:
    // numbering: 0 the adapter counts, 1 torch's numbers of this group, 2 none (-1)
    Hook(c10::intrusive_ptr<c10d::ProcessGroup> pg, int numbering)
        : pg_(std::move(pg)), world_(pg_->getSize()), scale_(1.0 / pg_->getSize()), numbering_(numbering)
    {
    }

    c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket &bucket) override
    {
        at::Tensor &buf = bucket.getBufferRef();
        const int64_t n = buf.numel();
        const int64_t nbytes = n * static_cast<int64_t>(buf.element_size());
        const char *dt = dtype_name(buf.scalar_type());
        const int64_t index = static_cast<int64_t>(bucket.getIndex());
        const bool last = bucket.isLast();
        note_layout(bucket, index, nbytes, last);
        // DDP's default: grad times 1/world as it fills the bucket (reducer.cpp), bit for bit
        if (world_ > 1) buf.mul_(scale_);
        const int64_t key = g_key.fetch_add(1, std::memory_order_relaxed) + 1;
        int64_t seq = key;
        if (numbering_ == 1)
            seq = static_cast<int64_t>(pg_->getSequenceNumberForGroup()) + 1;
        else if (numbering_ == 2)
            seq = -1;
        const int64_t start = wall_ns();
        const int64_t launch_mono = last ? mono_ns() : 0;
        Flight *fl = flight_take(key, seq, index, start);
        std::vector<at::Tensor> ts{ buf };
        c10::intrusive_ptr<c10::ivalue::Future> fut;
        try {
            fut = pg_->allreduce(ts)->getFuture();
        } catch (...) {
            if (fl) fl->key.store(0, std::memory_order_release);
            throw;
        }
        auto child = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
        // The record is pushed before the future DDP waits for completes, so a
        // step's buckets are all in the ring when its backward returns.
        fut->addCallback([child, fl, key, seq, index, nbytes, start, launch_mono, n, dt](c10::ivalue::Future &f) {
            Record rec{ key, seq, index, nbytes, start, wall_ns(), launch_mono ? mono_ns() - launch_mono : -1, false,
                        n, dt };
            if (fl) fl->key.store(0, std::memory_order_release);
            if (f.hasError()) {
                rec.error = true;
                ring_push(rec);
                child->setError(f.exception_ptr()); // DDP sees the all-reduce's own error
                return;
            }
            try {
                ring_push(rec);
                child->markCompleted(f.value());
            } catch (...) {
                child->setError(std::current_exception());
            }
        });
        return child;
    }

    at::Tensor parseHookResult(const c10::IValue &result) override { return result.toTensorVector()[0]; }

  private:
    // The layout, cheaply: a bucket's tensors are counted only when its size
    // is new (DDP rebuilds its buckets once, after the first step).
    void note_layout(c10d::GradBucket &bucket, int64_t index, int64_t nbytes, bool last)
    {
        if (static_cast<size_t>(index) >= known_.size()) known_.resize(index + 1, { -1, 0 });
        if (known_[index].first != nbytes) {
            known_[index] = { nbytes, static_cast<int64_t>(bucket.getGradients().size()) };
            changed_ = true;
        }
        if (!last || (!changed_ && known_.size() == static_cast<size_t>(index) + 1)) return;
        known_.resize(index + 1);
        changed_ = false;
        std::lock_guard<std::mutex> lk(g_layout_mu);
        g_layout = known_;
        g_layout_new = true;
        g_layout_new_fast.store(true, std::memory_order_release);
    }

    c10::intrusive_ptr<c10d::ProcessGroup> pg_;
    int world_;
    double scale_;
    int numbering_;
    std::vector<std::pair<int64_t, int64_t>> known_;
    bool changed_ = true;
};

void hook_register(py::object reducer, py::object pg, int numbering)
{
    auto &r = reducer.cast<c10d::Reducer &>();
    auto p = pg.cast<c10::intrusive_ptr<c10d::ProcessGroup>>();
    r.register_comm_hook(std::make_unique<Hook>(std::move(p), numbering));
}

} // namespace

size_t hook_drain_records(std::vector<Record> &out)
{
    size_t n = 0;
    uint64_t tail = g_tail.load(std::memory_order_relaxed);
    for (;;) {
        Slot &s = g_ring[tail % RING_N];
        if (s.ready.load(std::memory_order_acquire) != tail + 1) break;
        out.push_back(s.rec);
        n++;
        tail++;
        g_tail.store(tail, std::memory_order_release);
    }
    return n;
}

py::object hook_take_layout()
{
    if (!g_layout_new_fast.load(std::memory_order_acquire)) return py::none();
    std::lock_guard<std::mutex> lk(g_layout_mu);
    py::list l;
    for (auto &b : g_layout) l.append(py::make_tuple(b.first, b.second));
    g_layout_new = false;
    g_layout_new_fast.store(false, std::memory_order_release);
    return l;
}

int64_t hook_take_dropped() { return g_dropped.exchange(0); }

namespace
{

// (records, layout or None, dropped): one call a step (the Python step path;
// the step engine, _steps.cpp, drains records itself), or the beat's.
py::tuple drain()
{
    std::vector<Record> recs;
    hook_drain_records(recs);
    py::list l;
    for (const Record &r : recs)
        l.append(py::make_tuple(r.key, r.seq, r.bucket, r.bytes, r.start_ns, r.done_ns, r.exposed_ns, r.error, r.count,
                                r.dtype));
    py::object layout = hook_take_layout();
    return py::make_tuple(l, layout, hook_take_dropped());
}

// (key, seq, since wall ns, bucket) of the oldest bucket in flight, or None.
py::object oldest()
{
    int64_t best = 0, seq = 0, since = 0, bucket = -1;
    for (auto &f : g_flight) {
        int64_t k = f.key.load(std::memory_order_acquire);
        if (k <= 0 || (best && k >= best)) continue;
        int64_t s = f.seq.load(std::memory_order_relaxed), b = f.bucket.load(std::memory_order_relaxed),
                t = f.start_ns.load(std::memory_order_relaxed);
        if (f.key.load(std::memory_order_acquire) != k) continue; // reused meanwhile
        best = k, seq = s, bucket = b, since = t;
    }
    if (!best) return py::none();
    return py::make_tuple(best, seq, since, bucket);
}

} // namespace

PYBIND11_MODULE(_hook, m)
{
    m.doc() = "ddptop's DDP comm hook in C++ (workers/python/ddptop/cxx_hook.py uses it)";
    m.attr("TORCH_VERSION") = DDPTOP_TORCH_VERSION;
    m.def("register", &hook_register, "register(reducer, process_group, numbering): the hook on a DDP's reducer");
    m.def(
        "next_key", []() { return g_key.fetch_add(1, std::memory_order_relaxed) + 1; },
        "the adapter's next collective number (shared with the buckets)");
    m.def("drain", &drain, "(records, layout or None, dropped) since the last drain");
    m.def("oldest", &oldest, "(key, seq, since_ns, bucket) of the oldest bucket in flight, or None");
    steps_bind(m);
}
