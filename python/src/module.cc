// hptrain._C: the Python package's extension (python/hptrain), over the worker session
// (runtime/cli/worker_session.h) and the user loop (runtime/train/user_loop.h). The Python side
// (hptrain/__init__.py) is the API users call; this module is its plumbing. Every call that can
// wait on the network releases the GIL; errors raise hptrain.Error with absl's message.
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/extension.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/cli/worker_session.h"
#include "runtime/train/data/dataset.h"
#include "runtime/train/data/sampler.h"
#include "runtime/train/models/model.h"
#include "runtime/train/preflight.h"
#include "runtime/train/threads.h"
#include "runtime/train/user_loop.h"

namespace py = pybind11;

namespace hptrain::python {
namespace {

// Raised for every failed call: hptrain.Error, a RuntimeError.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

void Check(const absl::Status& status) {
  if (!status.ok()) throw Error(std::string(status.message()));
}

template <typename T>
T Check(absl::StatusOr<T> value) {
  Check(value.status());
  return *std::move(value);
}

// The process's session with its job.
class Session {
 public:
  static std::shared_ptr<Session> FromEnvironment() {
    cli::WorkerConfig config = Check(cli::WorkerConfigFromEnvironment("hp.init()"));
    auto session = std::make_shared<Session>();
    {
      py::gil_scoped_release release;
      session->session_ = Check(cli::WorkerSession::Create(config));
    }
    return session;
  }

  cli::WorkerSession& get() { return *session_; }
  const job::JobSpec& spec() const { return session_->spec(); }

  void Finish(bool ok, const std::string& message) {
    if (!session_ || finished_) return;
    finished_ = true;
    py::gil_scoped_release release;
    absl::Status status = ok ? absl::OkStatus() : absl::UnknownError(message);
    (void)session_->Finish(status);
  }

 private:
  std::unique_ptr<cli::WorkerSession> session_;
  bool finished_ = false;
};

// The training loop's exchange side, for the user's model.
class Loop {
 public:
  Loop(std::shared_ptr<Session> session, std::vector<torch::Tensor> parameters,
       std::vector<std::string> parameter_names, std::vector<torch::Tensor> buffers,
       std::vector<std::string> buffer_names, bool own_optimizer, int64_t dataset_size,
       py::object before_checkpoint)
      : session_(std::move(session)), before_checkpoint_(std::move(before_checkpoint)) {
    train::UserModel model{std::move(parameters), std::move(parameter_names), std::move(buffers),
                           std::move(buffer_names)};
    train::UserLoopOptions options;
    options.own_optimizer = own_optimizer;
    options.dataset_size = dataset_size;
    if (!before_checkpoint_.is_none()) {
      options.before_checkpoint = [this](int64_t step) -> absl::Status {
        py::gil_scoped_acquire acquire;
        try {
          before_checkpoint_(step);
        } catch (py::error_already_set& e) {
          return absl::InternalError(e.what());
        }
        return absl::OkStatus();
      };
    }
    cli::WorkerSession& s = session_->get();
    py::gil_scoped_release release;
    loop_ = Check(train::UserLoop::Create(s.spec(), s.TrainerOptions(), s.communicator(),
                                          s.TrainerCallbacks(), std::move(model),
                                          std::move(options)));
    s.SetReady();
  }

  train::UserLoop& get() { return *loop_; }

 private:
  std::shared_ptr<Session> session_;
  py::object before_checkpoint_;
  std::unique_ptr<train::UserLoop> loop_;
};

// The job's data set split ("train" or "test") as the built-in trainer reads it: inputs float32
// [N, C, H, W] (normalized as spec.dataset says), targets int64 [N].
std::pair<torch::Tensor, torch::Tensor> JobDataset(Session& session, const std::string& split) {
  if (split != "train" && split != "test") {
    throw Error("split must be \"train\" or \"test\", got \"" + split + "\"");
  }
  const job::JobSpec& spec = session.spec();
  if (spec.dataset.name.empty()) {
    throw Error("the job has no spec.dataset: the program reads its own data");
  }
  py::gil_scoped_release release;
  std::unique_ptr<train::Dataset> data = Check(train::OpenDataset(
      spec.dataset, split == "train" ? train::Split::kTrain : train::Split::kTest, spec.seed));
  std::vector<int64_t> all(static_cast<size_t>(data->size()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  train::Batch batch = Check(data->Gather(all));
  return {batch.inputs, batch.targets};
}

// The built-in model zoo's initial parameters for `name` (spec.model.name) with the job's seed
// and data shape: names and tensors, in registration order. For comparing a script's model
// with the built-in trainer's.
std::vector<std::pair<std::string, torch::Tensor>> ZooParameters(Session& session,
                                                                 const std::string& name) {
  const job::JobSpec& spec = session.spec();
  py::gil_scoped_release release;
  std::unique_ptr<train::Dataset> data =
      Check(train::OpenDataset(spec.dataset, train::Split::kTest, spec.seed));
  job::ModelSpec model_spec;
  model_spec.name = name;
  std::unique_ptr<train::Model> model =
      Check(train::CreateModel(model_spec, train::ModelShapeFor(*data), spec.seed));
  std::vector<std::pair<std::string, torch::Tensor>> result;
  const std::vector<torch::Tensor> params = model->parameters();
  const std::vector<std::string> names = model->parameter_names();
  for (size_t i = 0; i < params.size(); ++i) result.emplace_back(names[i], params[i].detach());
  return result;
}

}  // namespace
}  // namespace hptrain::python

PYBIND11_MODULE(_C, m) {
  using hptrain::python::Check;
  using hptrain::python::Loop;
  using hptrain::python::Session;
  m.doc() = "hptrain's extension: the worker session and the user loop (use the hptrain package)";
  py::register_exception<hptrain::python::Error>(m, "Error", PyExc_RuntimeError);

  py::class_<Session, std::shared_ptr<Session>>(m, "Session")
      .def_static("from_environment", &Session::FromEnvironment)
      .def_property_readonly("rank", [](Session& s) { return s.get().rank(); })
      .def_property_readonly("world", [](Session& s) { return s.get().world(); })
      .def_property_readonly("device", [](Session& s) { return s.get().device().device; })
      .def_property_readonly("job", [](Session& s) { return s.spec().name; })
      .def_property_readonly("strategy", [](Session& s) { return s.spec().strategy.type; })
      .def_property_readonly("epochs", [](Session& s) { return s.spec().epochs; })
      .def_property_readonly("max_steps", [](Session& s) { return s.spec().max_steps; })
      .def_property_readonly("global_batch_size",
                             [](Session& s) { return s.spec().global_batch_size; })
      .def_property_readonly("seed", [](Session& s) { return s.spec().seed; })
      .def_property_readonly("deterministic", [](Session& s) { return s.spec().deterministic; })
      .def_property_readonly("checkpoint_path",
                             [](Session& s) { return s.spec().checkpoint.path; })
      .def_property_readonly("resume", [](Session& s) { return s.get().config().resume; })
      .def_property_readonly("allocation",
                             [](Session& s) { return s.get().initial_allocation(); })
      .def("choose_threads",
           [](Session& s) {
             const hptrain::train::ThreadChoice choice = hptrain::train::ChooseThreads(
                 s.spec().threads, s.get().config().workers_on_host);
             s.get().SetTorchThreads(choice.threads, choice.basis);
             return choice.threads;
           })
      .def_property_readonly("stop_requested",
                             [](Session& s) { return s.get().stop_requested(); })
      .def("finish", &Session::Finish, py::arg("ok"), py::arg("message") = "");

  py::class_<Loop>(m, "Loop")
      .def(py::init<std::shared_ptr<Session>, std::vector<torch::Tensor>,
                    std::vector<std::string>, std::vector<torch::Tensor>,
                    std::vector<std::string>, bool, int64_t, py::object>(),
           py::arg("session"), py::arg("parameters"), py::arg("parameter_names"),
           py::arg("buffers"), py::arg("buffer_names"), py::arg("own_optimizer"),
           py::arg("dataset_size"), py::arg("before_checkpoint"))
      .def("restore",
           [](Loop& l) {
             py::gil_scoped_release release;
             return Check(l.get().Restore());
           })
      .def("batch_indices",
           [](Loop& l, int64_t step) {
             py::gil_scoped_release release;
             return Check(l.get().BatchIndices(step));
           })
      .def("wait_for_gradients",
           [](Loop& l) {
             py::gil_scoped_release release;
             Check(l.get().WaitForGradients());
           })
      .def("end_step",
           [](Loop& l) {
             py::gil_scoped_release release;
             Check(l.get().EndStep());
           })
      .def("report", [](Loop& l, double loss) { l.get().Report(loss); })
      .def("synchronize_for_evaluation",
           [](Loop& l) {
             py::gil_scoped_release release;
             Check(l.get().SynchronizeForEvaluation());
           })
      .def("report_evaluation",
           [](Loop& l, double accuracy, double loss) {
             py::gil_scoped_release release;
             Check(l.get().ReportEvaluation(accuracy, loss));
           })
      .def("save_checkpoint",
           [](Loop& l) {
             py::gil_scoped_release release;
             Check(l.get().SaveCheckpoint());
           })
      .def_property_readonly("step", [](Loop& l) { return l.get().position().step; })
      .def_property_readonly("epoch", [](Loop& l) { return l.get().position().epoch; })
      .def_property_readonly("step_in_epoch",
                             [](Loop& l) { return l.get().position().step_in_epoch; })
      .def_property_readonly("steps_per_epoch", [](Loop& l) { return l.get().steps_per_epoch(); })
      .def_property_readonly("total_steps", [](Loop& l) { return l.get().total_steps(); })
      .def_property_readonly("done", [](Loop& l) { return l.get().done(); })
      .def_property_readonly("num_parameters", [](Loop& l) { return l.get().num_parameters(); });

  m.def("job_dataset", &hptrain::python::JobDataset, py::arg("session"), py::arg("split"));
  m.def("zoo_parameters", &hptrain::python::ZooParameters, py::arg("session"), py::arg("name"));
  m.def("steps_per_epoch", &hptrain::train::StepsPerEpoch, py::arg("samples"),
        py::arg("global_batch"));
}
