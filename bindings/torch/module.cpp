/*
 * module.cpp -- the Python extension _tutti_torch: ProcessGroupTutti for PyTorch's pybind
 * world (tutti_torch/__init__.py registers it as the "tutti" backend).
 */
#include "pg.hpp"

#include <torch/csrc/utils/pybind.h>
#include <torch/python.h>

namespace py = pybind11;
using tutti_torch::ProcessGroupTutti;

PYBIND11_MODULE(_tutti_torch, m)
{
    m.doc() = "tutti as a torch.distributed backend (import tutti_torch to register it)";
    py::module::import("torch.distributed");

    py::class_<ProcessGroupTutti, tutti_torch::Base, c10::intrusive_ptr<ProcessGroupTutti>>(
        m, "ProcessGroupTutti")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                         double timeout_s) {
                 return c10::make_intrusive<ProcessGroupTutti>(store, rank, size, timeout_s);
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"),
             py::call_guard<py::gil_scoped_release>())
        .def("abort", &ProcessGroupTutti::abortComm, py::call_guard<py::gil_scoped_release>(),
             "Abort the communicator: what runs or waits fails at once, here and on the peers.")
        .def("error_state", &ProcessGroupTutti::errorState,
             "The communicator's error ('' while healthy).");

    m.def("version", [] { return tutti_version(); });
    m.def("env_check", [] {
        if (tutti_env_check() != TUTTI_SUCCESS)
            throw std::runtime_error(std::string("tutti: ") + tutti_last_error());
    });
}
