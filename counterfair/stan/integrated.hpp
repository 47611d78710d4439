// counterfair: the Stan face of the integrated-latent quadrature and exact draws.
//
// Included (cmdstan USER_HEADER) by fit programs with latents="integrated"; see
// counterfair/stan/integrated.py for the model these functions serve. The computation
// itself is quadrature.hpp's (shared with the library of counterfair/stan/native.py);
// here are only Stan's argument types, the sizes check and the autodiff of the sum.
#ifndef COUNTERFAIR_INTEGRATED_HPP
#define COUNTERFAIR_INTEGRATED_HPP

#include <stan/math.hpp>
#include <ostream>
#include <vector>

#include "quadrature.hpp"

namespace counterfair_integrated {

inline void check_sizes(const char* fn, std::size_t N, std::size_t yrows, Eigen::Index erows,
                        Eigen::Index ecols, Eigen::Index nload, std::size_t C, Eigen::Index nphi,
                        std::size_t nstart, std::size_t nlen, Eigen::Index nx,
                        Eigen::Index nlogw) {
  if (yrows != N || static_cast<std::size_t>(erows) != N || static_cast<std::size_t>(ecols) != C
      || static_cast<std::size_t>(nload) != C || static_cast<std::size_t>(nphi) != C
      || nstart != C || nlen != C || nx != nlogw || nx < 1) {
    throw std::domain_error(std::string(fn) + ": argument sizes do not agree");
  }
}

// A call's values, owned, and the Inputs that point into them.
struct StanCall {
  std::vector<int> y;  // N x C, column-major
  Eigen::MatrixXd eta;
  Eigen::RowVectorXd load, load2;
  Eigen::VectorXd phi, cuts, x, logw;
  Inputs in;

  // the second latent's loadings (two latents per row)
  template <typename TL2>
  void second(const char* fn, const TL2& load2_) {
    load2 = stan::math::value_of(load2_);
    if (load2.size() != load.size()) {
      throw std::domain_error(std::string(fn) + ": argument sizes do not agree");
    }
    in.load2 = load2.data();
  }

  template <typename TE, typename TL, typename TP, typename TC, typename TX, typename TW>
  StanCall(const char* fn, const std::vector<std::vector<int>>& y_rows, const TE& eta_,
           const TL& load_, const std::vector<int>& family, const TP& phi_, const TC& cuts_,
           const std::vector<int>& cut_start, const std::vector<int>& cut_len, const TX& gh_x,
           const TW& gh_logw, int newton_steps)
      : eta(stan::math::value_of(eta_)),
        load(stan::math::value_of(load_)),
        phi(stan::math::value_of(phi_)),
        cuts(stan::math::value_of(cuts_)),
        x(stan::math::value_of(gh_x)),
        logw(stan::math::value_of(gh_logw)) {
    check_sizes(fn, eta.rows(), y_rows.size(), eta.rows(), eta.cols(), load.size(),
                family.size(), phi.size(), cut_start.size(), cut_len.size(), x.size(),
                logw.size());
    const std::size_t N = y_rows.size(), C = family.size();
    y.resize(N * C);
    for (std::size_t i = 0; i < N; ++i) {
      for (std::size_t c = 0; c < C; ++c) y[c * N + i] = y_rows[i][c];
    }
    in.N = N;
    in.C = C;
    in.y = y.data();
    in.eta = eta.data();
    in.load = load.data();
    in.family = family.data();
    in.phi = phi.data();
    in.cuts = cuts.data();
    in.cut_start = cut_start.data();
    in.cut_len = cut_len.data();
    in.gh_x = x.data();
    in.gh_logw = logw.data();
    in.J = static_cast<std::size_t>(x.size());
    in.steps = newton_steps;
  }
};

}  // namespace counterfair_integrated

// Sum over rows of the log marginal, with its gradient (see quadrature.hpp).
template <typename TE, typename TL, typename TP, typename TC, typename TX, typename TW>
stan::return_type_t<TE, TL, TP, TC> cf_integrated(
    const std::vector<std::vector<int>>& y, const TE& eta, const TL& load,
    const std::vector<int>& family, const TP& phi, const TC& cuts,
    const std::vector<int>& cut_start, const std::vector<int>& cut_len, const TX& gh_x,
    const TW& gh_logw, int newton_steps, std::ostream* pstream__) {
  const auto& eta_ref = stan::math::to_ref(eta);
  const auto& load_ref = stan::math::to_ref(load);
  const auto& phi_ref = stan::math::to_ref(phi);
  const auto& cuts_ref = stan::math::to_ref(cuts);
  counterfair_integrated::StanCall call("cf_integrated", y, eta_ref, load_ref, family, phi_ref,
                                        cuts_ref, cut_start, cut_len, gh_x, gh_logw,
                                        newton_steps);
  Eigen::MatrixXd d_eta = Eigen::MatrixXd::Zero(call.eta.rows(), call.eta.cols());
  Eigen::VectorXd d_load = Eigen::VectorXd::Zero(call.load.size());
  Eigen::VectorXd d_phi = Eigen::VectorXd::Zero(call.phi.size());
  Eigen::VectorXd d_cuts = Eigen::VectorXd::Zero(call.cuts.size());
  counterfair_integrated::Gradient out;
  out.d_eta = d_eta.data();
  out.d_load = d_load.data();
  out.d_phi = d_phi.data();
  out.d_cuts = d_cuts.data();
  double total = counterfair_integrated::integrate(call.in, nullptr, out);
  auto ops = stan::math::make_partials_propagator(eta_ref, load_ref, phi_ref, cuts_ref);
  if (!stan::is_constant<TE>::value) stan::math::edge<0>(ops).partials_ = d_eta;
  if (!stan::is_constant<TL>::value) stan::math::edge<1>(ops).partials_ = d_load.transpose();
  if (!stan::is_constant<TP>::value) stan::math::edge<2>(ops).partials_ = d_phi;
  if (!stan::is_constant<TC>::value) stan::math::edge<3>(ops).partials_ = d_cuts;
  return ops.build(total);
}

// The log marginal of each row (values only: generated quantities).
template <typename TE, typename TL, typename TP, typename TC, typename TX, typename TW>
Eigen::VectorXd cf_integrated_rows(const std::vector<std::vector<int>>& y, const TE& eta,
                                   const TL& load, const std::vector<int>& family,
                                   const TP& phi, const TC& cuts,
                                   const std::vector<int>& cut_start,
                                   const std::vector<int>& cut_len, const TX& gh_x,
                                   const TW& gh_logw, int newton_steps, std::ostream* pstream__) {
  counterfair_integrated::StanCall call("cf_integrated_rows", y, eta, load, family, phi, cuts,
                                        cut_start, cut_len, gh_x, gh_logw, newton_steps);
  Eigen::VectorXd rows(call.eta.rows());
  counterfair_integrated::integrate(call.in, rows.data(), counterfair_integrated::Gradient());
  return rows;
}

// One exact draw of each row's z from its posterior (quadrature.hpp's draw_row, with
// Stan's random numbers). A row whose density is not finite gets NaN (named by
// counterfair in a ConvergenceWarning).
template <typename TE, typename TL, typename TP, typename TC, typename TX, typename TW,
          typename RNG>
Eigen::VectorXd cf_integrated_rng(const std::vector<std::vector<int>>& y, const TE& eta,
                                  const TL& load, const std::vector<int>& family,
                                  const TP& phi, const TC& cuts,
                                  const std::vector<int>& cut_start,
                                  const std::vector<int>& cut_len, const TX& gh_x,
                                  const TW& gh_logw, int newton_steps, RNG& base_rng__,
                                  std::ostream* pstream__) {
  counterfair_integrated::StanCall call("cf_integrated_rng", y, eta, load, family, phi, cuts,
                                        cut_start, cut_len, gh_x, gh_logw, newton_steps);
  const std::size_t N = y.size();
  Eigen::VectorXd out(N);
  counterfair_integrated::Row row;
  auto uniform = [&base_rng__]() { return stan::math::uniform_rng(0.0, 1.0, base_rng__); };
  for (std::size_t i = 0; i < N; ++i) {
    counterfair_integrated::fill_row(row, i, call.in, false);
    out(i) = counterfair_integrated::draw_row(row, newton_steps, uniform);
  }
  return out;
}

// Two latents per row: the sum over rows of the log marginal, with its gradient.
template <typename TE, typename TL, typename TL2, typename TP, typename TC, typename TX,
          typename TW>
stan::return_type_t<TE, TL, TL2, TP, TC> cf_integrated2(
    const std::vector<std::vector<int>>& y, const TE& eta, const TL& load, const TL2& load2,
    const std::vector<int>& family, const TP& phi, const TC& cuts,
    const std::vector<int>& cut_start, const std::vector<int>& cut_len, const TX& gh_x,
    const TW& gh_logw, int newton_steps, std::ostream* pstream__) {
  const auto& eta_ref = stan::math::to_ref(eta);
  const auto& load_ref = stan::math::to_ref(load);
  const auto& load2_ref = stan::math::to_ref(load2);
  const auto& phi_ref = stan::math::to_ref(phi);
  const auto& cuts_ref = stan::math::to_ref(cuts);
  counterfair_integrated::StanCall call("cf_integrated2", y, eta_ref, load_ref, family,
                                        phi_ref, cuts_ref, cut_start, cut_len, gh_x, gh_logw,
                                        newton_steps);
  call.second("cf_integrated2", load2_ref);
  Eigen::MatrixXd d_eta = Eigen::MatrixXd::Zero(call.eta.rows(), call.eta.cols());
  Eigen::VectorXd d_load = Eigen::VectorXd::Zero(call.load.size());
  Eigen::VectorXd d_load2 = Eigen::VectorXd::Zero(call.load.size());
  Eigen::VectorXd d_phi = Eigen::VectorXd::Zero(call.phi.size());
  Eigen::VectorXd d_cuts = Eigen::VectorXd::Zero(call.cuts.size());
  counterfair_integrated::Gradient out;
  out.d_eta = d_eta.data();
  out.d_load = d_load.data();
  out.d_load2 = d_load2.data();
  out.d_phi = d_phi.data();
  out.d_cuts = d_cuts.data();
  double total = counterfair_integrated::integrate2(call.in, nullptr, out);
  auto ops = stan::math::make_partials_propagator(eta_ref, load_ref, load2_ref, phi_ref,
                                                  cuts_ref);
  if (!stan::is_constant<TE>::value) stan::math::edge<0>(ops).partials_ = d_eta;
  if (!stan::is_constant<TL>::value) stan::math::edge<1>(ops).partials_ = d_load.transpose();
  if (!stan::is_constant<TL2>::value) stan::math::edge<2>(ops).partials_ = d_load2.transpose();
  if (!stan::is_constant<TP>::value) stan::math::edge<3>(ops).partials_ = d_phi;
  if (!stan::is_constant<TC>::value) stan::math::edge<4>(ops).partials_ = d_cuts;
  return ops.build(total);
}

// Two latents per row: each row's log marginal (values only).
template <typename TE, typename TL, typename TL2, typename TP, typename TC, typename TX,
          typename TW>
Eigen::VectorXd cf_integrated2_rows(const std::vector<std::vector<int>>& y, const TE& eta,
                                    const TL& load, const TL2& load2,
                                    const std::vector<int>& family, const TP& phi,
                                    const TC& cuts, const std::vector<int>& cut_start,
                                    const std::vector<int>& cut_len, const TX& gh_x,
                                    const TW& gh_logw, int newton_steps,
                                    std::ostream* pstream__) {
  counterfair_integrated::StanCall call("cf_integrated2_rows", y, eta, load, family, phi, cuts,
                                        cut_start, cut_len, gh_x, gh_logw, newton_steps);
  call.second("cf_integrated2_rows", load2);
  Eigen::VectorXd rows(call.eta.rows());
  counterfair_integrated::integrate2(call.in, rows.data(), counterfair_integrated::Gradient());
  return rows;
}

// Two latents per row: one exact draw of each row's (z1, z2), an N x 2 matrix (NaN where
// the row's density is not finite).
template <typename TE, typename TL, typename TL2, typename TP, typename TC, typename TX,
          typename TW, typename RNG>
Eigen::MatrixXd cf_integrated2_rng(const std::vector<std::vector<int>>& y, const TE& eta,
                                   const TL& load, const TL2& load2,
                                   const std::vector<int>& family, const TP& phi,
                                   const TC& cuts, const std::vector<int>& cut_start,
                                   const std::vector<int>& cut_len, const TX& gh_x,
                                   const TW& gh_logw, int newton_steps, RNG& base_rng__,
                                   std::ostream* pstream__) {
  counterfair_integrated::StanCall call("cf_integrated2_rng", y, eta, load, family, phi, cuts,
                                        cut_start, cut_len, gh_x, gh_logw, newton_steps);
  call.second("cf_integrated2_rng", load2);
  const std::size_t N = y.size();
  Eigen::MatrixXd out(N, 2);
  counterfair_integrated::Row2 row;
  auto uniform = [&base_rng__]() { return stan::math::uniform_rng(0.0, 1.0, base_rng__); };
  double z[2];
  for (std::size_t i = 0; i < N; ++i) {
    counterfair_integrated::fill_row2(row, i, call.in);
    counterfair_integrated::draw_row2(row, newton_steps, uniform, z);
    out(i, 0) = z[0];
    out(i, 1) = z[1];
  }
  return out;
}

#endif  // COUNTERFAIR_INTEGRATED_HPP
