// models/a3c.h: A3C (Mnih et al. 2016) as TBD ran it in TensorFlow (dennybritz's
// reinforcement-learning a3c, TBD's copy): asynchronous actor-learners sharing one network and
// one RMSprop, feed-forward Atari network, no LSTM.
//
// Network (per state: 4 stacked 84x84 grey frames, uint8, NCHW here where TensorFlow is NHWC):
//   CastScale 1/255 -> conv 16 8x8 stride 4 (+b) -> ReLU -> conv 32 4x4 stride 2 (+b) -> ReLU
//   -> flatten 3,872 -> FC 256 -> ReLU -> policy FC 256 -> 4 (softmax in the loss) and value
//   FC 256 -> 1. TensorFlow's convolutions pad 'SAME': conv1 21x21 (2 pixels each side), conv2
//   11x11, which 'SAME' reaches with 1 row/column before and 2 after; Conv2d pads
//   symmetrically, so conv2 pads 2 on both sides: the same 11x11 output, FLOPs and parameters,
//   its windows one pixel further up and left. Parameters (A actions):
//     conv1   4*16*8*8 + 16         =     4,112
//     conv2   16*32*4*4 + 32        =     8,224
//     fc      32*11*11*256 + 256    =   991,488
//     policy  256*A + A             =     1,028   (A = 4)
//     value   256 + 1               =       257
//     total                         = 1,005,109
// Loss: ActorCriticLoss (layers/loss.h): TensorFlow's policy loss sum_n -(log pi(a_n) adv_n +
//   0.01 H_n) plus its value loss sum_n (V_n - R_n)^2, the advantage R - V a constant. TF
//   trains the two as two estimators (two train ops, each clipped and applied with its own
//   RMSprop over its variables, the shared trunk in both); here they are one loss, one
//   backward, one clip and one RMSprop: the same gradient sum for the trunk, one update.
//
// One update of one worker (TBD's worker.run loop):
//   1. pull: copy the global weights into the worker's local copy (one flat copy of the arena);
//   2. rollout: t_max = 5 environment steps, each a forward of batch 1 on the local weights and
//      an action sampled from the policy with the worker's RNG; then one more forward for the
//      bootstrap value of the last next-state: t_max + 1 inference forwards;
//   3. n-step returns R_t = r_t + 0.99 R_{t+1} (R_T = the bootstrap value; no episode ends);
//   4. forward + backward of the batch-t_max rollout on the local copy (zero_grad first);
//   5. apply: the shared RMSprop (lr 2.5e-4, decay 0.99, eps 1e-6, no momentum) with the
//      gradients clipped by global norm 5, to the global weights.
// The environment is a synthetic frame source, no emulator: each worker owns a pool of random
// frames; a state is 4 consecutive pool frames, and an action moves the position 1 + action
// frames on, so the next state depends on the action; rewards are 1 with probability 0.1
// from the worker's RNG.
//
// Concurrency: K worker threads (default: the threads the backend uses) run updates at once,
// each on its own graphs (a batch-t_max training graph with the local weights and gradients,
// and a batch-1 rollout graph whose parameters are tied to them) under Backend::enter_worker
// with max(1, T/K) threads, so K workers share the T cores. A3C applies updates Hogwild-style,
// without locks; tbd must be free of data races (no undefined behaviour, ThreadSanitizer-clean),
// so the global weights sit behind a reader-writer lock: a pull holds it shared (pulls run
// together), an apply exclusively (one RMSprop step at a time, the optimizer's state being
// shared too). Cost: an apply (about 1M parameters: read w, g, sq, write w, sq) blocks pulls,
// and pulls block an apply; both are memory-bound copies of a few MB against the rollout and
// training compute of one update (see docs/output.md).
// One benchmark iteration = 8 K updates in all, which the workers claim from a shared counter
// (8 each when they keep pace; a worker that finishes early takes more); the iteration ends
// when all are applied. That end is a barrier that lines the workers up, so they meet at the
// lock; one update per worker per iteration measured 26 % fewer updates/s at K = 2 on 2 cores.
// With K = 1 the updates run on the calling thread.
// The CUDA backend cannot run concurrent workers (Backend::enter_worker): K > 1 is an error
// there, K = 1 runs.
#pragma once

#include <memory>

#include "models/model.h"

namespace tbd {

struct A3cOptions {
  int64_t t_max = 5;   // the batch of a training step
  int64_t actors = 0;  // K worker threads; 0: the backend's thread count
  int64_t actions = 4;
  int64_t frame = 84;  // frames are frame x frame
  int64_t stack = 4;   // frames per state
  int64_t conv1 = 16, conv2 = 32, hidden = 256;
  double gamma = 0.99;
  double lr = 2.5e-4, decay = 0.99, eps = 1e-6, clip_norm = 5.0, entropy_beta = 0.01;
  int64_t pool_frames = 64;  // synthetic frames per worker
  uint64_t seed = 0;
  bool build_only = false;  // the main graph only (a worker's training graph), no storage
};

// Parameters of the network for these options (the formula above).
int64_t a3c_param_count(const A3cOptions& o);
std::unique_ptr<Model> build_a3c(Backend& be, const A3cOptions& o);
// The tiny configuration the model tests train and tools/peers mirrors (small enough for a
// sanitizer build): 36x36 frames (conv1 9x9, conv2 5x5 out), a 32-wide hidden layer, 16 frames
// in the pool, `actors` actor-learners.
A3cOptions a3c_tiny(int64_t actors);

}  // namespace tbd
