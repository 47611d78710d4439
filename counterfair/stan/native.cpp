// counterfair's native library: quadrature.hpp's log marginals and exact draws for Python
// (ctypes).
//
// Built when the package is installed (setup.py: the extension counterfair.stan._native),
// or by counterfair/stan/native.py at run time when that build is missing or stale, and
// loaded by native.py through ctypes. The fit programs include the same quadrature.hpp
// (through integrated.hpp), so leave-one-out and the fit's node check compute exactly
// what the fit's log density computes, and exact abduction draws new rows' latents as
// the fit draws the training rows'.
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
  double* out;              // S x N (log marginals), or D x S x N (draws)
  std::size_t D = 0;        // draws per set and row (draws only)
  const std::uint64_t* keys = nullptr;  // D x S x N: each draw's random stream
};

// Uniform(0, 1) values (open at both ends) of splitmix64's stream from one key.
struct SplitMix {
  std::uint64_t state;
  double operator()() {
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (static_cast<double>(z >> 11) + 0.5) * 0x1.0p-53;
  }
};

counterfair_integrated::Inputs inputs_of(const Sets& a) {
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
  return in;
}

void set_of(const Sets& a, std::size_t s, counterfair_integrated::Inputs& in) {
  const std::size_t cells = a.N * a.C;
  in.eta = a.eta + s * cells;
  in.load = a.load + s * (in.load_per_row ? cells : a.C);
  in.phi = a.phi + s * a.C;
  in.cuts = a.cuts + s * a.n_cuts;
}

void marginal_sets(const Sets& a, std::size_t first, std::size_t last) {
  counterfair_integrated::Inputs in = inputs_of(a);
  for (std::size_t s = first; s < last; ++s) {
    set_of(a, s, in);
    counterfair_integrated::integrate(in, a.out + s * a.N, counterfair_integrated::Gradient());
  }
}

void draw_sets(const Sets& a, std::size_t first, std::size_t last) {
  counterfair_integrated::Inputs in = inputs_of(a);
  counterfair_integrated::Row row;
  for (std::size_t s = first; s < last; ++s) {
    set_of(a, s, in);
    for (std::size_t i = 0; i < a.N; ++i) {
      counterfair_integrated::fill_row(row, i, in, false);
      const counterfair_integrated::Hull hull = counterfair_integrated::hull_of(row, a.steps);
      for (std::size_t d = 0; d < a.D; ++d) {
        const std::size_t at = (d * a.S + s) * a.N + i;
        SplitMix uniform{a.keys[at]};
        a.out[at] = counterfair_integrated::draw_from(row, hull, uniform);
      }
    }
  }
}

// Runs `work` over the sets on up to `threads` threads (each set on one thread: the
// values do not depend on their number); 0, or 1 with the reason in `error`.
template <typename Work>
int on_threads(const Sets& a, Work work, int threads, char* error, std::size_t error_size) {
  const std::size_t S = a.S;
  try {
    std::size_t n = threads < 1 ? 1 : static_cast<std::size_t>(threads);
    if (n > S) n = S;
    if (n <= 1) {
      work(a, 0, S);
      return 0;
    }
    std::vector<std::thread> pool;
    std::vector<std::exception_ptr> failed(n);
    try {
      for (std::size_t t = 0; t < n; ++t) {
        pool.emplace_back([&, t]() {
          try {
            work(a, S * t / n, S * (t + 1) / n);
          } catch (...) {
            failed[t] = std::current_exception();
          }
        });
      }
    } catch (...) {  // a thread that cannot start: wait for those started, then say so
      for (auto& thread : pool) thread.join();
      throw;
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

}  // namespace

#ifndef COUNTERFAIR_NATIVE_DIGEST
#define COUNTERFAIR_NATIVE_DIGEST ""
#endif

extern "C" {

// The sha256 of native.cpp and quadrature.hpp this library was built from
// (counterfair/stan/native_source.py's digest, passed by the build as a macro): how
// native.py tells a current library from a stale one.
const char* cf_native_digest() { return COUNTERFAIR_NATIVE_DIGEST; }

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
  return on_threads(a, marginal_sets, threads, error, error_size);
}

// D exact draws of each row's z for S parameter sets (at least `steps` Newton steps to
// the mode first); draw d of set s and row i from the random stream keys[(d S + s) N + i].
// NaN where a row's density is not finite. Returns 0, or 1 with the reason in `error`.
int cf_draw_rows(std::size_t S, std::size_t N, std::size_t C, std::size_t n_cuts,
                 const int* y, const double* eta, const double* load, int load_per_row,
                 const int* family, const double* phi, const double* cuts,
                 const int* cut_start, const int* cut_len, int steps, std::size_t D,
                 const std::uint64_t* keys, int threads, double* out, char* error,
                 std::size_t error_size) {
  Sets a{S, N, C, n_cuts, y, eta, load, load_per_row, family, phi, cuts,
         cut_start, cut_len, 0, nullptr, nullptr, steps, out, D, keys};
  return on_threads(a, draw_sets, threads, error, error_size);
}

}  // extern "C"
