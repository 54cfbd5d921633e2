// models/wgan.h: WGAN-GP with the 64x64 ResNet generator and critic, as TBD ran it
// (improved_wgan_training's gan_64x64.py: GoodGenerator, GoodDiscriminator, MODE 'wgan-gp').
//
// Generator: z (128) -> Linear 8192 (+b) -> reshape (512, 4, 4) -> four up-sampling residual
// blocks 512->512->256->128->64 (8x8 ... 64x64) -> BatchNorm -> ReLU -> conv 3x3 64->3 (+b) ->
// tanh. Up block (in -> out): shortcut = upsample, conv 1x1 (+b); main = BN, ReLU, upsample,
// conv 3x3 in->out (no bias), BN, ReLU, conv 3x3 out->out (+b); out = shortcut + main.
// Upsampling is nearest 2x (tflib tiles x four times along channels, then depth_to_space(2)).
// Critic: x (3, 64, 64) -> conv 3x3 3->64 (+b) -> four down-sampling residual blocks
// 64->128->256->512->512 (32x32 ... 4x4) -> flatten 8192 -> Linear 1 (+b). Down block:
// shortcut = 2x2 mean pool, conv 1x1 (+b) (MeanPoolConv); main = LayerNorm, ReLU, conv 3x3
// in->in (no bias), LayerNorm, ReLU, conv 3x3 in->out (+b), 2x2 mean pool (ConvMeanPool).
// LayerNorm over (C, H, W) per sample with per-channel gamma and beta, eps 1e-5; no BatchNorm in
// the critic (its input gradient must stay per sample).
// Parameters: generator 8,540,483 (of which 4,864 BatchNorm), critic 7,491,841 (of which
// 3,840 LayerNorm), as gan_64x64.py builds them (and as ../shared/notes' sums say).
//
// Losses (wgan-gp): critic mean(D(fake)) - mean(D(real)) + 10 * mean_n (||grad_x D(x_hat)_n|| -
// 1)^2, x_hat = real + alpha_n (fake - real), alpha_n ~ U[0, 1) per sample and step; generator
// -mean(D(G(z))). Adam lr 1e-4, beta1 0, beta2 0.9 for both players.
//
// One training step = TBD's iteration: one generator step, then n_critic = 5 critic steps, each
// on a new batch of real images and of noise. Two graphs (models/model.h):
//   graph 0, the critic's step: G(z) (the generator's layers tied to graph 1's, run forward
//     only: Detach stops the gradient), D(real), D(fake), the interpolation, D(x_hat) and its
//     input gradient as forward nodes (models/double_backward.h), the penalty and the loss;
//     its arena holds the critic's parameters, optimizer 0 steps them;
//   graph 1, the generator's step: G(z) and D(G(z)) with D tied to graph 0's critic and its
//     parameter gradients off (only data gradients flow through it); its arena holds the
//     generator's parameters, optimizer 1 steps them.
// The critic is applied to real, fake and interpolated images as three tied sets of nodes (as
// gan_64x64.py calls Discriminator three times), each keeping its own saved state.
//
// Synthetic data: at build, a pool of 5 real batches (uniform in [-1, 1), the range of the
// scaled images) and 6 noise batches (standard normal, as tf.random_normal) is generated on
// the device; every step copies its batch from the pool into the graph inputs (a device copy,
// inside the timed step and counted in the step's bytes: 5 real batches + 6 noise batches per
// iteration). With --tbd_h2d_per_step the copies come from host memory instead.
#pragma once

#include <memory>
#include <string>

#include "models/model.h"

namespace tbd {

struct WganOptions {
  int64_t batch = 64;
  int64_t dim = 64;  // DIM: the critic's first width and the generator's last
  int blocks = 4;    // residual blocks per player (4: 4x4 -> 64x64); fewer for tiny tests
  int64_t z_dim = 128;
  int critic_iters = 5;
  double lambda = 10;  // gradient penalty weight
  double lr = 1e-4;
  uint64_t seed = 0;
  bool build_only = false;  // graphs without storage (ModelArgs::build_only)
};

// The image side: 4 * 2^blocks (64 for the full model).
int64_t wgan_image_size(const WganOptions& o);

std::unique_ptr<Model> build_wgan(Backend& be, const WganOptions& o);
// The tiny configuration the model tests train and tools/peers mirrors: batch 8, DIM 4, one
// residual block per player (8x8 images; the generator 8 -> 4 channels, the critic 4 -> 8).
WganOptions wgan_tiny(uint64_t seed = 1);

// The critic alone, as the model builds it (layers named "<prefix>.<layer>", parameters its
// own): images x (N, 3, S, S) -> scores (N, 1). For tests of its double backward.
TensorId wgan_critic(Graph& g, TensorId x, const WganOptions& o,
                     const std::string& prefix = "critic");

}  // namespace tbd
