// models/a3c.cpp: A3C's network, its actor-learner threads and their shared RMSprop.
#include "models/a3c.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "core/random.h"
#include "layers/activation.h"
#include "layers/cast_scale.h"
#include "layers/conv2d.h"
#include "layers/linear.h"
#include "layers/loss.h"
#include "layers/tensor_ops.h"
#include "models/registry.h"

namespace tbd {
namespace {

// TensorFlow's 'SAME' output size and the symmetric padding that reaches it (a3c.h).
int64_t same_out(int64_t in, int64_t stride) { return (in + stride - 1) / stride; }
int64_t same_pad(int64_t in, int64_t k, int64_t stride) {
  const int64_t total = std::max<int64_t>((same_out(in, stride) - 1) * stride + k - in, 0);
  return (total + 1) / 2;
}

struct Net {
  TensorId logits, value;
};

// Updates per worker in one benchmark iteration (on average: the workers claim them from a
// shared counter). Each iteration ends when all are applied, a barrier that lines the workers
// up (they then reach the lock at the same moments); measured on 2 cores at K = 2, one update
// per worker per iteration ran at 200 updates/s, eight at 271.
constexpr int64_t kUpdatesPerWorker = 8;

// The network on `frames` (N, stack, frame, frame) u8.
Net add_net(Graph& g, const A3cOptions& o, TensorId frames) {
  TensorId x = g.add1("scale", CastScaleConfig{1.0 / 255.0}, {frames});
  const int64_t s1 = same_out(o.frame, 4), s2 = same_out(s1, 2);
  x = g.add1("conv1", Conv2dConfig::square(o.conv1, 8, 4, same_pad(o.frame, 8, 4), true), {x});
  x = g.add1("relu1", ActivationConfig{}, {x});
  x = g.add1("conv2", Conv2dConfig::square(o.conv2, 4, 2, same_pad(s1, 4, 2), true), {x});
  x = g.add1("relu2", ActivationConfig{}, {x});
  TBD_CHECK(g.desc(x).shape == Shape({g.desc(frames).shape[0], o.conv2, s2, s2}),
            "A3C: conv2 gives ", g.desc(x).shape.to_string(), ", expected 'SAME' ", s2, "x", s2);
  x = g.add1("flatten", ReshapeConfig{{-1, o.conv2 * s2 * s2}}, {x});
  LinearConfig fc;
  fc.out_features = o.hidden;
  fc.init = Init::kHeNormal;
  x = g.add1("fc", fc, {x});
  x = g.add1("relu3", ActivationConfig{}, {x});
  LinearConfig policy;
  policy.out_features = o.actions;
  LinearConfig value;
  value.out_features = 1;
  return Net{g.add1("policy", policy, {x}), g.add1("value", value, {x})};
}

// The host side of one worker: the synthetic environment and the rollout's records.
struct Env {
  std::vector<uint8_t> pool;  // pool_frames frames of frame x frame bytes
  int64_t pos = 0;
};

class A3c final : public Model {
 public:
  A3c(Backend& be, const A3cOptions& o) : Model(be, "A3C", o.seed), o_(o) {}
  ~A3c() override { stop_threads(); }

  void build();
  void train_step() override;
  float loss() override { return last_loss_.load(); }
  int64_t actors() const { return K_; }

 private:
  struct Worker {
    int index = 0;
    Graph* train = nullptr;    // batch t_max: local weights and gradients
    Graph* rollout = nullptr;  // batch 1: parameters tied to train's; forward only
    TensorId t_frames = -1, t_actions = -1, t_returns = -1;
    TensorId r_frames = -1;
    Net r_net{};
    Rng rng{0};
    Env env;
    std::vector<uint8_t> states;  // (t_max + 1) states, the last the bootstrap's
    std::vector<int32_t> actions;
    std::vector<float> rewards, returns;
    std::vector<float> logits;   // one rollout step's policy logits (host)
    std::vector<double> probs;   // and the probabilities sampled from
    std::vector<Param*> params;  // train's parameters, in the global graph's order
  };

  void update(Worker& w);
  void write_state(Worker& w, uint8_t* dst) const;
  void worker_loop(Worker& w);
  void run_updates(Worker& w);
  void stop_threads();

  A3cOptions o_;
  int64_t K_ = 1;
  int threads_per_worker_ = 1;
  std::vector<std::unique_ptr<Worker>> workers_;
  Graph* global_ = nullptr;    // the global weights (inference-only graph, never run)
  std::vector<Param> shared_;  // the optimizer's view: global values, the applier's gradients
  std::shared_mutex weights_;  // shared: a pull; exclusive: an apply
  std::atomic<float> last_loss_{0.f};

  // The worker pool (K > 1): one generation per train_step.
  std::vector<std::thread> threads_;
  std::mutex pool_mutex_;
  std::condition_variable go_, done_;
  int64_t generation_ = 0;
  int running_ = 0;
  bool stop_ = false;
  std::atomic<int64_t> to_claim_{0};
  std::exception_ptr error_;
};

void A3c::write_state(Worker& w, uint8_t* dst) const {
  const int64_t F = o_.frame * o_.frame, P = o_.pool_frames;
  for (int64_t s = 0; s < o_.stack; ++s) {
    std::memcpy(dst + s * F, w.env.pool.data() + ((w.env.pos + s) % P) * F, F);
  }
}

void A3c::build() {
  Backend& be = backend();
  const int64_t T = o_.t_max, S = o_.frame;
  TBD_CHECK(T >= 1 && o_.actions >= 1 && o_.pool_frames >= o_.stack,
            "A3C: t_max, actions and pool_frames must be positive (pool_frames >= stack)");
  const Shape state{o_.stack, S, S};
  // The main graph: a worker's training graph, with its data declared for the layer
  // benchmarks (frames as bytes, actions, returns). Worker 0 uses it.
  auto add_train = [&](Graph& g, Worker& w, bool main) {
    const Shape frames{T, o_.stack, S, S};
    if (main) {
      w.t_frames = data_input("frames", frames, DType::kU8, 0, 256);
      w.t_actions =
          data_input("actions", Shape{T}, DType::kI32, 0, static_cast<double>(o_.actions));
      w.t_returns = data_input("returns", Shape{T}, DType::kF32, -1, 1);
    } else {
      w.t_frames = g.input("frames", frames, DType::kU8);
      w.t_actions = g.input("actions", Shape{T}, DType::kI32);
      w.t_returns = g.input("returns", Shape{T}, DType::kF32);
    }
    Net net = add_net(g, o_, w.t_frames);
    ActorCriticLossConfig lc;
    lc.entropy_beta = o_.entropy_beta;
    g.set_loss(g.add1("loss", lc, {net.logits, net.value, w.t_actions, w.t_returns}));
  };
  if (o_.build_only) {
    Worker w;
    add_train(graph(), w, true);
    return;
  }
  K_ = o_.actors > 0 ? o_.actors : (be.kind() == DeviceKind::kCpu ? be.num_threads() : 1);
  threads_per_worker_ = std::max(1, be.num_threads() / static_cast<int>(K_));
  // The global weights: the network at batch 1, values only.
  global_ = &add_graph();
  TensorId gx = global_->input("frames", Shape{1, o_.stack, S, S}, DType::kU8);
  add_net(*global_, o_, gx);
  global_->finalize_inference();

  std::size_t rollout_graph = 0;  // worker 0's, for the step plan
  for (int64_t k = 0; k < K_; ++k) {
    // Each worker's primitives are created with the threads it will run with.
    std::unique_ptr<WorkerScope> scope;
    if (K_ > 1) {
      try {
        scope = be.enter_worker(threads_per_worker_);
      } catch (const Error& e) {
        TBD_FAIL("A3C: actors:", K_, " needs concurrent worker threads: ", e.what());
      }
    }
    auto w = std::make_unique<Worker>();
    w->index = static_cast<int>(k);
    w->train = k == 0 ? &graph() : &add_graph();
    add_train(*w->train, *w, k == 0);
    w->train->finalize();
    w->rollout = &add_graph();
    if (k == 0) rollout_graph = num_graphs() - 1;
    w->r_frames = w->rollout->input("frames", Shape{1, o_.stack, S, S}, DType::kU8);
    w->r_net = add_net(*w->rollout, o_, w->r_frames);
    w->rollout->keep(w->r_net.value);  // the host reads both after each forward
    w->rollout->keep(w->r_net.logits);
    std::vector<Param*> tp = w->train->params(), rp = w->rollout->params();
    TBD_CHECK(tp.size() == rp.size(), "A3C: rollout and training graphs differ in parameters");
    for (std::size_t i = 0; i < tp.size(); ++i) w->rollout->tie(*rp[i], *tp[i]);
    w->rollout->finalize_inference();
    w->rng = Rng(seed_for(o_.seed, "a3c.worker" + std::to_string(k)));
    Rng frames(seed_for(o_.seed, "a3c.frames" + std::to_string(k)));
    w->env.pool.resize(o_.pool_frames * S * S);
    for (auto& b : w->env.pool) b = static_cast<uint8_t>(frames.randint(0, 256));
    w->states.resize((T + 1) * state.numel());
    w->actions.resize(T);
    w->rewards.resize(T);
    w->returns.resize(T);
    w->logits.resize(o_.actions);
    w->probs.resize(o_.actions);
    w->params = w->train->params();
    workers_.push_back(std::move(w));
  }
  // The pull is one flat copy: every local arena must be packed as the global one.
  std::vector<Param*> gp = global_->params();
  for (auto& w : workers_) {
    std::vector<Param*> tp = w->train->params();
    TBD_CHECK(gp.size() == tp.size(), "A3C: global and worker graphs differ in parameters");
    for (std::size_t i = 0; i < gp.size(); ++i) {
      const auto off = [](const Param& p, const Tensor& arena) {
        return static_cast<const char*>(p.value.raw()) - static_cast<const char*>(arena.raw());
      };
      TBD_CHECK(gp[i]->value.shape() == tp[i]->value.shape() &&
                    off(*gp[i], global_->arena().values) == off(*tp[i], w->train->arena().values),
                "A3C: parameter '", tp[i]->name, "' is packed differently in the worker's arena");
    }
  }
  // The shared optimizer over the global values; gradients are pointed at the applying
  // worker's before each step (under the exclusive lock).
  shared_.reserve(gp.size());
  for (std::size_t i = 0; i < gp.size(); ++i) {
    Param p = *gp[i];
    p.grad = workers_[0]->train->params()[i]->grad;
    shared_.push_back(std::move(p));
  }
  std::vector<Param*> sp;
  for (Param& p : shared_) sp.push_back(&p);
  RmspropConfig rc;
  rc.lr = o_.lr;
  rc.alpha = o_.decay;
  rc.eps = o_.eps;
  rc.momentum = 0;
  rc.clip.max_norm = o_.clip_norm;
  add_optimizer(make_optimizer(be, rc, sp));
  fill_data();

  // The step's plan (Model::StepPart), which train_step() does not run (the workers run the
  // updates concurrently) but which describes their work for step_flops(), step_bytes() and
  // the breakdown, on worker 0's graphs: K * kUpdatesPerWorker updates, each t_max + 1
  // forwards of the rollout graph (no loss: rollout graphs have none) and one training pass
  // with the shared RMSprop, after the pull copy of the global weights (read and written).
  const int updates = static_cast<int>(K_ * kUpdatesPerWorker);
  StepPart rollout =
      passes(rollout_graph, kForwardOnly, updates * static_cast<int>(T + 1), "rollout");
  rollout.same_params_group = static_cast<int>(T + 1);  // each update's forwards share copies
  StepPart train = passes(0, 0, updates, "update");
  train.prepare = [this](int) {
    std::shared_lock<std::shared_mutex> lock(weights_);
    backend().reorder(graph().arena().values, global_->arena().values);
  };
  train.prepare_bytes = 2.0 * static_cast<double>(global_->arena().values.bytes());
  set_step_plan({rollout, train});
  set_samples_per_step(K_ * kUpdatesPerWorker);
  set_extra_items("frames", static_cast<double>(K_ * kUpdatesPerWorker * T));

  if (K_ > 1) {
    for (auto& w : workers_) threads_.emplace_back([this, wp = w.get()] { worker_loop(*wp); });
  }
}

void A3c::update(Worker& w) {
  Backend& be = backend();
  const int64_t T = o_.t_max, A = o_.actions;
  const int64_t state_bytes = o_.stack * o_.frame * o_.frame;
  // 1. pull
  {
    std::shared_lock<std::shared_mutex> lock(weights_);
    be.reorder(w.train->arena().values, global_->arena().values);
    be.synchronize();
  }
  // 2. rollout: t_max steps, then the bootstrap forward of the last next-state.
  std::vector<float>& logits = w.logits;
  std::vector<double>& p = w.probs;
  float bootstrap = 0;
  Graph& r = *w.rollout;
  for (int64_t t = 0; t <= T; ++t) {
    uint8_t* s = w.states.data() + t * state_bytes;
    write_state(w, s);
    be.copy_from_host(r.tensor(w.r_frames), s);
    if (t > 0) r.reuse_param_copies();  // the weights pulled in 1. are still the weights
    r.forward();
    if (t == T) {
      be.copy_to_host(&bootstrap, r.tensor(w.r_net.value));
      break;
    }
    be.copy_to_host(logits.data(), r.tensor(w.r_net.logits));
    // Sample from softmax(logits) (in double; the policy's own probabilities).
    double mx = logits[0], sum = 0;
    for (int64_t a = 1; a < A; ++a) mx = std::max(mx, static_cast<double>(logits[a]));
    for (int64_t a = 0; a < A; ++a) sum += p[a] = std::exp(logits[a] - mx);
    double u = w.rng.uniform() * sum;
    int32_t action = static_cast<int32_t>(A - 1);
    for (int64_t a = 0; a < A; ++a) {
      if (u < p[a]) {
        action = static_cast<int32_t>(a);
        break;
      }
      u -= p[a];
    }
    w.actions[t] = action;
    w.rewards[t] = w.rng.uniform() < 0.1 ? 1.f : 0.f;
    w.env.pos = (w.env.pos + 1 + action) % o_.pool_frames;
  }
  // 3. n-step returns.
  double R = bootstrap;
  for (int64_t t = T; t-- > 0;) {
    R = w.rewards[t] + o_.gamma * R;
    w.returns[t] = static_cast<float>(R);
  }
  // 4. the training step on the local copy.
  Graph& g = *w.train;
  be.copy_from_host(g.tensor(w.t_frames), w.states.data());
  be.copy_from_host(g.tensor(w.t_actions), w.actions.data());
  be.copy_from_host(g.tensor(w.t_returns), w.returns.data());
  g.zero_grad();
  g.forward();
  g.backward();
  last_loss_.store(g.loss_value());  // the last update's, whichever worker's
  // 5. apply to the global weights.
  {
    std::unique_lock<std::shared_mutex> lock(weights_);
    for (std::size_t i = 0; i < shared_.size(); ++i) shared_[i].grad = w.params[i]->grad;
    optimizer().step();
    be.synchronize();
  }
}

void A3c::run_updates(Worker& w) {
  while (to_claim_.fetch_sub(1) > 0) update(w);
}

void A3c::worker_loop(Worker& w) {
  std::unique_ptr<WorkerScope> scope;
  try {
    scope = backend().enter_worker(threads_per_worker_);
  } catch (...) {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    error_ = std::current_exception();
  }
  int64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(pool_mutex_);
      go_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    std::exception_ptr err;
    if (scope) {
      try {
        run_updates(w);
      } catch (...) {
        err = std::current_exception();
        to_claim_.store(0);  // the others stop claiming
      }
    }
    std::lock_guard<std::mutex> lock(pool_mutex_);
    if (err && !error_) error_ = err;
    if (--running_ == 0) done_.notify_all();
  }
}

void A3c::train_step() {
  copy_inputs_from_host();
  to_claim_.store(K_ * kUpdatesPerWorker);
  if (K_ == 1) {
    run_updates(*workers_[0]);
    return;
  }
  std::unique_lock<std::mutex> lock(pool_mutex_);
  running_ = static_cast<int>(K_);
  ++generation_;
  go_.notify_all();
  done_.wait(lock, [&] { return running_ == 0; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

void A3c::stop_threads() {
  {
    std::lock_guard<std::mutex> lock(pool_mutex_);
    stop_ = true;
  }
  go_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

}  // namespace

int64_t a3c_param_count(const A3cOptions& o) {
  const int64_t s2 = same_out(same_out(o.frame, 4), 2);
  return (o.stack * o.conv1 * 64 + o.conv1) + (o.conv1 * o.conv2 * 16 + o.conv2) +
         (o.conv2 * s2 * s2 * o.hidden + o.hidden) + (o.hidden * o.actions + o.actions) +
         (o.hidden + 1);
}

std::unique_ptr<Model> build_a3c(Backend& be, const A3cOptions& o) {
  auto m = std::make_unique<A3c>(be, o);
  m->build();
  return m;
}

A3cOptions a3c_tiny(int64_t actors) {
  A3cOptions o;
  o.frame = 36;
  o.hidden = 32;
  o.actors = actors;
  o.pool_frames = 16;
  o.seed = 7;
  return o;
}

TBD_REGISTER_MODEL(ModelEntry{"A3C",
                              {5},
                              5,
                              [](Backend& be, const ModelArgs& a) {
                                A3cOptions o;
                                o.t_max = a.batch;
                                o.build_only = a.build_only;
                                // actors: K worker threads (/actors:<K>); the fixture
                                // names the default, the backend's threads.
                                o.actors = a.param("actors", 0);
                                return build_a3c(be, o);
                              },
                              {"actors"}});

}  // namespace tbd
