// parallel/mpi_comm.cpp: the MPI communicator (Open MPI here), host buffers, one comm thread.
//
// Every MPI call after MPI_Init_thread is made on the communicator's CommThread (so
// MPI_THREAD_SERIALIZED suffices and a blocking MPI_Allreduce there overlaps the main thread's
// backward). Averaging: sum in the collective, then multiply by 1/P on the comm thread (exact for
// P a power of two, PyTorch DDP's default hook).
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <utility>

#include "core/error.h"
#include "parallel/comm_thread.h"
#include "parallel/communicator.h"

namespace tbd {
namespace {

std::atomic<bool> g_we_initialized{false};

void mpi_check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  TBD_FAIL("MPI error in ", call, ": ", std::string(msg, len));
}
#define TBD_MPI(call) mpi_check((call), #call)

// MPI counts are int: a larger buffer goes in pieces of at most INT_MAX elements.
template <class F>
void in_pieces(int64_t n, F&& f) {
  for (int64_t off = 0; off < n; off += INT_MAX)
    f(off, static_cast<int>(std::min<int64_t>(INT_MAX, n - off)));
}

class MpiComm final : public Communicator {
 public:
  explicit MpiComm(Backend& be) : be_(be) {
    comm_thread_.run([this] {
      TBD_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm_));
      TBD_MPI(MPI_Comm_rank(comm_, &rank_));
      TBD_MPI(MPI_Comm_size(comm_, &size_));
      MPI_Comm local;
      TBD_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &local));
      TBD_MPI(MPI_Comm_rank(local, &local_rank_));
      TBD_MPI(MPI_Comm_free(&local));
      char version[MPI_MAX_LIBRARY_VERSION_STRING];
      int len = 0;
      TBD_MPI(MPI_Get_library_version(version, &len));
      library_.assign(version, static_cast<std::size_t>(len));
      if (auto cut = library_.find_first_of(",\n"); cut != std::string::npos) library_.resize(cut);
      int provided = 0;
      TBD_MPI(MPI_Query_thread(&provided));
      thread_level_ = provided;
    });
  }
  ~MpiComm() override {
    comm_thread_.run([this] { MPI_Comm_free(&comm_); });
  }

  DistBackend backend() const override { return DistBackend::kMpi; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string describe() const override {
    const char* level = thread_level_ == MPI_THREAD_MULTIPLE     ? "multiple"
                        : thread_level_ == MPI_THREAD_SERIALIZED ? "serialized"
                                                                 : "below serialized";
    return library_ + " (thread level " + level + ", every call on one comm thread)";
  }

  void broadcast(const Tensor& t, int root) override {
    check_host(t);
    comm_thread_.run([&] {
      in_pieces(t.numel(), [&](int64_t off, int n) {
        TBD_MPI(MPI_Bcast(t.f32() + off, n, MPI_FLOAT, root, comm_));
      });
    });
  }
  void allreduce_sum(const Tensor& t) override {
    check_host(t);
    comm_thread_.run([&] { reduce_in_place(t.f32(), t.numel(), 1.f); });
  }
  double max(double v) override { return reduce_scalar(v, MPI_MAX); }
  double min(double v) override { return reduce_scalar(v, MPI_MIN); }
  double sum(double v) override { return reduce_scalar(v, MPI_SUM); }
  void barrier() override {
    comm_thread_.run([&] { TBD_MPI(MPI_Barrier(comm_)); });
  }
  std::vector<double> allgather(double v) override {
    std::vector<double> all(static_cast<std::size_t>(size_));
    comm_thread_.run(
        [&] { TBD_MPI(MPI_Allgather(&v, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, comm_)); });
    return all;
  }

  double timed_allreduce(const Tensor& t) override {
    check_host(t);
    double s = 0;
    comm_thread_.run([&] {
      TBD_MPI(MPI_Barrier(comm_));
      const double t0 = dist_now_s();
      reduce_in_place(t.f32(), t.numel(), 1.f);
      s = dist_now_s() - t0;
    });
    return s;
  }

  void start_allreduce(int bucket, const Tensor& t, float scale) override {
    check_host(t);
    const double queued = dist_now_s();
    float* p = t.f32();
    const int64_t n = t.numel();
    comm_thread_.post([this, bucket, p, n, scale, queued] {
      const double start = dist_now_s();
      reduce_in_place(p, n, scale);
      const double end = dist_now_s();
      std::lock_guard<std::mutex> lock(events_mu_);
      events_.push_back(CommEvent{bucket, queued, start, end});
    });
  }
  std::vector<CommEvent> wait_all() override {
    comm_thread_.drain();
    std::lock_guard<std::mutex> lock(events_mu_);
    return std::exchange(events_, {});
  }

  [[noreturn]] void abort(const std::string& why) override {
    std::fprintf(stderr, "tbd: rank %d of %d: %s; aborting every rank\n", rank_, size_,
                 why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::exit(1);  // MPI_Abort does not return; the compiler does not know
  }

 private:
  void check_host(const Tensor& t) const {
    TBD_CHECK(t.dtype() == DType::kF32 && be_.kind() == DeviceKind::kCpu,
              "MPI collectives take f32 host tensors, got ", t.desc().to_string());
  }
  // On the comm thread.
  void reduce_in_place(float* p, int64_t n, float scale) {
    if (size_ > 1) {
      in_pieces(n, [&](int64_t off, int k) {
        TBD_MPI(MPI_Allreduce(MPI_IN_PLACE, p + off, k, MPI_FLOAT, MPI_SUM, comm_));
      });
    }
    if (scale != 1.f) {
      for (int64_t i = 0; i < n; ++i) p[i] *= scale;
    }
  }
  double reduce_scalar(double v, MPI_Op op) {
    double out = v;
    comm_thread_.run([&] { TBD_MPI(MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, op, comm_)); });
    return out;
  }

  Backend& be_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, thread_level_ = 0;
  std::string library_;
  std::mutex events_mu_;
  std::vector<CommEvent> events_;
  CommThread comm_thread_;  // last: destroyed (joined) first
};

}  // namespace

bool mpi_initialized() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}
int mpi_world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int mpi_world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

bool dist_init(int* argc, char*** argv) {
  if (mpi_initialized()) return true;
  int provided = 0;
  TBD_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided));
  g_we_initialized = true;
  std::atexit(dist_finalize);
  TBD_CHECK(provided >= MPI_THREAD_SERIALIZED, "MPI provides thread level ", provided,
            ", below MPI_THREAD_SERIALIZED, which the comm thread needs");
  return true;
}

void dist_finalize() {
  if (g_we_initialized.exchange(false) && mpi_initialized()) MPI_Finalize();
}

std::unique_ptr<Communicator> make_mpi_communicator(Backend& be) {
  TBD_CHECK(mpi_initialized(), "--tbd_dist=mpi: MPI is not initialised (dist_init)");
  return std::make_unique<MpiComm>(be);
}

}  // namespace tbd
