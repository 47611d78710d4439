"""Stan text of bending terms that is not a declaration: the functions the fit program
needs (HSGP spectral densities per curve, the sum-to-zero basis of group effects) and
the spectral density of a one-curve HSGP written inline."""

from __future__ import annotations

from counterfair.model.terms.declare import Smooth


def dims_suffix(term: Smooth) -> str:
    return "" if term.dims == 1 else "_2d"


def spd_expression(term: Smooth, stem: str) -> str:
    """Stan expression of the square root of the spectral density at the basis frequencies.

    A ``(k x curves)`` matrix when ``by`` is given, else a vector (``k``, or ``k * k``
    for a surface, whose ``omega`` holds the lengths of the frequency vectors).
    """
    omega = f"omega_{stem}"
    sd, ls = f"sdgp_{stem}", f"lsgp_{stem}"
    if term.by is None:
        sd, ls = f"{sd}[1]", f"{ls}[1]"
        if term.kernel == "exp_quad":
            scale = f"sqrt(sqrt(2 * pi()) * {ls})" if term.dims == 1 else f"sqrt(2 * pi()) * {ls}"
            return f"{sd} * {scale} * exp(-0.25 * square({ls}) * square({omega}))"
        if term.dims == 1:
            return (
                f"{sd} * 2 * (sqrt(3) / {ls})^1.5 * inv(square(sqrt(3) / {ls}) + square({omega}))"
            )
        return (
            f"{sd} * sqrt(6 * pi()) * (sqrt(3) / {ls})^1.5 * "
            f"pow(square(sqrt(3) / {ls}) + square({omega}), -1.25)"
        )
    # one curve per level: the spd of level l in column l
    return f"hsgp_spd_{term.kernel}{dims_suffix(term)}({omega}, {sd}, {ls})"


SUM_TO_ZERO_FUNCTION = """\
  // orthonormal basis (Helmert) of the vectors of length n that sum to zero: n x (n - 1)
  matrix sum_to_zero_basis(int n) {
    matrix[n, n - 1] q = rep_matrix(0, n, n - 1);
    for (j in 1:(n - 1)) {
      q[1:j, j] = rep_vector(inv_sqrt(j * (j + 1.0)), j);
      q[j + 1, j] = -j * inv_sqrt(j * (j + 1.0));
    }
    return q;
  }"""
"""Stan function of group effects: they sum to zero over the training groups, so that the
node's intercept (and each population slope) is not traded against the groups' mean."""

HSGP_FUNCTIONS = {
    "exp_quad": """\
  // square root of the exp-quad spectral density at frequencies omega, one column per curve
  matrix hsgp_spd_exp_quad(vector omega, vector sd, vector ls) {
    matrix[rows(omega), rows(sd)] out;
    for (l in 1:rows(sd)) {
      out[:, l] = sd[l] * sqrt(sqrt(2 * pi()) * ls[l]) * exp(-0.25 * square(ls[l]) * square(omega));
    }
    return out;
  }""",
    "matern32": """\
  // square root of the Matern 3/2 spectral density at frequencies omega, one column per curve
  matrix hsgp_spd_matern32(vector omega, vector sd, vector ls) {
    matrix[rows(omega), rows(sd)] out;
    for (l in 1:rows(sd)) {
      out[:, l] = sd[l] * 2 * (sqrt(3) / ls[l])^1.5 * inv(square(sqrt(3) / ls[l]) + square(omega));
    }
    return out;
  }""",
    "exp_quad_2d": """\
  // square root of the 2-D exp-quad spectral density at frequency lengths omega, per curve
  matrix hsgp_spd_exp_quad_2d(vector omega, vector sd, vector ls) {
    matrix[rows(omega), rows(sd)] out;
    for (l in 1:rows(sd)) {
      out[:, l] = sd[l] * sqrt(2 * pi()) * ls[l] * exp(-0.25 * square(ls[l]) * square(omega));
    }
    return out;
  }""",
    "matern32_2d": """\
  // square root of the 2-D Matern 3/2 spectral density at frequency lengths omega, per curve
  matrix hsgp_spd_matern32_2d(vector omega, vector sd, vector ls) {
    matrix[rows(omega), rows(sd)] out;
    for (l in 1:rows(sd)) {
      out[:, l] = sd[l] * sqrt(6 * pi()) * (sqrt(3) / ls[l])^1.5
                  * pow(square(sqrt(3) / ls[l]) + square(omega), -1.25);
    }
    return out;
  }""",
}
"""Stan functions of HSGP terms with one curve per level (``by=``, or a categorical node's
predictors), by kernel (``_2d``: a surface of two parents)."""
