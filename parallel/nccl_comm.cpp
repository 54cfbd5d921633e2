// parallel/nccl_comm.cpp: the NCCL communicator (CUDA backend), device buffers, its own stream.
//
// As llm.c's multi-GPU path does: one dedicated NCCL stream; a bucket's all-reduce is queued on
// it after an event recorded on the compute stream (so it reads finished gradients) and runs
// while the compute stream goes on with backward; wait_all makes the compute stream wait for
// the last one. Averaging is ncclAvg. Bootstrap (nccl_bootstrap_id): with MPI running, rank 0's
// ncclGetUniqueId is broadcast over MPI (DeepBench, llm.c); without MPI the ranks come from the
// environment (TBD_RANK / RANK, TBD_WORLD_SIZE / WORLD_SIZE) and NCCL_COMM_ID=<host>:<port>
// names the bootstrap root, which every rank's ncclGetUniqueId then reads (NCCL's own
// mechanism: rank 0's ncclCommInitRank listens there). One GPU per rank: NCCL refuses two ranks
// on one device.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backends/cuda/cuda_backend.h"
#include "core/error.h"
#include "parallel/communicator.h"
#if TBD_HAVE_MPI
#include <mpi.h>
#endif

namespace tbd {

bool mpi_initialized();  // parallel/mpi_comm.cpp (with MPI)

namespace {

struct NcclTraits {
  static constexpr const char* kLibrary = "NCCL";
  static bool ok(ncclResult_t s) { return s == ncclSuccess; }
  static std::string message(ncclResult_t s) { return ncclGetErrorString(s); }
};
#define TBD_NCCL_CHECK(call) TBD_STATUS_CHECK(::tbd::NcclTraits, call)
using cuda::CudaTraits;

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    if (const char* v = std::getenv(n); v && *v) return std::atoi(v);
  }
  return fallback;
}

}  // namespace

namespace {

// The id every rank passes to ncclCommInitRank, and this rank's place (see the top).
ncclUniqueId bootstrap_id(int* rank, int* size) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
#if TBD_HAVE_MPI
  if (mpi_initialized()) {
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    if (*rank == 0) TBD_NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    return id;
  }
#endif
  *rank = env_int({"TBD_RANK", "RANK"}, 0);
  *size = env_int({"TBD_WORLD_SIZE", "WORLD_SIZE"}, 1);
  TBD_CHECK(*size >= 1 && *rank >= 0 && *rank < *size, "--tbd_dist=nccl: rank ", *rank, " of ",
            *size, " (TBD_RANK, TBD_WORLD_SIZE) is not a place in the group");
  TBD_CHECK(*size == 1 || std::getenv("NCCL_COMM_ID") != nullptr, "--tbd_dist=nccl with ", *size,
            " ranks and no MPI: set NCCL_COMM_ID=<host>:<port> "
            "(rank 0's address) in every rank's environment, or launch with mpirun");
  TBD_NCCL_CHECK(ncclGetUniqueId(&id));
  return id;
}

class NcclComm final : public Communicator {
 public:
  explicit NcclComm(Backend& be) : be_(dynamic_cast<cuda::CudaBackend&>(be)) {
    ncclUniqueId id = bootstrap_id(&rank_, &size_);
    local_rank_ = launch_local_rank();
    TBD_STATUS_CHECK(CudaTraits, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TBD_STATUS_CHECK(CudaTraits, cudaMalloc(&scalars_, 2 * sizeof(double) * (size_ + 1)));
    TBD_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    int v = 0;
    ncclGetVersion(&v);
    library_ = "NCCL " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
               std::to_string(v % 100);
  }
  ~NcclComm() override {
    for (Pending& p : pending_) destroy(p);
    if (comm_) ncclCommDestroy(comm_);
    if (scalars_) cudaFree(scalars_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  DistBackend backend() const override { return DistBackend::kNccl; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  std::string describe() const override {
    return library_ + " (own stream, ncclAvg; rank 0 on CUDA device " +
           std::to_string(be_.device()) + ")";
  }

  void broadcast(const Tensor& t, int root) override {
    after_compute();
    TBD_NCCL_CHECK(ncclBroadcast(t.raw(), t.raw(), static_cast<size_t>(t.numel()), ncclFloat32,
                                 root, comm_, stream_));
    sync();
  }
  void allreduce_sum(const Tensor& t) override {
    after_compute();
    TBD_NCCL_CHECK(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), ncclFloat32,
                                 ncclSum, comm_, stream_));
    sync();
  }
  double max(double v) override { return scalar(v, ncclMax); }
  double min(double v) override { return scalar(v, ncclMin); }
  double sum(double v) override { return scalar(v, ncclSum); }
  void barrier() override { scalar(0, ncclSum); }
  std::vector<double> allgather(double v) override {
    TBD_STATUS_CHECK(CudaTraits,
                     cudaMemcpyAsync(scalars_, &v, sizeof v, cudaMemcpyHostToDevice, stream_));
    TBD_NCCL_CHECK(ncclAllGather(scalars_, scalars_ + 1, 1, ncclFloat64, comm_, stream_));
    std::vector<double> all(static_cast<std::size_t>(size_));
    TBD_STATUS_CHECK(CudaTraits, cudaMemcpyAsync(all.data(), scalars_ + 1, sizeof(double) * size_,
                                                 cudaMemcpyDeviceToHost, stream_));
    sync();
    return all;
  }

  double timed_allreduce(const Tensor& t) override {
    after_compute();
    scalar(0, ncclSum);  // the barrier
    cudaEvent_t a, b;
    TBD_STATUS_CHECK(CudaTraits, cudaEventCreate(&a));
    TBD_STATUS_CHECK(CudaTraits, cudaEventCreate(&b));
    TBD_STATUS_CHECK(CudaTraits, cudaEventRecord(a, stream_));
    TBD_NCCL_CHECK(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), ncclFloat32,
                                 ncclSum, comm_, stream_));
    TBD_STATUS_CHECK(CudaTraits, cudaEventRecord(b, stream_));
    sync();
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms * 1e-3;
  }

  void start_allreduce(int bucket, const Tensor& t, float scale) override {
    Pending p;
    p.event.bucket = bucket;
    p.event.queued_s = dist_now_s();
    TBD_STATUS_CHECK(CudaTraits, cudaEventCreate(&p.start));
    TBD_STATUS_CHECK(CudaTraits, cudaEventCreate(&p.end));
    if (pending_.empty()) {
      base_s_ = p.event.queued_s;
      TBD_STATUS_CHECK(CudaTraits, cudaEventCreate(&base_));
      TBD_STATUS_CHECK(CudaTraits, cudaEventRecord(base_, be_.stream()));
    }
    after_compute();  // the bucket's gradients are queued on the compute stream before this
    const bool avg = size_ > 1 && scale == 1.f / static_cast<float>(size_);
    TBD_CHECK(avg || scale == 1.f, "NCCL all-reduce: scale ", scale, " is neither 1 nor 1/P");
    TBD_STATUS_CHECK(CudaTraits, cudaEventRecord(p.start, stream_));
    TBD_NCCL_CHECK(ncclAllReduce(t.raw(), t.raw(), static_cast<size_t>(t.numel()), ncclFloat32,
                                 avg ? ncclAvg : ncclSum, comm_, stream_));
    TBD_STATUS_CHECK(CudaTraits, cudaEventRecord(p.end, stream_));
    pending_.push_back(p);
  }
  std::vector<CommEvent> wait_all() override {
    std::vector<CommEvent> out;
    if (pending_.empty()) return out;
    // The optimizer (on the compute stream) runs after the last bucket.
    TBD_STATUS_CHECK(CudaTraits, cudaStreamWaitEvent(be_.stream(), pending_.back().end, 0));
    sync();
    for (Pending& p : pending_) {
      float a = 0, b = 0;
      cudaEventElapsedTime(&a, base_, p.start);
      cudaEventElapsedTime(&b, base_, p.end);
      p.event.start_s = base_s_ + a * 1e-3;
      p.event.end_s = base_s_ + b * 1e-3;
      out.push_back(p.event);
      destroy(p);
    }
    pending_.clear();
    cudaEventDestroy(base_);
    base_ = nullptr;
    return out;
  }

  [[noreturn]] void abort(const std::string& why) override {
    std::fprintf(stderr, "tbd: rank %d of %d: %s; aborting every rank\n", rank_, size_,
                 why.c_str());
    std::fflush(stderr);
    ncclCommAbort(comm_);
#if TBD_HAVE_MPI
    if (mpi_initialized()) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    std::exit(1);  // without MPI, the other ranks' NCCL calls fail once this one is gone
  }

 private:
  struct Pending {
    CommEvent event;
    cudaEvent_t start = nullptr, end = nullptr;
  };
  static void destroy(Pending& p) {
    if (p.start) cudaEventDestroy(p.start);
    if (p.end) cudaEventDestroy(p.end);
    p.start = p.end = nullptr;
  }
  // The NCCL stream waits for what the compute stream has queued so far.
  void after_compute() {
    cudaEvent_t e;
    TBD_STATUS_CHECK(CudaTraits, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    TBD_STATUS_CHECK(CudaTraits, cudaEventRecord(e, be_.stream()));
    TBD_STATUS_CHECK(CudaTraits, cudaStreamWaitEvent(stream_, e, 0));
    cudaEventDestroy(e);  // released once the stream has passed it
  }
  void sync() { TBD_STATUS_CHECK(CudaTraits, cudaStreamSynchronize(stream_)); }
  double scalar(double v, ncclRedOp_t op) {
    TBD_STATUS_CHECK(CudaTraits,
                     cudaMemcpyAsync(scalars_, &v, sizeof v, cudaMemcpyHostToDevice, stream_));
    TBD_NCCL_CHECK(ncclAllReduce(scalars_, scalars_, 1, ncclFloat64, op, comm_, stream_));
    double out = 0;
    TBD_STATUS_CHECK(CudaTraits,
                     cudaMemcpyAsync(&out, scalars_, sizeof out, cudaMemcpyDeviceToHost, stream_));
    sync();
    return out;
  }

  cuda::CudaBackend& be_;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  double* scalars_ = nullptr;  // 1 + size doubles (scalar reductions, allgather)
  std::string library_;
  std::vector<Pending> pending_;
  cudaEvent_t base_ = nullptr;  // recorded with the first bucket: the events' time origin
  double base_s_ = 0;
};

}  // namespace

std::string nccl_bootstrap_id(int* rank, int* size) {
  const ncclUniqueId id = bootstrap_id(rank, size);
  return std::string(id.internal, sizeof id.internal);
}

std::unique_ptr<Communicator> make_nccl_communicator(Backend& be) {
  return std::make_unique<NcclComm>(be);
}

}  // namespace tbd
