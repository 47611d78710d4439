// The law school model of Kusner, Loftus, Russell and Silva (2017), "Counterfactual
// fairness", written the way the authors wrote it (law_school_train.stan in the public
// repository mkusner/counterfactual-fairness), only translated to the Stan syntax accepted
// by the stanc bundled with httpstan 4.13 (array declarations, no `<-`). It is the baseline
// of benchmarks/law_school_speed.py; it is NOT used by counterfair itself.
//
// Model form kept as in the authors' file:
//   * every row has a latent u ~ normal(0, 1);
//   * `a` is an N x K matrix of indicator columns with one column for EVERY level of race
//     (8) and of sex (2), i.e. K = 10, beside free intercepts ugpa0 and lsat0, so the
//     intercepts and the level effects are not separately identified (only the prior
//     pins them down);
//   * the loadings of u have no sign constraint, so (u, eta_u_*) and (-u, -eta_u_*) fit
//     equally well (a bimodal posterior);
//   * LSAT is Poisson with the rate written as exp(...) rather than on the log scale;
//   * ZFYA has no intercept and a residual sd fixed at 1;
//   * priors: normal(0, 1) on the intercepts, loadings and level effects, inverse-gamma(1, 1)
//     on the variance of UGPA.
//
// Deviations from the authors' file (none changes the posterior):
//   * `real ugpa[N]`-style declarations became `array[N] real ugpa`;
//   * the priors on the level-effect vectors are written `normal(0, 1)` instead of
//     `normal(zero_K, one_K)` with the two constant vectors built in `transformed data`
//     (the same density);
//   * the declaration and the assignment of sigma_g in `transformed parameters` are merged
//     into one statement.
// The column order of `a` is chosen by the caller (the benchmark uses the order of
// counterfair.datasets.law_school.RACE_LEVELS then SEX_LEVELS; the authors listed amerind, asian,
// black, hisp, mexican, other, puerto, white, male, female). The priors are exchangeable
// across columns, so the posterior does not depend on that order.
data {
  int<lower=0> N;  // number of rows
  int<lower=0> K;  // number of indicator columns (8 race + 2 sex)
  matrix[N, K] a;  // protected attributes, one-hot per level
  array[N] real ugpa;  // undergraduate GPA
  array[N] int lsat;  // LSAT score, rounded to an integer
  array[N] real zfya;  // standardised first-year average
}
parameters {
  vector[N] u;  // latent knowledge of each row

  real ugpa0;  // intercept of UGPA
  real eta_u_ugpa;  // loading of u on UGPA (sign free)
  real lsat0;  // intercept of log LSAT rate
  real eta_u_lsat;  // loading of u on LSAT (sign free)
  real eta_u_zfya;  // loading of u on ZFYA (sign free)

  vector[K] eta_a_ugpa;  // effect of each race / sex level on UGPA
  vector[K] eta_a_lsat;  // effect of each race / sex level on log LSAT rate
  vector[K] eta_a_zfya;  // effect of each race / sex level on ZFYA

  real<lower=0> sigma_g_Sq;  // residual variance of UGPA
}
transformed parameters {
  real<lower=0> sigma_g = sqrt(sigma_g_Sq);  // residual sd of UGPA
}
model {
  // latent, no data about it
  u ~ normal(0, 1);

  ugpa0 ~ normal(0, 1);
  eta_u_ugpa ~ normal(0, 1);
  lsat0 ~ normal(0, 1);
  eta_u_lsat ~ normal(0, 1);
  eta_u_zfya ~ normal(0, 1);

  eta_a_ugpa ~ normal(0, 1);
  eta_a_lsat ~ normal(0, 1);
  eta_a_zfya ~ normal(0, 1);

  sigma_g_Sq ~ inv_gamma(1, 1);

  // observed nodes
  ugpa ~ normal(ugpa0 + eta_u_ugpa * u + a * eta_a_ugpa, sigma_g);
  lsat ~ poisson(exp(lsat0 + eta_u_lsat * u + a * eta_a_lsat));
  zfya ~ normal(eta_u_zfya * u + a * eta_a_zfya, 1);
}
