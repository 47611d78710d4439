// counterfair: each row's latent integrated out of its non-Normal children's likelihood,
// and exact draws of it: the one implementation of both.
//
// Plain C++17 (no Stan, no Eigen). Two users include it:
// - integrated.hpp, the user header of fit programs with latents="integrated" (Stan's
//   types and autodiff around these functions; see counterfair/stan/integrated.py);
// - native.cpp, the shared library counterfair loads with ctypes (counterfair/stan/
//   native.py) for leave-one-out, the fit's node check and exact abduction in Python.
//
// Row i has one standardised latent z ~ Normal(0, 1) (already conditioned on its Normal
// children, see counterfair/stan/anchoring.py) and C non-Normal children with linear
// predictors eta[i, c] + load[i, c] * z. The log marginal of the row is
//
//     V_i = log int prod_c p_c(y[i, c] | eta[i, c] + load[i, c] * z) Normal(z | 0, 1) dz,
//
// computed by adaptive Gauss-Hermite quadrature: the mode z* of the (strictly concave)
// integrand by a given number of Newton steps with step halving, from the mode of a Normal
// approximation of the count children, and the nodes z* + sqrt(2) s x_j with s = 1 / sqrt(-F''(z*)) (x_j, log w_j given as data).
//
// The gradient is that of the quadrature with its nodes held where they are: the
// derivative of each child's log density at the nodes, weighted by the nodes' posterior
// weights. It differs from the derivative of V_i through z* and s by the derivative of
// the quadrature's error (below 1e-6 on the tested models); the leapfrog integrator stays
// volume-preserving and reversible with any force field, so NUTS still samples the
// posterior the program's log density defines.
//
// Families (codes shared with counterfair/model/families): 1 Poisson (log link),
// 2 negative binomial (log link, dispersion phi: variance mu + mu^2 / phi),
// 3 Bernoulli (logit link), 4 ordinal (ordered logistic, cutpoints in `cuts`),
// 5 categorical (softmax with reference level 1): a child with K levels takes K - 1
// columns, one per non-reference level, the first coded 5 and the others 6; each
// column's y holds the observed level (1 .. K); 7 Normal (two latents per row only: eta
// holds mu - y and phi the sd). Every family is log-concave in z.
//
// Two latents per row (a child with two latent parents): the rows' standardised latents
// z = (z1, z2) ~ Normal(0, I) enter each child as eta + load1 z1 + load2 z2, every child
// (Normal ones too) through the quadrature: integrate2() and draw_row2() at the end.
#ifndef COUNTERFAIR_QUADRATURE_HPP
#define COUNTERFAIR_QUADRATURE_HPP

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace counterfair_integrated {

constexpr int HALVING_MAX = 60;
constexpr double STEP_TOLERANCE = 1e-9;  // a Newton step below this ends the search
constexpr int DRAW_NEWTON_MIN = 50;      // Newton steps allowed before an exact draw
constexpr int WIDEN_MAX = 60;            // tangent points moved out at most this often
constexpr int REJECTION_MAX = 10000;

// One child's log density and its derivatives at eta (and with respect to phi, cutpoints).
struct Term {
  double value = 0, d1 = 0, d2 = 0;  // l, dl/deta, d2l/deta2
  double dphi = 0;                   // dl/dphi (negative binomial)
  int cut_lo = -1, cut_hi = -1;      // indices into cuts of the cutpoints it reads
  double dcut_lo = 0, dcut_hi = 0;   // dl/d cut_lo, dl/d cut_hi
};

struct Child {
  int family;
  int y;
  int width = 1;  // columns of a categorical child (family 5), else 1
  double phi;
  const double* cuts;  // this child's cutpoints (ordinal)
  int n_cuts;
  double lgamma_const;  // the terms of l free of eta (counts; Normal: -log sd - log(2 pi) / 2)
};

inline double log1p_exp(double x) {  // log(1 + exp(x)) without overflow
  return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}
inline double log1m_exp(double a) {  // log(1 - exp(a)), a <= 0 (Stan's branches)
  if (a > 0) return std::numeric_limits<double>::quiet_NaN();
  return a > -0.693147 ? std::log(-std::expm1(a)) : std::log1p(-std::exp(a));
}
// log(inv_logit(x) - inv_logit(y)) for x > y, by Stan's formula
inline double log_inv_logit_diff(double x, double y) {
  if (std::isinf(x) && x >= 0) return -log1p_exp(y);
  return x - log1p_exp(x) + log1m_exp(y - x) - log1p_exp(y);
}
constexpr double PI = 3.14159265358979323846;
#ifdef COUNTERFAIR_STANDALONE
// digamma for x > 0 (gradients only; the standalone library computes values): the
// recurrence up to x >= 6, then the asymptotic series
inline double digamma(double x) {
  double shift = 0.0;
  while (x < 6.0) {
    shift -= 1.0 / x;
    x += 1.0;
  }
  double r = 1.0 / (x * x);
  double series = r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r / 132))));
  return shift + std::log(x) - 0.5 / x - series;
}
#else
inline double digamma(double x) { return stan::math::digamma(x); }  // (included first)
#endif
inline double inv_logit(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

inline void evaluate(const Child& c, double eta, Term& t, bool want_params) {
  switch (c.family) {
    case 1: {  // Poisson, log link
      double mu = std::exp(eta);
      t.value = c.y * eta - mu - c.lgamma_const;
      t.d1 = c.y - mu;
      t.d2 = -mu;
      break;
    }
    case 2: {  // negative binomial, log link
      double mu = std::exp(eta);
      double log_mu_phi = log1p_exp(eta - std::log(c.phi)) + std::log(c.phi);  // log(mu + phi)
      double mu_phi = mu + c.phi;
      t.value = c.lgamma_const + c.y * eta - (c.y + c.phi) * log_mu_phi;
      t.d1 = c.y - (c.y + c.phi) * mu / mu_phi;
      t.d2 = -(c.y + c.phi) * mu * c.phi / (mu_phi * mu_phi);
      if (want_params) {
        // lgamma_const holds lgamma(y + phi) - lgamma(phi) - lgamma(y + 1) + phi log phi;
        // its derivative in phi is added by the caller once per row.
        t.dphi = -log_mu_phi - (c.y + c.phi) / mu_phi;
      }
      break;
    }
    case 3: {  // Bernoulli, logit link
      double e = std::exp(-std::fabs(eta));  // in (0, 1]
      double log1pe = std::log1p(e);
      double p = eta >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
      // log p(y = 1) = -log(1 + exp(-eta)), log p(y = 0) = -log(1 + exp(eta))
      double signed_eta = c.y == 1 ? eta : -eta;
      t.value = signed_eta >= 0 ? -log1pe : signed_eta - log1pe;
      t.d1 = c.y - p;
      t.d2 = -p * (1 - p);
      break;
    }
    case 4: {  // ordinal, ordered logistic: level y in 1..K, K - 1 cutpoints
      int k = c.y;
      bool has_lo = k > 1, has_hi = k <= c.n_cuts;
      double a = has_lo ? eta - c.cuts[k - 2] : 0.0;  // eta - c_{k-1}
      double b = has_hi ? eta - c.cuts[k - 1] : 0.0;  // eta - c_k
      double sa = has_lo ? inv_logit(a) : 1.0;
      double sb = has_hi ? inv_logit(b) : 0.0;
      if (has_lo && has_hi) {
        t.value = log_inv_logit_diff(a, b);
      } else if (has_lo) {
        t.value = -log1p_exp(-a);
      } else {
        t.value = -log1p_exp(b);
      }
      t.d1 = 1.0 - sa - sb;
      t.d2 = -(sa * (1 - sa) + sb * (1 - sb));
      if (want_params) {
        double mass = std::exp(t.value);
        t.cut_lo = has_lo ? k - 2 : -1;
        t.cut_hi = has_hi ? k - 1 : -1;
        // d/dc_{k-1} = -sigma'(a) / mass, d/dc_k = sigma'(b) / mass
        t.dcut_lo = has_lo ? (has_hi ? -sa * (1 - sa) / mass : -(1 - sa)) : 0.0;
        t.dcut_hi = has_hi ? (has_lo ? sb * (1 - sb) / mass : sb) : 0.0;
      }
      break;
    }
    case 7: {  // Normal (two latents per row only): eta holds mu - y, phi the sd
      double e = eta / c.phi;
      t.value = -0.5 * e * e + c.lgamma_const;  // -log(phi) - log(2 pi) / 2, set once
      t.d1 = -e / c.phi;
      t.d2 = -1.0 / (c.phi * c.phi);
      if (want_params) t.dphi = (e * e - 1.0) / c.phi;
      break;
    }
    default:
      throw std::domain_error("counterfair integrated latents: unknown family code");
  }
}

// The integrand's log F(z) = sum_c l_c(eta_c + load_c z) - z^2 / 2 and its derivatives.
struct Row {
  std::vector<Child> children;
  std::vector<double> eta, load;
  mutable std::vector<Term> scratch;  // terms of at()

  // A categorical child's columns c .. c + width - 1 at z: its log probability
  // (returned), its first and second derivatives in z, and in out[k] the derivative
  // in column k's eta (delta(level k + 1 observed) - p_{k + 1}); value on out[0].
  double categorical(std::size_t c, double z, Term* out, double& dz, double& dzz) const {
    const int m = children[c].width;
    const int level = children[c].y;  // 1 .. m + 1, 1 the reference
    double top = 0.0;
    for (int k = 0; k < m; ++k) {
      out[k].value = eta[c + k] + load[c + k] * z;  // the logit, for now
      if (out[k].value > top) top = out[k].value;
    }
    double sum = std::exp(-top);
    for (int k = 0; k < m; ++k) {
      out[k].d2 = std::exp(out[k].value - top);  // unnormalised p, for now
      sum += out[k].d2;
    }
    double chosen = level > 1 ? out[level - 2].value : 0.0;
    double value = chosen - top - std::log(sum);
    double mean_load = 0.0, second = 0.0;
    for (int k = 0; k < m; ++k) {
      double p = out[k].d2 / sum;
      double l = load[c + k];
      mean_load += p * l;
      second += p * l * l;
      out[k].d1 = (level == k + 2 ? 1.0 : 0.0) - p;
      out[k].d2 = 0.0;
      out[k].value = 0.0;
    }
    out[0].value = value;
    dz = (level > 1 ? load[c + level - 2] : 0.0) - mean_load;
    dzz = -(second - mean_load * mean_load);
    return value;
  }

  // sum_c l_c at z (without the prior), each child's term in terms[c] (a categorical
  // child's in its columns'), and the sum's first and second derivatives in z.
  double evaluate_all(double z, Term* terms, bool want_params, double& g, double& h) const {
    double f = 0.0;
    g = 0.0;
    h = 0.0;
    for (std::size_t c = 0; c < children.size();) {
      if (children[c].family == 5) {
        double dz, dzz;
        f += categorical(c, z, terms + c, dz, dzz);
        g += dz;
        h += dzz;
        c += children[c].width;
        continue;
      }
      Term& t = terms[c];
      evaluate(children[c], eta[c] + load[c] * z, t, want_params);
      f += t.value;
      g += t.d1 * load[c];
      h += t.d2 * load[c] * load[c];
      ++c;
    }
    return f;
  }

  void at(double z, double& f, double& g, double& h) const {
    scratch.resize(children.size());
    f = evaluate_all(z, scratch.data(), false, g, h) - 0.5 * z * z;
    g -= z;
    h -= 1.0;
  }

  // Where Newton's method starts: the mode when each count child's log density is
  // replaced by its Normal approximation in eta (mean log(y + 1/2), precision y + 1/2);
  // binary and ordinal children add nothing to it.
  double start() const {
    double num = 0.0, den = 1.0;
    for (std::size_t c = 0; c < children.size(); ++c) {
      const Child& ch = children[c];
      if (ch.family == 1 || ch.family == 2) {
        double w = ch.y + 0.5;
        if (ch.family == 2) w = 1.0 / (1.0 / w + 1.0 / ch.phi);  // the dispersion's share
        num += w * load[c] * (std::log(ch.y + 0.5) - eta[c]);
        den += w * load[c] * load[c];
      }
    }
    return num / den;
  }

  // `steps` Newton steps from start(), each halved until the integrand does not fall
  // (a step below STEP_TOLERANCE ends them early); false if the integrand is not finite.
  bool mode(int steps, double& z, double& f, double& g, double& h) const {
    z = start();
    at(z, f, g, h);
    if (!std::isfinite(f) || !std::isfinite(g) || !(h < 0)) {
      z = 0.0;
      at(z, f, g, h);
      if (!std::isfinite(f)) return false;
    }
    for (int it = 0; it < steps; ++it) {
      double step = -g / h;
      if (std::fabs(step) < STEP_TOLERANCE) break;
      double zn = z, fn = f, gn = g, hn = h;
      bool moved = false;
      for (int k = 0; k < HALVING_MAX; ++k) {
        zn = z + step;
        at(zn, fn, gn, hn);
        if (std::isfinite(fn) && fn >= f - 1e-12 * (1.0 + std::fabs(f))) {
          moved = true;
          break;
        }
        step *= 0.5;
      }
      if (!moved) break;
      z = zn;
      f = fn;
      g = gn;
      h = hn;
    }
    return std::isfinite(f) && h < 0;
  }
};

// One call's arguments: N rows, C columns (a categorical child takes K - 1 of them).
struct Inputs {
  std::size_t N = 0, C = 0;
  const int* y = nullptr;           // N x C, column-major: y[c * N + i]
  const double* eta = nullptr;      // N x C, column-major
  const double* load = nullptr;     // C, or N x C column-major when load_per_row
  bool load_per_row = false;        // (then every row takes the general path)
  const int* family = nullptr;      // C
  const double* phi = nullptr;      // C (negative binomial)
  const double* cuts = nullptr;     // every ordinal child's cutpoints
  const int* cut_start = nullptr;   // C, 1-based into cuts
  const int* cut_len = nullptr;     // C
  const double* load2 = nullptr;    // C: the second latent's loadings (two per row)
  const double* gh_x = nullptr;     // J nodes
  const double* gh_logw = nullptr;  // J log weights
  std::size_t J = 0;
  int steps = 0;  // Newton steps
  double loading(std::size_t i, std::size_t c) const {
    return load_per_row ? load[c * N + i] : load[c];
  }
};

inline void fill_row(Row& row, std::size_t i, const Inputs& in, bool constants) {
  const std::size_t C = in.C;
  row.children.resize(C);
  row.eta.resize(C);
  row.load.resize(C);
  for (std::size_t c = 0; c < C; ++c) {
    Child& ch = row.children[c];
    ch.family = in.family[c];
    ch.y = in.y[c * in.N + i];
    ch.phi = in.phi[c];
    ch.cuts = in.cut_len[c] > 0 ? in.cuts + (in.cut_start[c] - 1) : nullptr;
    ch.n_cuts = in.cut_len[c];
    if (ch.family == 1) {  // free of the parameters: left out of the sum NUTS reads
      ch.lgamma_const = constants ? std::lgamma(ch.y + 1.0) : 0.0;
    } else if (ch.family == 2) {
      ch.lgamma_const = std::lgamma(ch.y + ch.phi) - std::lgamma(ch.phi)
                        - std::lgamma(ch.y + 1.0) + ch.phi * std::log(ch.phi);
    } else if (ch.family == 7) {
      ch.lgamma_const = -std::log(ch.phi) - 0.5 * std::log(2.0 * PI);
    } else {
      ch.lgamma_const = 0.0;
    }
    row.eta[c] = in.eta[c * in.N + i];
    row.load[c] = in.loading(i, c);
  }
  for (std::size_t c = 0; c < C; ++c) {  // a categorical child's columns: 5, then 6s
    if (in.family[c] == 5) {
      std::size_t end = c + 1;
      while (end < C && in.family[end] == 6) ++end;
      row.children[c].width = static_cast<int>(end - c);
      if (row.children[c].y < 1 || row.children[c].y > row.children[c].width + 1) {
        throw std::domain_error("counterfair integrated latents: a categorical level is "
                                "outside 1 .. its number of levels");
      }
    } else {
      row.children[c].width = 1;
    }
  }
}

// Where the gradient of the log marginal goes (null: values only).
struct Gradient {
  double* d_eta = nullptr;   // N x C, column-major
  double* d_load = nullptr;  // C
  double* d_load2 = nullptr;  // C (two latents per row)
  double* d_phi = nullptr;   // C
  double* d_cuts = nullptr;  // all cutpoints
  bool wanted() const { return d_eta != nullptr; }
};

// Row i by the general path (every family, Newton steps halved until the integrand does
// not fall): its log marginal (NaN when its mode is not found), its gradient added to
// `out`. The block path below hands it the rows it does not take.
inline double integrate_row(const Row& row, std::size_t i, const Inputs& in,
                            std::vector<double>& g, std::vector<double>& tnode,
                            std::vector<Term>& terms, const Gradient& out) {
  const std::size_t C = in.C, N = in.N, J = in.J;
  const int* family = in.family;
  const int* cut_start = in.cut_start;
  const double* gh_x = in.gh_x;
  const double* gh_logw = in.gh_logw;
  const int steps = in.steps;
  const double log_sqrt_pi = 0.5 * std::log(PI);
  const bool grad = out.wanted();
  double z, f, gz, h;
  if (!row.mode(steps, z, f, gz, h)) return std::numeric_limits<double>::quiet_NaN();
  double s = 1.0 / std::sqrt(-h);
  double top = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < J; ++j) {
    double t = z + std::sqrt(2.0) * s * gh_x[j];
    tnode[j] = t;
    double gj, hj;
    double fj = row.evaluate_all(t, terms.data() + j * C, grad, gj, hj) - 0.5 * t * t;
    g[j] = fj + gh_x[j] * gh_x[j] + gh_logw[j];
    if (g[j] > top) top = g[j];
  }
  double sum = 0.0;
  for (std::size_t j = 0; j < J; ++j) {
    g[j] = std::exp(g[j] - top);  // the node's share, unnormalised
    sum += g[j];
  }
  double value = top + std::log(sum) + std::log(s) - log_sqrt_pi;
  if (grad && std::isfinite(value)) {
    for (std::size_t j = 0; j < J; ++j) {
      double p = g[j] / sum;
      for (std::size_t c = 0; c < C; ++c) {
        const Term& term = terms[j * C + c];
        out.d_eta[c * N + i] += p * term.d1;
        out.d_load[c] += p * term.d1 * tnode[j];
        if (family[c] == 2) out.d_phi[c] += p * term.dphi;
        if (family[c] == 4) {
          int start = cut_start[c] - 1;
          if (term.cut_lo >= 0) out.d_cuts[start + term.cut_lo] += p * term.dcut_lo;
          if (term.cut_hi >= 0) out.d_cuts[start + term.cut_hi] += p * term.dcut_hi;
        }
      }
    }
    for (std::size_t c = 0; c < C; ++c) {
      if (family[c] == 2) {  // the eta-free part of the negative binomial's dl/dphi
        const Child& ch = row.children[c];
        out.d_phi[c] += digamma(ch.y + ch.phi) - digamma(ch.phi)
                           + std::log(ch.phi) + 1.0;
      }
    }
  }
  return value;
}

// ---------------------------------------------------------------- the block path
// The same quadrature, BLOCK rows at a time with one loop per child and family (the rows'
// values side by side), for children other than categorical ones. A row whose Newton
// step would need halving, or whose integrand is not finite, goes to integrate_row().
// A Poisson child's mean at node j is its mean at the mode times exp(load sqrt(2) s x_j),
// the node's factor, whose mirror node's is its inverse (the nodes are symmetric).
constexpr int BLOCK = 128;

struct Block {
  std::size_t C = 0, J = 0;
  double z[BLOCK], f[BLOCK], g[BLOCK], h[BLOCK];
  double zn[BLOCK], fn[BLOCK], gn[BLOCK], hn[BLOCK];
  double s[BLOCK], top[BLOCK], sum[BLOCK];
  bool slow[BLOCK], done[BLOCK];
  std::vector<double> mu, mun;   // C x BLOCK: exp(eta) of count children at z, at zn
  std::vector<double> nb;        // C x BLOCK: the negative binomial's eta-free terms
  std::vector<double> t, F;      // J x BLOCK: nodes, log integrand there
  std::vector<double> d1;        // C x J x BLOCK: dl/deta at the nodes
  std::vector<double> q;         // J x BLOCK: a count child's node factors
  std::vector<Term> terms;       // C x J x BLOCK: negative binomial, ordinal, Bernoulli
  void size(std::size_t children, std::size_t nodes) {
    C = children;
    J = nodes;
    mu.assign(C * BLOCK, 0.0);
    mun.assign(C * BLOCK, 0.0);
    nb.assign(C * BLOCK, 0.0);
    t.assign(J * BLOCK, 0.0);
    F.assign(J * BLOCK, 0.0);
    d1.assign(C * J * BLOCK, 0.0);
    q.assign(J * BLOCK, 1.0);
    terms.assign(C * J * BLOCK, Term());
  }
};

// The columns of one call as the block path reads them.
struct Columns {
  std::size_t N = 0, C = 0;
  const double* eta = nullptr;     // N x C, column-major
  std::vector<double> y;           // N x C, column-major
  std::vector<double> load;        // C
  std::vector<Child> child;        // C (y, lgamma_const set per row)
};

// Sum of the children's log densities (without eta-free constants of count children)
// minus zq^2 / 2 at zq[0..b), and its first two derivatives in z; exp(eta) of the count
// children in mu.
inline void evaluate_block(const Columns& col, std::size_t i0, int b, const double* zq,
                           double* f, double* g, double* h, double* mu, const double* nb) {
  for (int k = 0; k < b; ++k) {
    f[k] = -0.5 * zq[k] * zq[k];
    g[k] = -zq[k];
    h[k] = -1.0;
  }
  for (std::size_t c = 0; c < col.C; ++c) {
    const double* E = col.eta + c * col.N + i0;
    const double* Y = col.y.data() + c * col.N + i0;
    const double L = col.load[c];
    double* M = mu + c * BLOCK;
    if (col.child[c].family == 1) {
      for (int k = 0; k < b; ++k) {
        double e = E[k] + L * zq[k];
        double m = std::exp(e);
        M[k] = m;
        f[k] += Y[k] * e - m;
        g[k] += (Y[k] - m) * L;
        h[k] -= m * L * L;
      }
    } else {
      Child ch = col.child[c];
      Term t;
      for (int k = 0; k < b; ++k) {
        ch.y = static_cast<int>(Y[k]);
        ch.lgamma_const = nb[c * BLOCK + k];
        double e = E[k] + L * zq[k];
        evaluate(ch, e, t, false);
        f[k] += t.value;
        g[k] += t.d1 * L;
        h[k] += t.d2 * L * L;
      }
    }
  }
}

// Rows i0 .. i0 + b: log marginals in value[], gradient added to `out`; rows it leaves to
// integrate_row() flagged in blk.slow.
inline void integrate_block(const Columns& col, std::size_t i0, int b, const double* gh_x,
                            const double* gh_logw, bool symmetric, int steps,
                            const int* cut_start, Block& blk, double* value,
                            const Gradient& out) {
  const std::size_t C = col.C, J = blk.J;
  const double log_sqrt_pi = 0.5 * std::log(PI);
  const bool grad = out.wanted();
  // the negative binomial's eta-free terms, and the start: the mode with each count child's
  // log density replaced by its Normal approximation in eta
  double num[BLOCK], den[BLOCK];
  for (int k = 0; k < b; ++k) {
    num[k] = 0.0;
    den[k] = 1.0;
    blk.slow[k] = false;
    blk.done[k] = false;
  }
  for (std::size_t c = 0; c < C; ++c) {
    const Child& ch = col.child[c];
    if (ch.family != 1 && ch.family != 2) continue;
    const double* E = col.eta + c * col.N + i0;
    const double* Y = col.y.data() + c * col.N + i0;
    const double L = col.load[c];
    // the phi-only terms of the negative binomial's constant (as fill_row() sums them)
    const double nb_phi = ch.family == 2 ? -std::lgamma(ch.phi) + ch.phi * std::log(ch.phi) : 0.0;
    for (int k = 0; k < b; ++k) {
      double w = Y[k] + 0.5;
      double lw = std::log(w);
      if (ch.family == 2) {
        blk.nb[c * BLOCK + k] = std::lgamma(Y[k] + ch.phi) - std::lgamma(Y[k] + 1.0) + nb_phi;
        w = 1.0 / (1.0 / w + 1.0 / ch.phi);
      }
      num[k] += w * L * (lw - E[k]);
      den[k] += w * L * L;
    }
  }
  for (int k = 0; k < b; ++k) blk.z[k] = num[k] / den[k];
  evaluate_block(col, i0, b, blk.z, blk.f, blk.g, blk.h, blk.mu.data(), blk.nb.data());
  for (int k = 0; k < b; ++k) {
    if (!std::isfinite(blk.f[k]) || !std::isfinite(blk.g[k]) || !(blk.h[k] < 0)) {
      blk.slow[k] = true;
    }
  }
  for (int it = 0; it < steps; ++it) {
    bool any = false;
    for (int k = 0; k < b; ++k) {
      double step = -blk.g[k] / blk.h[k];
      if (blk.slow[k] || blk.done[k] || std::fabs(step) < STEP_TOLERANCE) {
        blk.done[k] = true;
        blk.zn[k] = blk.z[k];
      } else {
        blk.zn[k] = blk.z[k] + step;
        any = true;
      }
    }
    if (!any) break;
    evaluate_block(col, i0, b, blk.zn, blk.fn, blk.gn, blk.hn, blk.mun.data(), blk.nb.data());
    for (int k = 0; k < b; ++k) {
      if (blk.done[k]) continue;
      if (std::isfinite(blk.fn[k]) && blk.fn[k] >= blk.f[k] - 1e-12 * (1.0 + std::fabs(blk.f[k]))) {
        blk.z[k] = blk.zn[k];
        blk.f[k] = blk.fn[k];
        blk.g[k] = blk.gn[k];
        blk.h[k] = blk.hn[k];
        for (std::size_t c = 0; c < C; ++c) blk.mu[c * BLOCK + k] = blk.mun[c * BLOCK + k];
      } else {
        blk.slow[k] = true;  // its step needs halving
      }
    }
  }
  for (int k = 0; k < b; ++k) {
    if (!std::isfinite(blk.f[k]) || !(blk.h[k] < 0)) blk.slow[k] = true;
    blk.s[k] = blk.slow[k] ? 1.0 : 1.0 / std::sqrt(-blk.h[k]);
  }
  // the nodes and the log integrand there
  const double root2 = std::sqrt(2.0);
  for (std::size_t j = 0; j < J; ++j) {
    double* T = blk.t.data() + j * BLOCK;
    double* F = blk.F.data() + j * BLOCK;
    for (int k = 0; k < b; ++k) {
      T[k] = blk.z[k] + root2 * blk.s[k] * gh_x[j];
      F[k] = -0.5 * T[k] * T[k];
    }
  }
  for (std::size_t c = 0; c < C; ++c) {
    const Child& ch = col.child[c];
    const double* E = col.eta + c * col.N + i0;
    const double* Y = col.y.data() + c * col.N + i0;
    const double L = col.load[c];
    if (ch.family == 1) {
      const double* M = blk.mu.data() + c * BLOCK;
      for (std::size_t j = 0; j < J; ++j) {  // the node factors exp(L (t_j - z))
        double* Q = blk.q.data() + j * BLOCK;
        std::size_t mirror = J - 1 - j;
        if (symmetric && mirror < j) {
          const double* P = blk.q.data() + mirror * BLOCK;
          for (int k = 0; k < b; ++k) Q[k] = 1.0 / P[k];
        } else if (symmetric && mirror == j) {
          for (int k = 0; k < b; ++k) Q[k] = 1.0;
        } else {
          const double* T = blk.t.data() + j * BLOCK;
          for (int k = 0; k < b; ++k) Q[k] = std::exp(L * (T[k] - blk.z[k]));
        }
      }
      for (std::size_t j = 0; j < J; ++j) {
        const double* Q = blk.q.data() + j * BLOCK;
        const double* T = blk.t.data() + j * BLOCK;
        double* F = blk.F.data() + j * BLOCK;
        double* D = blk.d1.data() + (c * J + j) * BLOCK;
        for (int k = 0; k < b; ++k) {
          double m = M[k] * Q[k];
          F[k] += Y[k] * (E[k] + L * T[k]) - m;
          D[k] = Y[k] - m;
        }
      }
    } else {
      Child chk = ch;
      for (std::size_t j = 0; j < J; ++j) {
        const double* T = blk.t.data() + j * BLOCK;
        double* F = blk.F.data() + j * BLOCK;
        double* D = blk.d1.data() + (c * J + j) * BLOCK;
        Term* TM = blk.terms.data() + (c * J + j) * BLOCK;
        for (int k = 0; k < b; ++k) {
          chk.y = static_cast<int>(Y[k]);
          chk.lgamma_const = blk.nb[c * BLOCK + k];
          evaluate(chk, E[k] + L * T[k], TM[k], grad);
          F[k] += TM[k].value;
          D[k] = TM[k].d1;
        }
      }
    }
  }
  // the nodes' weights and the log marginal
  for (int k = 0; k < b; ++k) blk.top[k] = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < J; ++j) {
    double* F = blk.F.data() + j * BLOCK;
    const double add = gh_x[j] * gh_x[j] + gh_logw[j];
    for (int k = 0; k < b; ++k) {
      F[k] += add;
      if (F[k] > blk.top[k]) blk.top[k] = F[k];
    }
  }
  for (int k = 0; k < b; ++k) blk.sum[k] = 0.0;
  for (std::size_t j = 0; j < J; ++j) {
    double* F = blk.F.data() + j * BLOCK;
    for (int k = 0; k < b; ++k) {
      // the node's share, unnormalised (the largest node's is exp(0) = 1 exactly)
      F[k] = F[k] == blk.top[k] ? 1.0 : std::exp(F[k] - blk.top[k]);
      blk.sum[k] += F[k];
    }
  }
  for (int k = 0; k < b; ++k) {
    // log(sum) - log(-h) / 2 as one log: s = 1 / sqrt(-h) where the row is not slow
    value[k] = blk.slow[k]
        ? blk.top[k] + std::log(blk.sum[k]) - 0.5 * std::log(-blk.h[k]) - log_sqrt_pi
        : blk.top[k] + std::log(blk.sum[k] * blk.s[k]) - log_sqrt_pi;
    if (!blk.slow[k] && !std::isfinite(value[k])) blk.slow[k] = true;
  }
  if (!grad) return;
  for (std::size_t j = 0; j < J; ++j) {  // the nodes' posterior weights
    double* F = blk.F.data() + j * BLOCK;
    for (int k = 0; k < b; ++k) F[k] = blk.slow[k] ? 0.0 : F[k] / blk.sum[k];
  }
  for (std::size_t c = 0; c < C; ++c) {
    const Child& ch = col.child[c];
    double* de = out.d_eta + c * col.N + i0;
    double dload = 0.0, dphi = 0.0;
    for (std::size_t j = 0; j < J; ++j) {
      const double* P = blk.F.data() + j * BLOCK;
      const double* T = blk.t.data() + j * BLOCK;
      const double* D = blk.d1.data() + (c * J + j) * BLOCK;
      for (int k = 0; k < b; ++k) {
        double pd = blk.slow[k] ? 0.0 : P[k] * D[k];
        de[k] += pd;
        dload += blk.slow[k] ? 0.0 : pd * T[k];
      }
      if (ch.family == 2 || ch.family == 4) {
        const Term* TM = blk.terms.data() + (c * J + j) * BLOCK;
        for (int k = 0; k < b; ++k) {
          if (blk.slow[k]) continue;
          if (ch.family == 2) {
            dphi += P[k] * TM[k].dphi;
          } else {
            int start = cut_start[c] - 1;
            if (TM[k].cut_lo >= 0) out.d_cuts[start + TM[k].cut_lo] += P[k] * TM[k].dcut_lo;
            if (TM[k].cut_hi >= 0) out.d_cuts[start + TM[k].cut_hi] += P[k] * TM[k].dcut_hi;
          }
        }
      }
    }
    if (ch.family == 2) {  // the eta-free part of the negative binomial's dl/dphi
      const double* Y = col.y.data() + c * col.N + i0;
      const double phi_part = -digamma(ch.phi) + std::log(ch.phi) + 1.0;
      for (int k = 0; k < b; ++k) {
        if (blk.slow[k]) continue;
        dphi += digamma(Y[k] + ch.phi) + phi_part;
      }
      out.d_phi[c] += dphi;
    }
    out.d_load[c] += dload;
  }
}

// The log marginal of every row (in `rows`, with the eta-free constants, when given), the
// gradient pieces when asked; the sum over rows (without the Poisson children's constants
// when `rows` is null).
inline double integrate(const Inputs& in, double* rows, const Gradient& out) {
  const std::size_t N = in.N, C = in.C, J = in.J;
  const int* family = in.family;
  const double* gh_x = in.gh_x;
  const bool constants = rows != nullptr;
  std::vector<double> g(J), tnode(J);
  std::vector<Term> terms(J * C);
  double total = 0.0;
  Row row;
  // every child takes the block path but a categorical one (and loadings shared by rows)
  bool blocks = !in.load_per_row;
  for (std::size_t c = 0; c < C; ++c) blocks = blocks && family[c] >= 1 && family[c] <= 4;
  if (!blocks) {
    for (std::size_t i = 0; i < N; ++i) {
      fill_row(row, i, in, constants);
      double value = integrate_row(row, i, in, g, tnode, terms, out);
      if (rows != nullptr) rows[i] = value;
      total += value;
    }
    return total;
  }
  bool symmetric = true;  // nodes in mirrored pairs about 0 (and 0 itself, for an odd count)
  for (std::size_t j = 0; j < J; ++j) {
    double pair = gh_x[j] + gh_x[J - 1 - j];
    symmetric = symmetric && std::fabs(pair) <= 1e-12 * (1.0 + std::fabs(gh_x[j]));
  }
  if (J % 2 == 1) symmetric = symmetric && gh_x[J / 2] == 0.0;
  Columns col;
  col.N = N;
  col.C = C;
  col.eta = in.eta;
  col.y.resize(N * C);
  col.load.resize(C);
  col.child.resize(C);
  for (std::size_t c = 0; c < C; ++c) {
    for (std::size_t i = 0; i < N; ++i) col.y[c * N + i] = in.y[c * N + i];
    col.load[c] = in.load[c];
    Child& ch = col.child[c];
    ch.family = family[c];
    ch.y = 0;
    ch.phi = in.phi[c];
    ch.cuts = in.cut_len[c] > 0 ? in.cuts + (in.cut_start[c] - 1) : nullptr;
    ch.n_cuts = in.cut_len[c];
    ch.lgamma_const = 0.0;
  }
  Block blk;
  blk.size(C, J);
  double value[BLOCK];
  for (std::size_t i0 = 0; i0 < N; i0 += BLOCK) {
    const int b = static_cast<int>(std::min<std::size_t>(BLOCK, N - i0));
    integrate_block(col, i0, b, gh_x, in.gh_logw, symmetric, in.steps, in.cut_start, blk, value,
                    out);
    for (int k = 0; k < b; ++k) {
      std::size_t i = i0 + k;
      if (blk.slow[k]) {
        fill_row(row, i, in, constants);
        value[k] = integrate_row(row, i, in, g, tnode, terms, out);
      } else if (constants) {
        for (std::size_t c = 0; c < C; ++c) {
          if (family[c] == 1) value[k] -= std::lgamma(col.y[c * N + i] + 1.0);
        }
      }
      if (rows != nullptr) rows[i] = value[k];
      total += value[k];
    }
  }
  return total;
}


// ---------------------------------------------------------------- exact draws
// Exact draws of a row's z from its posterior: rejection sampling under the tangent hull
// of the log-concave integrand at z*, z* - s, z* + s (valid for any log-concave
// integrand), with a flat top between the two outer tangents.
struct Hull {
  bool ok = false;  // false: the density is not finite (draws are NaN)
  double z1 = 0, f1 = 0, g1 = 0, z2 = 0, f2 = 0, g2 = 0;  // the tangent points
  double top = 0, xl = 0, xr = 0;                       // the flat top and its ends
  double ml = 0, mc = 0, mass = 0;                      // masses: left tail, top, all
};

inline Hull hull_of(const Row& row, int newton_steps) {
  Hull hull;
  double z, f, g, h;
  // the hull below is valid at any z; a mode found closely keeps the draw efficient
  if (!row.mode(std::max(newton_steps, DRAW_NEWTON_MIN), z, f, g, h)) return hull;
  double s = 1.0 / std::sqrt(-h);
  // the flat top: F <= F(z) + g^2 / 2 because F is 1-strongly concave
  double top = f + 0.5 * g * g + 1e-12;
  double z1 = z - s, z2 = z + s, f1, g1, h1, f2, g2, h2;
  row.at(z1, f1, g1, h1);
  row.at(z2, f2, g2, h2);
  // tangent points on either side of the mode: moved out (doubling) if one is not
  for (int k = 0; k < WIDEN_MAX && std::isfinite(g1) && !(g1 > 0); ++k) {
    z1 -= s * std::ldexp(1.0, k);
    row.at(z1, f1, g1, h1);
  }
  for (int k = 0; k < WIDEN_MAX && std::isfinite(g2) && !(g2 < 0); ++k) {
    z2 += s * std::ldexp(1.0, k);
    row.at(z2, f2, g2, h2);
  }
  if (!(g1 > 0) || !(g2 < 0) || !std::isfinite(f1) || !std::isfinite(f2)) return hull;
  double xl = z1 + (top - f1) / g1, xr = z2 + (top - f2) / g2;
  if (xl > xr) {  // the two tangents meet below the top
    double x = (f2 - f1 + g1 * z1 - g2 * z2) / (g1 - g2);
    xl = x;
    xr = x;
  }
  double ul = f1 + g1 * (xl - z1) - top, ur = f2 + g2 * (xr - z2) - top;
  double ml = std::exp(ul) / g1, mc = xr - xl, mr = std::exp(ur) / (-g2);
  hull.ok = true;
  hull.z1 = z1;
  hull.f1 = f1;
  hull.g1 = g1;
  hull.z2 = z2;
  hull.f2 = f2;
  hull.g2 = g2;
  hull.top = top;
  hull.xl = xl;
  hull.xr = xr;
  hull.ml = ml;
  hull.mc = mc;
  hull.mass = ml + mc + mr;
  return hull;
}

// One draw under `hull` (NaN if the hull is not ok, or after REJECTION_MAX rejections).
// `uniform()` returns independent Uniform(0, 1) values, three per proposal.
template <typename Uniform>
inline double draw_from(const Row& row, const Hull& hull, Uniform&& uniform) {
  if (!hull.ok) return std::numeric_limits<double>::quiet_NaN();
  for (int k = 0; k < REJECTION_MAX; ++k) {
    double u = uniform() * hull.mass;
    double v = uniform();
    double w = uniform();
    double t, bound;
    if (u < hull.ml) {
      t = hull.xl + std::log(v) / hull.g1;
      bound = hull.f1 + hull.g1 * (t - hull.z1);
    } else if (u < hull.ml + hull.mc) {
      t = hull.xl + (u - hull.ml);
      bound = hull.top;
    } else {
      t = hull.xr + std::log(v) / hull.g2;
      bound = hull.f2 + hull.g2 * (t - hull.z2);
    }
    double ft, gt, ht;
    row.at(t, ft, gt, ht);
    if (std::log(w) <= ft - bound) return t;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

// One exact draw of a row's z (its hull, then one draw under it).
template <typename Uniform>
inline double draw_row(const Row& row, int newton_steps, Uniform&& uniform) {
  return draw_from(row, hull_of(row, newton_steps), uniform);
}

// ---------------------------------------------------------------- two latents per row
// Row i's integrand is F(z) = sum_c l_c(eta_c + load1_c z1 + load2_c z2) - |z|^2 / 2 over
// all the pair's children (code 7 for Normal ones, whose eta holds mu - y). Its log
// marginal log int exp(F) dz / (2 pi) is computed by the product rule of the 1-D nodes,
// rotated and scaled by the Cholesky factor of -F'' at the mode (found by Newton steps,
// halved until F does not fall): with -F''(z*) = R R', the nodes are
// z* + sqrt(2) R^-T (x_j, x_k). As in one dimension, the gradient holds the nodes fixed.
struct Row2 {
  Row base;                // children, eta, and the first latent's loadings (base.load)
  std::vector<double> l2;  // the second latent's loadings

  // sum_c l_c at z (the prior left out), each child's term, and the sum's gradient g and
  // Hessian h = (h11, h12, h22)
  double evaluate_all(double a, double b, Term* terms, bool want_params, double* g,
                      double* h) const {
    double f = 0.0;
    g[0] = g[1] = h[0] = h[1] = h[2] = 0.0;
    for (std::size_t c = 0; c < base.children.size(); ++c) {
      const double u = base.load[c], v = l2[c];
      Term& t = terms[c];
      evaluate(base.children[c], base.eta[c] + u * a + v * b, t, want_params);
      f += t.value;
      g[0] += t.d1 * u;
      g[1] += t.d1 * v;
      h[0] += t.d2 * u * u;
      h[1] += t.d2 * u * v;
      h[2] += t.d2 * v * v;
    }
    return f;
  }

  void at(double a, double b, double& f, double* g, double* h) const {
    base.scratch.resize(base.children.size());
    f = evaluate_all(a, b, base.scratch.data(), false, g, h) - 0.5 * (a * a + b * b);
    g[0] -= a;
    g[1] -= b;
    h[0] -= 1.0;
    h[2] -= 1.0;
  }

  // Newton's start: each count child replaced by its Normal approximation in eta (as in
  // Row::start), each Normal child exactly; binary and ordinal children add nothing.
  void start(double& a, double& b) const {
    double p11 = 1.0, p12 = 0.0, p22 = 1.0, r1 = 0.0, r2 = 0.0;
    for (std::size_t c = 0; c < base.children.size(); ++c) {
      const Child& ch = base.children[c];
      double w, target;
      if (ch.family == 1 || ch.family == 2) {
        w = ch.y + 0.5;
        if (ch.family == 2) w = 1.0 / (1.0 / w + 1.0 / ch.phi);
        target = std::log(ch.y + 0.5) - base.eta[c];
      } else if (ch.family == 7) {
        w = 1.0 / (ch.phi * ch.phi);
        target = -base.eta[c];
      } else {
        continue;
      }
      const double u = base.load[c], v = l2[c];
      p11 += w * u * u;
      p12 += w * u * v;
      p22 += w * v * v;
      r1 += w * u * target;
      r2 += w * v * target;
    }
    const double det = p11 * p22 - p12 * p12;
    a = (p22 * r1 - p12 * r2) / det;
    b = (p11 * r2 - p12 * r1) / det;
  }

  // `steps` Newton steps from start(), each halved until F does not fall; false if F is
  // not finite or not strictly concave at the end.
  bool mode(int steps, double& a, double& b, double& f, double* g, double* h) const {
    start(a, b);
    at(a, b, f, g, h);
    if (!std::isfinite(f) || !std::isfinite(g[0]) || !std::isfinite(g[1])) {
      a = b = 0.0;
      at(a, b, f, g, h);
      if (!std::isfinite(f)) return false;
    }
    for (int it = 0; it < steps; ++it) {
      const double det = h[0] * h[2] - h[1] * h[1];
      if (!(h[0] < 0) || !(det > 0)) return false;
      double sa = -(h[2] * g[0] - h[1] * g[1]) / det;
      double sb = -(h[0] * g[1] - h[1] * g[0]) / det;
      if (std::fabs(sa) + std::fabs(sb) < STEP_TOLERANCE) break;
      double an = a, bn = b, fn = f, gn[2], hn[3];
      bool moved = false;
      for (int k = 0; k < HALVING_MAX; ++k) {
        an = a + sa;
        bn = b + sb;
        at(an, bn, fn, gn, hn);
        if (std::isfinite(fn) && fn >= f - 1e-12 * (1.0 + std::fabs(f))) {
          moved = true;
          break;
        }
        sa *= 0.5;
        sb *= 0.5;
      }
      if (!moved) break;
      a = an;
      b = bn;
      f = fn;
      g[0] = gn[0];
      g[1] = gn[1];
      h[0] = hn[0];
      h[1] = hn[1];
      h[2] = hn[2];
    }
    return std::isfinite(f) && h[0] < 0 && h[0] * h[2] - h[1] * h[1] > 0;
  }
};

inline void fill_row2(Row2& row, std::size_t i, const Inputs& in) {
  fill_row(row.base, i, in, true);
  row.l2.assign(in.load2, in.load2 + in.C);
  for (std::size_t c = 0; c < in.C; ++c) {
    const int fam = in.family[c];
    if (fam != 7 && (fam < 1 || fam > 4)) {
      throw std::domain_error("counterfair integrated latents: two latents per row take "
                              "Normal, Poisson, negative binomial, Bernoulli and ordinal "
                              "children only");
    }
  }
}

// Row i's log marginal (NaN when its mode is not found), its gradient added to `out`.
// g holds J * J node weights, tnode 2 * J * J node positions, terms J * J * C terms.
inline double integrate_row2(const Row2& row, std::size_t i, const Inputs& in,
                             std::vector<double>& g, std::vector<double>& tnode,
                             std::vector<Term>& terms, const Gradient& out) {
  const std::size_t C = in.C, N = in.N, J = in.J;
  const bool grad = out.wanted();
  double a, b, f, gz[2], h[3];
  if (!row.mode(in.steps, a, b, f, gz, h)) return std::numeric_limits<double>::quiet_NaN();
  const double r11 = std::sqrt(-h[0]);
  const double r21 = -h[1] / r11;
  const double r22 = std::sqrt(-h[2] - r21 * r21);
  double top = -std::numeric_limits<double>::infinity();
  for (std::size_t j = 0; j < J; ++j) {
    for (std::size_t k = 0; k < J; ++k) {
      const std::size_t n = j * J + k;
      const double x1 = in.gh_x[j], x2 = in.gh_x[k];
      const double u2 = x2 / r22, u1 = (x1 - r21 * u2) / r11;  // R' u = x
      const double ta = a + std::sqrt(2.0) * u1, tb = b + std::sqrt(2.0) * u2;
      tnode[2 * n] = ta;
      tnode[2 * n + 1] = tb;
      double gj[2], hj[3];
      double fj = row.evaluate_all(ta, tb, terms.data() + n * C, grad, gj, hj)
                  - 0.5 * (ta * ta + tb * tb);
      g[n] = fj + x1 * x1 + x2 * x2 + in.gh_logw[j] + in.gh_logw[k];
      if (g[n] > top) top = g[n];
    }
  }
  double sum = 0.0;
  for (std::size_t n = 0; n < J * J; ++n) {
    g[n] = std::exp(g[n] - top);
    sum += g[n];
  }
  const double value = top + std::log(sum) - std::log(r11) - std::log(r22) - std::log(PI);
  if (grad && std::isfinite(value)) {
    for (std::size_t n = 0; n < J * J; ++n) {
      const double p = g[n] / sum;
      for (std::size_t c = 0; c < C; ++c) {
        const Term& term = terms[n * C + c];
        out.d_eta[c * N + i] += p * term.d1;
        out.d_load[c] += p * term.d1 * tnode[2 * n];
        out.d_load2[c] += p * term.d1 * tnode[2 * n + 1];
        const int fam = in.family[c];
        if (fam == 2 || fam == 7) out.d_phi[c] += p * term.dphi;
        if (fam == 4) {
          const int start = in.cut_start[c] - 1;
          if (term.cut_lo >= 0) out.d_cuts[start + term.cut_lo] += p * term.dcut_lo;
          if (term.cut_hi >= 0) out.d_cuts[start + term.cut_hi] += p * term.dcut_hi;
        }
      }
    }
    for (std::size_t c = 0; c < C; ++c) {
      if (in.family[c] == 2) {  // the eta-free part of the negative binomial's dl/dphi
        const Child& ch = row.base.children[c];
        out.d_phi[c] += digamma(ch.y + ch.phi) - digamma(ch.phi) + std::log(ch.phi) + 1.0;
      }
    }
  }
  return value;
}

// Every row's log marginal (in `rows` when given) and the gradient pieces when asked;
// the sum over rows.
inline double integrate2(const Inputs& in, double* rows, const Gradient& out) {
  const std::size_t J = in.J;
  std::vector<double> g(J * J), tnode(2 * J * J);
  std::vector<Term> terms(J * J * in.C);
  Row2 row;
  double total = 0.0;
  for (std::size_t i = 0; i < in.N; ++i) {
    fill_row2(row, i, in);
    const double value = integrate_row2(row, i, in, g, tnode, terms, out);
    if (rows != nullptr) rows[i] = value;
    total += value;
  }
  return total;
}

// One exact draw of a row's z = (z1, z2), by rejection. F is the sum of a Gaussian part,
// -z' P z / 2 + linear (the prior and the Normal children: P = I + sum over Normal
// children of load load' / sd^2, the same for every row) and a concave part (the other
// children). At any point z0, F(z) <= F(z0) + F'(z0)'d - d' P d / 2 with d = z - z0 (the
// concave part lies under its tangent), so proposals from the Normal that bound defines
// (mean z0 + P^-1 F'(z0), precision P), accepted with probability exp(F(z) - bound(z)),
// are exact draws. z0 is the mode found by Newton steps, which keeps acceptance high.
// `uniform()` returns independent Uniform(0, 1) values, three per proposal; a row whose
// density is not finite gets NaN in both.
template <typename Uniform>
inline void draw_row2(const Row2& row, int newton_steps, Uniform&& uniform, double* z) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  z[0] = z[1] = nan;
  double a, b, f, g[2], h[3];
  if (!row.mode(std::max(newton_steps, DRAW_NEWTON_MIN), a, b, f, g, h)) return;
  double p11 = 1.0, p12 = 0.0, p22 = 1.0;
  for (std::size_t c = 0; c < row.base.children.size(); ++c) {
    const Child& ch = row.base.children[c];
    if (ch.family != 7) continue;
    const double w = 1.0 / (ch.phi * ch.phi), u = row.base.load[c], v = row.l2[c];
    p11 += w * u * u;
    p12 += w * u * v;
    p22 += w * v * v;
  }
  const double det = p11 * p22 - p12 * p12;
  // the bound's peak: z0 + P^-1 g
  const double ca = a + (p22 * g[0] - p12 * g[1]) / det;
  const double cb = b + (p11 * g[1] - p12 * g[0]) / det;
  const double l11 = std::sqrt(p11), l21 = p12 / l11, l22 = std::sqrt(p22 - l21 * l21);
  for (int k = 0; k < REJECTION_MAX; ++k) {
    const double u1 = uniform(), u2 = uniform(), w = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));  // Box-Muller
    const double e1 = radius * std::cos(2.0 * PI * u2), e2 = radius * std::sin(2.0 * PI * u2);
    const double d2 = e2 / l22, d1 = (e1 - l21 * d2) / l11;  // L' d = e
    const double ta = ca + d1, tb = cb + d2;
    const double da = ta - a, db = tb - b;
    const double bound = f + g[0] * da + g[1] * db
                         - 0.5 * (p11 * da * da + 2.0 * p12 * da * db + p22 * db * db);
    double ft, gt[2], ht[3];
    row.at(ta, tb, ft, gt, ht);
    if (std::log(w) <= ft - bound) {
      z[0] = ta;
      z[1] = tb;
      return;
    }
  }
}

}  // namespace counterfair_integrated

#endif  // COUNTERFAIR_QUADRATURE_HPP
