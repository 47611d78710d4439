// counterfair's native library: quadrature.hpp's log marginals for Python (ctypes).
//
// Built and loaded by counterfair/stan/native.py with the C++ compiler CmdStan uses; the
// fit programs include the same quadrature.hpp (through integrated.hpp), so leave-one-out
// and the fit's node check compute exactly what the fit's log density computes.
#define COUNTERFAIR_STANDALONE
#include "quadrature.hpp"

#include <cstdint>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

namespace {

struct Sets {
  std::size_t S, N, C, n_cuts;
  const int* y;             // N x C, column-major (shared by the sets)
  const double* eta;        // S x (N x C column-major)
  const double* load;       // S x C, or S x (N x C column-major) when load_per_row
  int load_per_row;
  const int* family;        // C
  const double* phi;        // S x C
  const double* cuts;       // S x n_cuts
  const int* cut_start;     // C
  const int* cut_len;       // C
  std::size_t J;
  const double* gh_x;
  const double* gh_logw;
  int steps;
  double* out;              // S x N
};

void run_sets(const Sets& a, std::size_t first, std::size_t last) {
  counterfair_integrated::Inputs in;
  in.N = a.N;
  in.C = a.C;
  in.y = a.y;
  in.load_per_row = a.load_per_row != 0;
  in.family = a.family;
  in.cut_start = a.cut_start;
  in.cut_len = a.cut_len;
  in.gh_x = a.gh_x;
  in.gh_logw = a.gh_logw;
  in.J = a.J;
  in.steps = a.steps;
  const std::size_t cells = a.N * a.C;
  for (std::size_t s = first; s < last; ++s) {
    in.eta = a.eta + s * cells;
    in.load = a.load + s * (in.load_per_row ? cells : a.C);
    in.phi = a.phi + s * a.C;
    in.cuts = a.cuts + s * a.n_cuts;
    counterfair_integrated::integrate(in, a.out + s * a.N, counterfair_integrated::Gradient());
  }
}

}  // namespace

extern "C" {

// Each row's log marginal (with every constant) for S parameter sets, on `threads`
// threads (each set on one thread: the values do not depend on their number). Returns 0,
// or 1 with the reason in `error` (at most `error_size` bytes).
int cf_log_marginal_rows(std::size_t S, std::size_t N, std::size_t C, std::size_t n_cuts,
                         const int* y, const double* eta, const double* load, int load_per_row,
                         const int* family, const double* phi, const double* cuts,
                         const int* cut_start, const int* cut_len, std::size_t J,
                         const double* gh_x, const double* gh_logw, int steps, int threads,
                         double* out, char* error, std::size_t error_size) {
  Sets a{S, N, C, n_cuts, y, eta, load, load_per_row, family, phi, cuts,
         cut_start, cut_len, J, gh_x, gh_logw, steps, out};
  try {
    std::size_t n = threads < 1 ? 1 : static_cast<std::size_t>(threads);
    if (n > S) n = S;
    if (n <= 1) {
      run_sets(a, 0, S);
      return 0;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> failed(n);
    for (std::size_t t = 0; t < n; ++t) {
      pool.emplace_back([&, t]() {
        try {
          run_sets(a, S * t / n, S * (t + 1) / n);
        } catch (...) {
          failed[t] = std::current_exception();
        }
      });
    }
    for (auto& thread : pool) thread.join();
    for (auto& f : failed) {
      if (f) std::rethrow_exception(f);
    }
    return 0;
  } catch (const std::exception& e) {
    if (error_size > 0) {
      std::strncpy(error, e.what(), error_size - 1);
      error[error_size - 1] = '\0';
    }
    return 1;
  }
}

}  // extern "C"
