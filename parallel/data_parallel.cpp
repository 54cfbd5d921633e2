// parallel/data_parallel.cpp
#include "parallel/data_parallel.h"

#include <algorithm>
#include <cstdio>

#include "core/error.h"
#include "core/splitmix.h"
#include "layers/batchnorm2d.h"

namespace tbd {

void check_data_parallel_model(const Model& m) {
  const auto& plan = m.step_plan();
  const bool default_plan = plan.size() == 1 && plan[0].graph == 0 && plan[0].optimizer == 0 &&
                            plan[0].times == 1 && !plan[0].prepare;
  TBD_CHECK(m.num_graphs() == 1 && m.num_optimizers() == 1 && default_plan, m.name(),
            " cannot run data-parallel: it trains with a step of its own (", m.num_graphs(),
            " graphs, ", m.num_optimizers(), " optimizers, ", plan.size(),
            " step parts); data-parallel runs the default step of one graph and one optimizer");
}

uint64_t BucketPlan::hash() const {
  uint64_t h = splitmix64(static_cast<uint64_t>(buckets.size()));
  h = splitmix64(h ^ static_cast<uint64_t>(buffer_numel));
  for (const Bucket& b : buckets) {
    h = splitmix64(h ^ static_cast<uint64_t>(b.offset));
    h = splitmix64(h ^ static_cast<uint64_t>(b.numel));
    for (const std::string& p : b.params) {
      for (char c : p) h = splitmix64(h ^ static_cast<unsigned char>(c));
    }
  }
  return h;
}

std::string BucketPlan::describe() const {
  char buf[64];
  std::string s = std::to_string(buckets.size()) + (buckets.size() == 1 ? " bucket" : " buckets");
  s += " (MiB, launch order):";
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    std::snprintf(buf, sizeof buf, "%s %.3g", k ? "," : "", buckets[k].bytes() / (1 << 20));
    s += buf;
  }
  if (buffer_tensors > 0) {
    std::snprintf(buf, sizeof buf, "; %lld BatchNorm buffers (%.3g MiB)",
                  static_cast<long long>(buffer_tensors), 4.0 * buffer_numel / (1 << 20));
    s += buf;
    s += " from rank 0 before each forward";
  }
  return s;
}

namespace {

// The BatchNorm layers whose running statistics change in training (DDP's buffers).
std::vector<const BatchNormLayer*> buffer_layers(Graph& g) {
  std::vector<const BatchNormLayer*> out;
  for (const Graph::Node& n : g.nodes()) {
    const auto* bn = dynamic_cast<const BatchNormLayer*>(n.layer.get());
    if (bn != nullptr && !bn->frozen()) out.push_back(bn);
  }
  return out;
}

}  // namespace

BucketPlan plan_buckets(Graph& g, const DistOptions& opt) {
  // A finalized graph's arena must be in this order; a build-only graph (no storage) gets the
  // plan it would have (the bucket sizes, for the all-reduce benchmarks).
  const bool bound = g.finalized() && g.arena().grads.defined();
  TBD_CHECK(!bound || g.param_order() == ParamOrder::kBackward,
            "plan_buckets: the graph's parameters are not laid out in backward order (build the "
            "model under ParamOrderScope(ParamOrder::kBackward))");
  struct Item {
    int64_t offset;
    int64_t numel;
    int ready;
    const Param* p;
  };
  std::vector<Item> items;
  int64_t next = 0;
  for (Param* p : g.params_by_grad_ready()) {
    const int ready = g.grad_ready_node(p);
    if (ready < 0) break;                      // frozen ones come last: no gradient to reduce
    const int64_t n = p->grad.stored_numel();  // padding included where a layer packs it
    items.push_back(Item{bound ? p->grad.f32() - g.arena().grads.f32() : next, n, ready, p});
    next += n;
  }
  BucketPlan plan;
  const double cap = opt.bucket_mib > 0 ? opt.bucket_mib * (1 << 20) : 0;
  const double first_cap = opt.first_bucket_mib > 0 ? opt.first_bucket_mib * (1 << 20) : cap;
  Bucket cur;
  bool open = false;
  for (std::size_t k = 0; k < items.size(); ++k) {
    const Item& it = items[k];
    if (open) {
      TBD_CHECK(it.offset == cur.offset + cur.numel && it.ready <= cur.ready_node,
                "plan_buckets: gradient '", it.p->name, "' does not follow '", cur.params.back(),
                "' in the arena in backward order");
    } else {
      cur = Bucket{};
      cur.offset = it.offset;
      cur.ready_node = it.ready;
      open = true;
    }
    cur.numel += it.numel;
    cur.ready_node = std::min(cur.ready_node, it.ready);
    cur.params.push_back(it.p->name);
    plan.grads.push_back(PlannedGrad{it.p->name, it.numel, it.ready});
    const double this_cap = plan.buckets.empty() ? first_cap : cap;
    if (this_cap > 0 && cur.bytes() >= this_cap) {
      plan.grad_numel += cur.numel;
      plan.buckets.push_back(std::move(cur));
      open = false;
    }
  }
  if (open) {
    plan.grad_numel += cur.numel;
    plan.buckets.push_back(std::move(cur));
  }
  if (opt.broadcast_buffers) {
    for (const BatchNormLayer* bn : buffer_layers(g)) {
      // C from the weight (a build-only graph has the shapes, not the running statistics).
      plan.buffer_tensors += 2;
      plan.buffer_numel += 2 * bn->params().at(0).value.numel();
    }
  }
  return plan;
}

DataParallel::DataParallel(Model& m, Communicator& comm, DistOptions opt)
    : m_(m), comm_(comm), opt_(opt) {
  check_data_parallel_model(m);
  Graph& g = m.graph();
  TBD_CHECK(m.data_shard() == comm.rank(), "DataParallel: rank ", comm.rank(),
            " must train on data shard ", comm.rank(), ", the model has shard ", m.data_shard());
  plan_ = plan_buckets(g, opt_);
  scale_ = 1.f / static_cast<float>(comm.size());
  // Every rank must reduce the same buckets in the same order, or the collectives pair up
  // wrongly (a hang or garbage): compare the plans before the first step.
  const uint64_t h = plan_.hash();
  const double lo = static_cast<double>(h & 0xffffffffu), hi = static_cast<double>(h >> 32);
  const bool same = comm.min(lo) == comm.max(lo) && comm.min(hi) == comm.max(hi);
  TBD_CHECK(same, "data-parallel ", m.name(),
            ": the ranks' bucket plans differ (this rank: ", plan_.describe(),
            "); every rank must build the same model with the same flags");
  // Rank 0's initial weights on every rank (they are equal when seeds are; this makes it so).
  if (g.arena().values.defined()) comm.broadcast(g.arena().values, 0);
  // Per-call draws (samplers, dropout masks): rank r takes calls r, r + P, ...
  // (Layer::set_call_numbering).
  for (Graph::Node& n : g.nodes()) {
    n.layer->set_call_numbering(static_cast<uint64_t>(comm.size()),
                                static_cast<uint64_t>(comm.rank()));
  }
  if (plan_.buffer_numel > 0 && comm.size() > 1) {
    for (const BatchNormLayer* bn : buffer_layers(g)) {
      buffers_.push_back(bn->running_mean());
      buffers_.push_back(bn->running_var());
    }
    buffer_staging_ = m.backend().empty(Shape{plan_.buffer_numel}, MemCategory::kDynamic);
  }
  g.set_backward_hook([this](std::size_t node) { on_backward_node(node); });
}

DataParallel::~DataParallel() { m_.graph().set_backward_hook({}); }

void DataParallel::sync_buffers() {
  if (buffers_.empty()) return;
  Backend& be = m_.backend();
  // Packed into one staging buffer: one broadcast instead of one per tensor (DDP coalesces
  // them too).
  auto each = [&](auto&& fn) {
    std::size_t off = 0;
    for (const Tensor& t : buffers_) {
      fn(buffer_staging_.slice(off, t.desc()), t);
      off += t.bytes();
    }
  };
  if (comm_.rank() == 0) each([&](const Tensor& span, const Tensor& t) { be.reorder(span, t); });
  comm_.broadcast(buffer_staging_, 0);
  if (comm_.rank() != 0) each([&](const Tensor& span, const Tensor& t) { be.reorder(t, span); });
}

void DataParallel::on_backward_node(std::size_t node) {
  // When the node's gradients are done: the CPU's clock now (its nodes run synchronously), a
  // device's event after the node's queued work (read once backward has synchronized).
  m_.backend().mark(node);
  while (next_bucket_ < plan_.buckets.size() &&
         plan_.buckets[next_bucket_].ready_node >= static_cast<int>(node)) {
    const Bucket& b = plan_.buckets[next_bucket_];
    const Tensor span = m_.graph().arena().grads.slice(
        static_cast<std::size_t>(b.offset) * sizeof(float), TensorDesc{Shape{b.numel}});
    comm_.start_allreduce(static_cast<int>(next_bucket_), span, scale_);
    ++next_bucket_;
  }
}

void DataParallel::around(Model::Phase phase, const Model::StepPart&, int,
                          const std::function<void()>& run) {
  Backend& be = m_.backend();
  switch (phase) {
    case Model::Phase::kForward:
      if (!buffers_.empty()) {  // DistOptions::broadcast_buffers, more than one rank
        const double b0 = dist_now_s();
        sync_buffers();
        t_buf_ = dist_now_s() - b0;
      }
      run();
      be.synchronize();
      t_fwd_ = dist_now_s();
      return;
    case Model::Phase::kBackward: {
      run();  // the hook starts every bucket, the last after node 0
      be.synchronize();
      t_bwd_ = dist_now_s();
      const Graph& g = m_.graph();
      node_done_.resize(g.nodes().size());
      for (std::size_t i = 0; i < node_done_.size(); ++i)
        node_done_[i] = std::max(0.0, be.marked_s(i));  // 0: no backward ran
      events_ = comm_.wait_all();
      t_comm_ = dist_now_s();
      return;
    }
    default:
      run();
      return;
  }
}

void DataParallel::train_step() {
  Backend& be = m_.backend();
  next_bucket_ = 0;
  t_buf_ = 0;
  t0_ = dist_now_s();
  be.mark_start();
  m_.run_step(this);
  be.synchronize();
  const double t_end = dist_now_s();
  const double t_buf = t_buf_, t_fwd = t_fwd_, t_bwd = t_bwd_, t_comm = t_comm_;
  std::vector<CommEvent> events = std::move(events_);

  times_ = DistStepTimes{};
  times_.step = t_end - t0_;
  times_.forward_compute = t_fwd - t0_;
  times_.buffers = t_buf;
  times_.backward_compute = t_bwd - t_fwd;
  times_.wait = t_comm - t_bwd;
  if (!events.empty()) {
    const double first = events.front().queued_s;
    times_.backward_comm = std::max(t_comm, events.back().end_s) - first;
    times_.backward_compute_comm_overlap = std::max(0.0, t_bwd - first);
  }
  for (CommEvent& e : events) {
    times_.comm_busy += e.end_s - e.start_s;
    e.queued_s -= t0_;
    e.start_s -= t0_;
    e.end_s -= t0_;
  }
  times_.events = std::move(events);
  times_.optimizer = t_end - t_comm;

  DistProfile& p = profile_;
  if (p.node_done.size() != node_done_.size()) p.node_done.assign(node_done_.size(), 0.0);
  if (p.bucket_start.size() != times_.events.size()) {
    p.bucket_start.assign(times_.events.size(), 0.0);
    p.bucket_end.assign(times_.events.size(), 0.0);
  }
  ++p.steps;
  p.step += times_.step;
  p.forward += times_.forward_compute;
  p.buffers += times_.buffers;
  p.backward += times_.backward_compute;
  p.optimizer += times_.optimizer;
  p.wait += times_.wait;
  p.comm_busy += times_.comm_busy;
  for (std::size_t i = 0; i < node_done_.size(); ++i) p.node_done[i] += node_done_[i];
  for (std::size_t k = 0; k < times_.events.size(); ++k) {
    p.bucket_start[k] += times_.events[k].start_s;
    p.bucket_end[k] += times_.events[k].end_s;
  }
}

DistProfile DataParallel::profile() const {
  DistProfile p = profile_;
  if (p.steps == 0) return p;
  const double n = p.steps;
  for (double* v :
       {&p.step, &p.forward, &p.backward, &p.optimizer, &p.wait, &p.comm_busy, &p.buffers})
    *v /= n;
  for (double& v : p.node_done) v /= n;
  for (double& v : p.bucket_start) v /= n;
  for (double& v : p.bucket_end) v /= n;
  return p;
}

double DataParallel::wire_bytes_per_rank() const {
  const double p = comm_.size();
  return 2.0 * (p - 1) / p * 4.0 * static_cast<double>(plan_.grad_numel);
}

}  // namespace tbd
