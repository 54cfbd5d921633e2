// parallel/communicator.h: the ranks of a data-parallel run and their collectives.
//
// A Communicator is one process's view of a group of P ranks (MPI across processes and
// machines, NCCL across GPUs, or just this process). Collectives act in place on f32 tensors of
// the run's backend (host memory for MPI, device memory for NCCL). Two kinds of call:
//   - blocking ones (broadcast, allreduce_sum, the scalar reductions, barrier), for set-up,
//     timing and the all-reduce benchmarks;
//   - start_allreduce / wait_all, the asynchronous all-reduce of a data-parallel step's
//     gradient buckets, started in bucket order on every rank while backward goes on.
// Every rank must make the same calls in the same order (as with MPI itself); a rank that
// fails calls abort(), which ends every rank with the message rather than leaving the others
// waiting in a collective.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/backend.h"
#include "core/tensor.h"

namespace tbd {

enum class DistBackend { kNone, kMpi, kNccl };
const char* to_string(DistBackend b);  // "none", "mpi", "nccl"
// Parses --tbd_dist's value; false for an unknown name.
bool parse_dist_backend(const std::string& s, DistBackend* out);
// Whether this build has the backend (MPI found at configure time; NCCL with CUDA).
bool dist_backend_built(DistBackend b);

// When one asynchronous all-reduce ran, in seconds on the steady clock of its rank.
struct CommEvent {
  int bucket = -1;
  double queued_s = 0;  // start_allreduce was called (the bucket's last gradient was written)
  double start_s = 0;   // the collective began (the comm thread or stream reached it)
  double end_s = 0;     // it finished
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual DistBackend backend() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ranks on this machine before this one (the GPU a rank uses).
  virtual int local_rank() const = 0;
  // What the library is, for the run's context ("Open MPI v4.1.4, MPI 3.1, thread level
  // serialized").
  virtual std::string describe() const = 0;

  // ---- blocking ----
  virtual void broadcast(const Tensor& t, int root) = 0;
  // t = sum over ranks of t, in place.
  virtual void allreduce_sum(const Tensor& t) = 0;
  virtual double max(double v) = 0;
  virtual double min(double v) = 0;
  virtual double sum(double v) = 0;
  virtual void barrier() = 0;
  // Every rank's `v` (rank order), for the context and a timeline gathered on rank 0.
  virtual std::vector<double> allgather(double v) = 0;
  // A barrier, then t = sum over ranks of t, in place, timed alone on the thread (or stream)
  // that makes the call, as OSU's osu_allreduce and nccl-tests time it: the library's time, not
  // the hand-over to that thread. Returns this rank's seconds (the AllReduce rows).
  virtual double timed_allreduce(const Tensor& t) = 0;

  // ---- a data-parallel step's buckets ----
  // Starts t = scale * (sum over ranks of t) in place, for bucket `bucket`; buckets are started
  // in increasing order on every rank, and t must not be touched until wait_all() returns. It
  // reduces what the backend's work queued before the call wrote (NCCL orders its stream after
  // the compute stream with an event; the CPU backend has finished it already).
  virtual void start_allreduce(int bucket, const Tensor& t, float scale) = 0;
  // Waits for every started all-reduce; returns their events in start order and forgets them.
  virtual std::vector<CommEvent> wait_all() = 0;

  // Ends every rank of the group with `why` (printed by this rank first). Does not return.
  [[noreturn]] virtual void abort(const std::string& why) = 0;

 protected:
  Communicator() = default;
};

// The group of one (no library): every collective is the identity (a scale still applies).
std::unique_ptr<Communicator> make_local_communicator(Backend& be);

// The communicator of `b` over every rank of the launch (MPI_COMM_WORLD; NCCL from MPI or from
// the environment, see parallel/nccl_comm.cpp). Throws a named error when the backend was not
// built or does not fit `be` (MPI moves host memory: the CPU backend; NCCL: CUDA). MPI is
// initialised on the first call (dist_init) and finalised at exit.
std::unique_ptr<Communicator> make_communicator(DistBackend b, Backend& be);

// Initialises the process's MPI (MPI_THREAD_SERIALIZED, the comm thread makes every call)
// when the build has it: call first thing in main() of a program that may run under mpirun.
// Returns false, doing nothing, without MPI. Idempotent.
bool dist_init(int* argc, char*** argv);
// This process's rank and size as the launcher says (MPI if initialised, else the environment:
// OMPI_COMM_WORLD_RANK, PMI_RANK, RANK / TBD_RANK; 0 and 1 when none is set).
int launch_rank();
int launch_size();
// This process's rank among those of its node, from the launcher's environment
// (OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID, TBD_LOCAL_RANK, LOCAL_RANK; 0 when none is set).
// With --tbd_dist=nccl it picks the rank's GPU: local rank modulo the visible devices (one GPU
// per rank when all are visible; device 0 when the launcher gives each rank its own
// CUDA_VISIBLE_DEVICES).
int launch_local_rank();
// Ends MPI if dist_init started it (registered with atexit by dist_init as well).
void dist_finalize();

// With NCCL built: the bootstrap of --tbd_dist=nccl without a GPU (ncclGetUniqueId only opens
// a socket): the id every rank would pass to ncclCommInitRank, as its bytes, and this rank's
// place (from MPI when it runs, else TBD_RANK / TBD_WORLD_SIZE with NCCL_COMM_ID).
std::string nccl_bootstrap_id(int* rank, int* size);

// Seconds on the steady clock (CommEvent's clock).
double dist_now_s();

}  // namespace tbd
