// _hook.h — what the comm hook (_hook.cpp) shares with the step engine
// (_steps.cpp) inside the ddptop._hook extension: each finished bucket's
// record, and the rare things a drain also brings (a new layout, records
// lost to a full ring). Not a Python face: the
// extension's module definition (_hook.cpp) binds both files' functions.
#ifndef DDPTOP_PY_HOOK_H
#define DDPTOP_PY_HOOK_H

#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

namespace py = pybind11;

// One bucket's all-reduce, done.
struct Record {
    int64_t key;        // the adapter's number: ordering, and the seq unless torch numbers
    int64_t seq;        // what goes on the wire
    int64_t bucket;
    int64_t bytes;
    int64_t start_ns;   // wall, at launch
    int64_t done_ns;    // wall, in the completion callback
    int64_t exposed_ns; // the last bucket's: launch to completion (monotonic), else -1
    bool error;
    int64_t count;      // the bucket's elements
    const char *dtype;  // its dtype's wire name ("float32"), static
};

// The records finished since the last drain, appended to out in the order
// they were pushed; returns how many. One consumer at a time (under the GIL).
size_t hook_drain_records(std::vector<Record> &out);
// The bucket layout ([(bytes, tensors)] per index) when it changed since the
// last call, else None.
py::object hook_take_layout();
// Records the ring had no room for since the last call.
int64_t hook_take_dropped();

// _steps.cpp: binds Burst and Steps into the module.
void steps_bind(py::module_ &m);

#endif
