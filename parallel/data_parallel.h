// parallel/data_parallel.h: a model's training step, data-parallel over a Communicator.
//
// The PyTorch DDP algorithm on tbd's static graph (shared/notes/distributed.md):
//   - Plan. The graph's parameters are laid out in the order backward completes their
//     gradients (ParamOrder::kBackward, set while the model is built), and cut into buckets of
//     consecutive gradients: each bucket is one contiguous span of the gradient arena, so its
//     all-reduce needs no copy. A bucket closes once it reaches its cap (DDP's rule: checked
//     after adding a gradient); the first bucket, reduced first, has a smaller cap so that
//     communication starts early. Frozen parameters (no gradient) are in no bucket.
//   - Step. Zero the gradients, forward, backward; after each node's backward a hook counts
//     the gradients it completed and starts every bucket that is complete, in bucket order (all
//     ranks start the same buckets in the same order), on the communicator's comm thread or
//     stream, overlapped with the rest of backward. Each all-reduce sums and scales by 1/P.
//     The optimizer runs once the last bucket is done.
//   - Start. Rank 0's initial weights are broadcast; every rank checks that all ranks have the
//     same bucket plan (a hash) before the first step; rank r trains on shard r of the global
//     batch (Model::set_data_shard), and its layers that draw per call (the detection
//     targets, dropout masks) draw as the r-th of P shards run in turn would
//     (Layer::set_call_numbering).
//   - Buffers. As DDP's broadcast_buffers (its default): before each forward, rank 0's running
//     statistics of every BatchNorm that keeps them (not the frozen ones) are broadcast, packed
//     into one buffer, so every rank's model equals rank 0's for evaluation. Training itself
//     uses each batch's own statistics, so this changes no gradient.
// Only models with the default training step (one graph, one optimizer) run data-parallel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/model.h"
#include "parallel/communicator.h"

namespace tbd {

struct DistOptions {
  double bucket_mib = 25;         // --tbd_bucket_mb; <= 0: one bucket for everything
  double first_bucket_mib = 1;    // the first bucket's cap (DDP's 1 MiB)
  bool broadcast_buffers = true;  // DDP's: rank 0's BatchNorm running statistics each step
};

struct Bucket {
  int64_t offset = 0;  // first element in the gradient arena
  int64_t numel = 0;
  int ready_node = 0;  // complete after this node's backward (the lowest of its parameters)
  std::vector<std::string> params;
  double bytes() const { return 4.0 * static_cast<double>(numel); }
};

// One trained gradient, in arena (= completion) order.
struct PlannedGrad {
  std::string name;
  int64_t numel = 0;
  int ready_node = 0;
};

struct BucketPlan {
  std::vector<Bucket> buckets;     // in launch order
  std::vector<PlannedGrad> grads;  // every bucketed gradient, in arena order
  int64_t grad_numel = 0;          // elements all-reduced per step (the buckets' sum)
  // The BatchNorm running statistics broadcast before each forward (DistOptions::
  // broadcast_buffers): tensors (a mean and a variance per layer) and their elements.
  int64_t buffer_tensors = 0, buffer_numel = 0;
  // A hash of the bucket sizes and parameter names (ranks compare it before the first step).
  uint64_t hash() const;
  // "3 buckets (MiB, launch order): 0.25, 24.1, 0.6; 106 BatchNorm buffers (0.04 MiB) from
  // rank 0 before each forward"
  std::string describe() const;
};

// Cuts a finalized graph whose arena is in ParamOrder::kBackward into buckets.
BucketPlan plan_buckets(Graph& g, const DistOptions& opt);

// What one data-parallel step spent, in seconds, on this rank (PyTorch DDP's four timeline
// fields under its names, plus the totals tbd reports).
struct DistStepTimes {
  double step = 0;                           // zero_grad .. optimizer done
  double forward_compute = 0;                // forward (zero_grad and the buffers included)
  double buffers = 0;                        // the BatchNorm buffers' broadcast
  double backward_compute = 0;               // backward's own work
  double backward_comm = 0;                  // first bucket started .. last bucket done
  double backward_compute_comm_overlap = 0;  // first bucket started .. backward done
  double comm_busy = 0;                      // sum of the all-reduces' own durations
  double wait = 0;                           // backward done .. last bucket done (exposed)
  std::vector<CommEvent> events;             // per bucket, relative to the step's start
  double optimizer = 0;                      // last bucket done .. optimizer done
};

// Means over the steps since DataParallel::reset_profile(), for the scaling model
// (tools/track/dist_sim.py): when each gradient was complete, how long each phase took.
struct DistProfile {
  int steps = 0;
  double step = 0, forward = 0, backward = 0, optimizer = 0, wait = 0, comm_busy = 0, buffers = 0;
  std::vector<double> node_done;  // per node: its backward done, seconds from the step's start
  std::vector<double> bucket_start, bucket_end;  // per bucket, seconds from the step's start
};

// The model's step runs in the model's own step engine (Model::run_step); this class observes
// its phases (Model::StepObserver): it broadcasts the buffers before the forward, times the
// phases, and waits for the buckets' all-reduces (started by the backward hook) before the
// optimizer.
class DataParallel final : private Model::StepObserver {
 public:
  // `m` must have been built under ParamOrderScope(ParamOrder::kBackward) and finalized, with
  // its data shard set to comm.rank(). Broadcasts rank 0's weights and checks the plans agree
  // (a named error on every rank when they do not).
  DataParallel(Model& m, Communicator& comm, DistOptions opt);
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;
  ~DataParallel();

  // One data-parallel training step: the model's plan (one pass of its graph and optimizer,
  // check_data_parallel_model) with the buckets' all-reduces.
  void train_step();
  // Rank 0's BatchNorm running statistics to every rank (train_step does it before forward
  // when DistOptions::broadcast_buffers; a group of one has nothing to do).
  void sync_buffers();
  const DistStepTimes& last_times() const { return times_; }
  void reset_profile() { profile_ = DistProfile{}; }
  DistProfile profile() const;  // the means
  const BucketPlan& plan() const { return plan_; }
  Communicator& comm() { return comm_; }

  // Gradient bytes each rank sends (and receives) per step in a ring all-reduce:
  // 2 (P-1)/P x the bytes all-reduced.
  double wire_bytes_per_rank() const;

 private:
  void on_backward_node(std::size_t node);
  void around(Model::Phase phase, const Model::StepPart& part, int k,
              const std::function<void()>& run) override;

  Model& m_;
  Communicator& comm_;
  DistOptions opt_;
  BucketPlan plan_;
  float scale_ = 1;
  std::vector<Tensor> buffers_;  // the running statistics, in graph order
  Tensor buffer_staging_;        // buffer_numel elements: one broadcast for all of them
  std::size_t next_bucket_ = 0;
  double t0_ = 0;
  // This step's phase ends (seconds, dist_now_s) and the all-reduces' events.
  double t_buf_ = 0, t_fwd_ = 0, t_bwd_ = 0, t_comm_ = 0;
  std::vector<CommEvent> events_;
  DistStepTimes times_;
  std::vector<double> node_done_;  // this step's, seconds from Backend::mark_start()
  DistProfile profile_;            // sums
};

// Throws a named error unless `m` can run data-parallel (one graph, one optimizer).
void check_data_parallel_model(const Model& m);

}  // namespace tbd
