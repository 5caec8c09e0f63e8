// _steps.cpp — the torch adapter's per-step telemetry without Python
// (ddptop._hook.Burst and ddptop._hook.Steps; steps.py, uplink.py and
// cxx_hook.py use them where the C++ comm hook runs).
//
// Owns: the burst a rank's telemetry waits in (Burst: the uplink hands it
// every tel frame it encodes; 50 ms slots of the wall clock, as uplink.py's
// Python burst), and a step's bookkeeping and messages (Steps: the batch's
// samples, the losses of the backwards, the times, the buckets' records
// drained from the comm hook's ring), encoded with transport/wire's own
// codec straight into the burst: a step costs the script's thread a few
// calls into C++ where it cost ~1000 Python bytecodes (docs/BENCHMARKS.md,
// "A torch script under ddptop"). Not: the sockets (uplink.py sends what
// Burst hands back), the steering, faults, CUDA (the Python path does those).
//
// Threads: every call comes from Python with the GIL held (the script's
// thread, the heartbeat's), which serialises them; Burst keeps a mutex of
// its own all the same.
#include "_hook.h"

#include <torch/csrc/autograd/python_variable.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <utility>

extern "C" {
#include "wire/codec.h"
#include "wire/protocol.h"
}

namespace
{

constexpr int64_t BURST_NS = 50'000'000; // uplink.py's BURST_NS: a burst a 50 ms slot of the wall clock
constexpr uint32_t BURST_FRAMES = 512;   // uplink.py's BURST_FRAMES
constexpr size_t BURST_BYTES = 4u << 20; // uplink.py's BURST_BYTES

int64_t wall_ns()
{
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// time.monotonic(): the clock the Python side stamps its times with
double mono_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

class Burst
{
  public:
    explicit Burst(int rank) : rank_(rank)
    {
        codec_buf_init(&cur_);
        codec_buf_init(&first_);
        codec_buf_init(&enc_);
    }
    ~Burst()
    {
        codec_buf_done(&cur_);
        codec_buf_done(&first_);
        codec_buf_done(&enc_);
    }
    Burst(const Burst &) = delete;
    Burst &operator=(const Burst &) = delete;

    // Queue one encoded frame of this rank, stamped now_ns (wall): a burst of
    // an earlier slot (or a later one: the clock was set back) is finished
    // first, as uplink.py's send does.
    void add(const uint8_t *f, size_t len, int64_t now_ns)
    {
        std::lock_guard<std::mutex> lk(mu_);
        add_locked(f, len, now_ns);
    }

    // Encode m (its "r" and "t" set here) and queue it.
    void add_msg(Msg &m, int64_t now_ns)
    {
        std::lock_guard<std::mutex> lk(mu_);
        char err[160];
        m.rank = rank_;
        if (!m.t_ns) m.t_ns = now_ns;
        if (codec_encode(&m, &enc_, err, sizeof err)) {
            lost_++;
            return;
        }
        add_locked(enc_.data, enc_.len, now_ns);
    }

    // What waits goes out now (a flush).
    void finish()
    {
        std::lock_guard<std::mutex> lk(mu_);
        finish_locked();
    }

    // The finished bursts, oldest first, as [(frame, messages)], or None.
    py::object take()
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (ready_.empty()) return py::none();
        py::list out;
        for (auto &r : ready_) out.append(py::make_tuple(py::bytes(r.first), r.second));
        ready_.clear();
        return out;
    }

    bool has_ready()
    {
        std::lock_guard<std::mutex> lk(mu_);
        return !ready_.empty();
    }

    uint32_t pending()
    {
        std::lock_guard<std::mutex> lk(mu_);
        return n_;
    }

    // Messages that could not be encoded or queued (counted as drops).
    uint64_t take_lost()
    {
        std::lock_guard<std::mutex> lk(mu_);
        uint64_t n = lost_;
        lost_ = 0;
        return n;
    }

  private:
    void add_locked(const uint8_t *f, size_t len, int64_t now_ns)
    {
        char err[160];
        int64_t slot = now_ns / BURST_NS;
        if (n_ && (!whole_ || slot != slot_ || bytes_ + len > BURST_BYTES)) finish_locked();
        if (n_ && codec_burst_add(&cur_, f, len, err, sizeof err)) {
            finish_locked(); // full: a burst of its own from here
        } else if (n_) {
            n_++;
            bytes_ += len;
        }
        if (!n_) {
            // kept apart too: a burst of one frame goes as the frame itself
            if (!copy(&first_, f, len)) {
                lost_++;
                return;
            }
            slot_ = slot;
            n_ = 1;
            bytes_ = len;
            whole_ = codec_burst_begin(&cur_, rank_, err, sizeof err) == 0 &&
                     codec_burst_add(&cur_, f, len, err, sizeof err) == 0;
        }
        if (n_ >= BURST_FRAMES || bytes_ >= BURST_BYTES) finish_locked();
    }

    void finish_locked()
    {
        if (!n_) return;
        if (n_ == 1 || !whole_) {
            ready_.emplace_back(std::string(reinterpret_cast<const char *>(first_.data), first_.len), 1u);
        } else {
            codec_burst_finish(&cur_, wall_ns());
            ready_.emplace_back(std::string(reinterpret_cast<const char *>(cur_.data), cur_.len), n_);
        }
        n_ = 0;
        bytes_ = 0;
        codec_buf_reset(&cur_);
    }

    static bool copy(CodecBuf *b, const uint8_t *f, size_t len)
    {
        if (len > b->cap) {
            auto *p = static_cast<uint8_t *>(realloc(b->data, len));
            if (!p) return false;
            b->data = p;
            b->cap = len;
        }
        memcpy(b->data, f, len);
        b->len = len;
        return true;
    }

    int rank_;
    std::mutex mu_;
    CodecBuf cur_, first_, enc_;
    uint32_t n_ = 0;
    bool whole_ = false; // cur_ holds every frame since the first (else the first goes alone)
    size_t bytes_ = 0;
    int64_t slot_ = 0;
    uint64_t lost_ = 0;
    std::vector<std::pair<std::string, uint32_t>> ready_;
};

class Steps;
Steps *g_eng = nullptr; // the engine the eng_* calls act on (Steps.activate)

// One step's bookkeeping, as steps.py keeps it on the Python path (the
// same fields, the same rules), and its messages.
class Steps
{
  public:
    Steps(Burst &burst, int rank, int world, int64_t step, int64_t samples, double step_t0)
        : burst_(burst), world_(world > 0 ? world : 1), step_(step), samples_(samples), step_t0_(step_t0)
    {
        (void)rank;
    }
    ~Steps()
    {
        if (g_eng == this) g_eng = nullptr;
    }
    Steps(const Steps &) = delete;
    Steps &operator=(const Steps &) = delete;

    // A DataLoader batch of n samples: the step's first marks its forward's start.
    void batch(int64_t n)
    {
        batch_samples_ += n;
        if (batch_t_ == 0.0) batch_t_ = mono_s();
    }

    // A backward on a scalar begins, with its loss.
    void loss(double v)
    {
        bwd_t0_ = mono_s();
        if (first_bwd_t_ == 0.0) first_bwd_t_ = bwd_t0_;
        losses_.push_back(v);
    }

    // ... and it returned (or raised).
    void bwd_done() { bwd_s_ += mono_s() - bwd_t0_; }

    // The optimizer step begins: the buckets done since the last drain as
    // coll messages; (layout, dropped) when either came, else None.
    py::object before()
    {
        drain_colls();
        loss_mark_ = losses_.size();
        py::object layout = hook_take_layout();
        int64_t dropped = hook_take_dropped();
        opt_t0_ = mono_s();
        if (layout.is_none() && !dropped) return py::none();
        return py::make_tuple(layout, dropped);
    }

    // It returned: the step message. Returns (step, now, ready): the step
    // count, when the optimizer step returned (time.monotonic()), and
    // whether a finished burst waits for the uplink (uplink.pump()).
    py::tuple after(int64_t epoch, double lr, uint64_t drops)
    {
        double now = mono_s();
        // buckets of backwards inside the step (a closure's: LBFGS) are this
        // step's, out before its message
        drain_colls();
        // a closure evaluated several times inside the step (LBFGS): the
        // step's loss is its first evaluation, the one step() returns
        if (losses_.size() > loss_mark_ + 1) losses_.resize(loss_mark_ + 1);
        double loss = std::nan("");
        if (!losses_.empty()) {
            loss = 0.0;
            for (double v : losses_) loss += v;
        }
        step_++;
        samples_ += batch_samples_;
        Msg m;
        msg_init(&m, MSG_STEP);
        MsgStep &s = m.u.step;
        s.epoch = epoch;
        s.step = step_;
        s.loss = loss;
        s.lr = lr;
        s.samples = samples_;
        s.step_ms = (now - step_t0_) * 1e3;
        s.fwd_ms = (batch_t_ != 0.0 && first_bwd_t_ != 0.0) ? std::max(0.0, first_bwd_t_ - batch_t_) * 1e3 : 0.0;
        s.bwd_ms = bwd_s_ * 1e3;
        s.opt_ms = (now - opt_t0_) * 1e3;
        s.comm_ms = comm_s_ * 1e3;
        s.exposed_ms = exposed_s_ * 1e3;
        s.drops = drops + burst_.take_lost();
        burst_.add_msg(m, wall_ns());
        step_t0_ = now;
        losses_.clear();
        batch_samples_ = 0;
        batch_t_ = first_bwd_t_ = bwd_s_ = comm_s_ = exposed_s_ = 0.0;
        return py::make_tuple(step_, now, burst_.has_ready());
    }

    // The buckets done since the last drain, out as coll messages (the beat,
    // a flush: a backward without a step does not wait for one).
    void drain_colls()
    {
        recs_.clear();
        if (!hook_drain_records(recs_)) return;
        int64_t now = wall_ns();
        for (const Record &r : recs_) {
            if (r.error) continue; // DDP raises the all-reduce's error in the script
            Msg m;
            msg_init(&m, MSG_COLL);
            MsgColl &c = m.u.coll;
            int64_t dt = r.done_ns - r.start_ns;
            c.seq = r.seq;
            snprintf(c.op, sizeof c.op, "allreduce");
            c.bucket = static_cast<int32_t>(r.bucket);
            c.step = step_ + 1; // the step whose backward they belong to
            c.bytes = r.bytes;
            c.enq_ns = c.start_ns = r.start_ns;
            c.done_ns = r.done_ns;
            c.count = r.count;
            snprintf(c.dtype, sizeof c.dtype, "%s", r.dtype ? r.dtype : "");
            // nccl-tests' formulas, as collectives.send: bytes/ns is GB/s
            c.algbw_gbs = dt > 0 ? static_cast<double>(r.bytes) / static_cast<double>(dt) : 0.0;
            c.busbw_gbs = c.algbw_gbs * 2.0 * (world_ - 1) / world_;
            comm_s_ += dt / 1e9;
            if (r.exposed_ns >= 0) exposed_s_ += r.exposed_ns / 1e9;
            burst_.add_msg(m, now);
        }
    }

    int64_t step() const { return step_; }
    int64_t samples() const { return samples_; }
    double batch_t() const { return batch_t_; }
    void reset_t0(double t) { step_t0_ = t; }

  private:
    Burst &burst_;
    int world_;
    int64_t step_, samples_, batch_samples_ = 0;
    double step_t0_, batch_t_ = 0.0, first_bwd_t_ = 0.0, bwd_t0_ = 0.0, bwd_s_ = 0.0, opt_t0_ = 0.0;
    double comm_s_ = 0.0, exposed_s_ = 0.0;
    std::vector<double> losses_;
    size_t loss_mark_ = 0;
    std::vector<Record> recs_;
};

// ---- the calls the wrappers make every step, without pybind11's dispatch ----
// (about a thousand instructions a call: a step makes five). They act on
// the engine Steps.activate() named, the process's one.

// A tuple or list whose first item is a tensor of at least one dimension:
// its first size (steps.py's _batch_size, the usual case), else -1.
int64_t usual_batch(PyObject *b)
{
    PyObject *first = nullptr;
    if (PyTuple_CheckExact(b) && PyTuple_GET_SIZE(b) > 0)
        first = PyTuple_GET_ITEM(b, 0);
    else if (PyList_CheckExact(b) && PyList_GET_SIZE(b) > 0)
        first = PyList_GET_ITEM(b, 0);
    if (!first || !THPVariable_CheckExact(first)) return -1;
    const at::Tensor &t = THPVariable_Unpack(first);
    if (t.dim() == 0 || t.size(0) == 0) return -1;
    return t.size(0);
}

// eng_batch(batch) -> bool: a DataLoader batch of the usual shape counted
// (False: steps.py counts it itself, eng_batch_n).
PyObject *py_batch(PyObject *, PyObject *b)
{
    int64_t n = g_eng ? usual_batch(b) : -1;
    if (n < 0) Py_RETURN_FALSE;
    g_eng->batch(n);
    Py_RETURN_TRUE;
}

PyObject *py_batch_n(PyObject *, PyObject *n)
{
    long long v = PyLong_AsLongLong(n);
    if (v == -1 && PyErr_Occurred()) return nullptr;
    if (g_eng) g_eng->batch(v);
    Py_RETURN_NONE;
}

// eng_loss(tensor) -> bool: a backward on a scalar on the CPU begins: its
// value is the step's loss (False: not such a tensor, steps.py decides).
PyObject *py_loss(PyObject *, PyObject *obj)
{
    if (!g_eng || !THPVariable_Check(obj)) Py_RETURN_FALSE;
    try {
        const at::Tensor &t = THPVariable_Unpack(obj);
        if (t.numel() != 1 || !t.device().is_cpu()) Py_RETURN_FALSE;
        g_eng->loss(t.item<double>());
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
    Py_RETURN_TRUE;
}

PyObject *py_bwd_done(PyObject *, PyObject *)
{
    if (g_eng) g_eng->bwd_done();
    Py_RETURN_NONE;
}

// eng_before() -> None or (layout, dropped): Steps.before().
PyObject *py_before(PyObject *, PyObject *)
{
    if (!g_eng) Py_RETURN_NONE;
    try {
        return g_eng->before().release().ptr();
    } catch (py::error_already_set &e) {
        e.restore();
        return nullptr;
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
}

// eng_after(optimizer, epoch, drops) -> (step, now, ready): Steps.after with
// the learning rate of the optimizer's first parameter group.
PyObject *py_after(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "eng_after(optimizer, epoch, drops)");
        return nullptr;
    }
    if (!g_eng) Py_RETURN_NONE;
    double lr = 0.0;
    PyObject *groups = PyObject_GetAttrString(args[0], "param_groups");
    if (!groups) return nullptr;
    if (PyList_Check(groups) && PyList_GET_SIZE(groups) > 0 && PyDict_Check(PyList_GET_ITEM(groups, 0))) {
        PyObject *v = PyDict_GetItemString(PyList_GET_ITEM(groups, 0), "lr"); // borrowed
        if (v) {
            lr = PyFloat_AsDouble(v);
            if (lr == -1.0 && PyErr_Occurred()) PyErr_Clear(), lr = 0.0; // a tensor lr: as 0, not an error
        }
    }
    Py_DECREF(groups);
    long long epoch = PyLong_AsLongLong(args[1]);
    unsigned long long drops = PyLong_AsUnsignedLongLong(args[2]);
    if (PyErr_Occurred()) return nullptr;
    try {
        return g_eng->after(epoch, lr, drops).release().ptr();
    } catch (py::error_already_set &e) {
        e.restore();
        return nullptr;
    } catch (const std::exception &e) {
        PyErr_SetString(PyExc_RuntimeError, e.what());
        return nullptr;
    }
}

PyMethodDef g_fast[] = {
    { "eng_batch", py_batch, METH_O, "a DataLoader batch of the usual shape counted: bool" },
    { "eng_batch_n", py_batch_n, METH_O, "a batch of n samples counted" },
    { "eng_loss", py_loss, METH_O, "a backward on a CPU scalar begins: bool" },
    { "eng_bwd_done", py_bwd_done, METH_NOARGS, "the backward returned" },
    { "eng_before", py_before, METH_NOARGS, "the optimizer step begins: None or (layout, dropped)" },
    { "eng_after", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(py_after)), METH_FASTCALL,
      "eng_after(optimizer, epoch, drops) -> (step, now, ready)" },
    { nullptr, nullptr, 0, nullptr },
};

} // namespace

void steps_bind(py::module_ &m)
{
    py::class_<Burst>(m, "Burst", "a rank's telemetry burst (uplink.py): frames in, finished bursts out")
        .def(py::init<int>(), py::arg("rank"))
        .def(
            "add",
            [](Burst &b, py::bytes frame, int64_t now_ns) {
                char *p = nullptr;
                Py_ssize_t n = 0;
                if (PyBytes_AsStringAndSize(frame.ptr(), &p, &n) == 0)
                    b.add(reinterpret_cast<const uint8_t *>(p), static_cast<size_t>(n), now_ns);
            },
            py::arg("frame"), py::arg("now_ns"), "queue an encoded frame stamped now_ns (wall clock)")
        .def("finish", &Burst::finish, "what waits goes out with the next take()")
        .def("take", &Burst::take, "the finished bursts as [(frame, messages)], or None")
        .def("has_ready", &Burst::has_ready)
        .def("pending", &Burst::pending, "messages waiting in the burst being built");
    py::class_<Steps>(m, "Steps", "a rank's step bookkeeping and messages (steps.py's engine)")
        .def(py::init<Burst &, int, int, int64_t, int64_t, double>(), py::arg("burst"), py::arg("rank"),
             py::arg("world"), py::arg("step"), py::arg("samples"), py::arg("step_t0"), py::keep_alive<1, 2>())
        .def("batch", &Steps::batch)
        .def("loss", &Steps::loss)
        .def("bwd_done", &Steps::bwd_done)
        .def("before", &Steps::before)
        .def("after", &Steps::after, py::arg("epoch"), py::arg("lr"), py::arg("drops"))
        .def("drain", &Steps::drain_colls)
        .def("reset_t0", &Steps::reset_t0)
        .def(
            "activate", [](Steps &s) { g_eng = &s; },
            "the eng_* calls act on this engine from now on (keep it alive: r.engine)")
        .def_property_readonly("step", &Steps::step)
        .def_property_readonly("samples", &Steps::samples)
        .def_property_readonly("batch_t", &Steps::batch_t);
    if (PyModule_AddFunctions(m.ptr(), g_fast)) throw py::error_already_set();
}
