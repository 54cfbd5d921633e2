// parallel/communicator.cpp: the backend names, the group of one, the launcher's rank.
#include "parallel/communicator.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/error.h"

namespace tbd {

// Defined by parallel/mpi_comm.cpp and parallel/nccl_comm.cpp when the build has them.
#if TBD_HAVE_MPI
std::unique_ptr<Communicator> make_mpi_communicator(Backend& be);
bool mpi_initialized();
int mpi_world_rank();
int mpi_world_size();
#endif
#if TBD_HAVE_NCCL
std::unique_ptr<Communicator> make_nccl_communicator(Backend& be);
#endif

const char* to_string(DistBackend b) {
  switch (b) {
    case DistBackend::kNone:
      return "none";
    case DistBackend::kMpi:
      return "mpi";
    case DistBackend::kNccl:
      return "nccl";
  }
  return "?";
}

bool parse_dist_backend(const std::string& s, DistBackend* out) {
  for (DistBackend b : {DistBackend::kNone, DistBackend::kMpi, DistBackend::kNccl}) {
    if (s == to_string(b)) {
      *out = b;
      return true;
    }
  }
  return false;
}

bool dist_backend_built(DistBackend b) {
  switch (b) {
    case DistBackend::kNone:
      return true;
    case DistBackend::kMpi:
      return TBD_HAVE_MPI != 0;
    case DistBackend::kNccl:
      return TBD_HAVE_NCCL != 0;
  }
  return false;
}

double dist_now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

namespace {

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    if (const char* v = std::getenv(n); v && *v) return std::atoi(v);
  }
  return fallback;
}

class LocalComm final : public Communicator {
 public:
  explicit LocalComm(Backend& be) : be_(be) {}
  DistBackend backend() const override { return DistBackend::kNone; }
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string describe() const override { return "none (one process)"; }
  void broadcast(const Tensor&, int root) override {
    TBD_CHECK(root == 0, "broadcast: root ", root, " in a group of 1");
  }
  void allreduce_sum(const Tensor&) override {}
  double max(double v) override { return v; }
  double min(double v) override { return v; }
  double sum(double v) override { return v; }
  void barrier() override {}
  std::vector<double> allgather(double v) override { return {v}; }
  double timed_allreduce(const Tensor&) override { return 0; }
  void start_allreduce(int bucket, const Tensor&, float scale) override {
    // A group of one averages over one: the scale a data-parallel step asks for is 1.
    TBD_CHECK(scale == 1.f, "start_allreduce: scale ", scale, " in a group of 1");
    const double t = dist_now_s();
    events_.push_back(CommEvent{bucket, t, t, t});
  }
  std::vector<CommEvent> wait_all() override {
    be_.synchronize();
    return std::exchange(events_, {});
  }
  [[noreturn]] void abort(const std::string& why) override {
    std::fprintf(stderr, "tbd: %s\n", why.c_str());
    std::exit(1);
  }

 private:
  Backend& be_;
  std::vector<CommEvent> events_;
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator(Backend& be) {
  return std::make_unique<LocalComm>(be);
}

std::unique_ptr<Communicator> make_communicator(DistBackend b, Backend& be) {
  TBD_CHECK(dist_backend_built(b), "--tbd_dist=", to_string(b), ": this tbd was built without ",
            b == DistBackend::kMpi ? "MPI (install libopenmpi-dev and reconfigure)"
                                   : "NCCL (needs the CUDA backend and nccl.h under CUDA_HOME)");
  switch (b) {
    case DistBackend::kNone:
      return make_local_communicator(be);
    case DistBackend::kMpi:
#if TBD_HAVE_MPI
      TBD_CHECK(be.kind() == DeviceKind::kCpu, "--tbd_dist=mpi moves host memory: it needs ",
                "the CPU backend (--tbd_backend=cpu); on CUDA use --tbd_dist=nccl");
      return make_mpi_communicator(be);
#else
      break;
#endif
    case DistBackend::kNccl:
#if TBD_HAVE_NCCL
      TBD_CHECK(be.kind() == DeviceKind::kCuda, "--tbd_dist=nccl reduces device memory: it ",
                "needs the CUDA backend (--tbd_backend=cuda); on the CPU use --tbd_dist=mpi");
      return make_nccl_communicator(be);
#else
      break;
#endif
  }
  TBD_FAIL("--tbd_dist=", to_string(b), " is not built");
}

int launch_rank() {
#if TBD_HAVE_MPI
  if (mpi_initialized()) return mpi_world_rank();
#endif
  return env_int({"OMPI_COMM_WORLD_RANK", "PMI_RANK", "TBD_RANK", "RANK"}, 0);
}

int launch_local_rank() {
  return env_int({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "TBD_LOCAL_RANK", "LOCAL_RANK"},
                 0);
}

int launch_size() {
#if TBD_HAVE_MPI
  if (mpi_initialized()) return mpi_world_size();
#endif
  return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "TBD_WORLD_SIZE", "WORLD_SIZE"}, 1);
}

#if !TBD_HAVE_MPI
bool dist_init(int*, char***) { return false; }
void dist_finalize() {}
#endif

}  // namespace tbd
