"""Inference: fitting an SCM by NUTS or Pathfinder, the fitted ``Fit``, abduction of
latents (exact and MCMC), diagnostics, posterior predictive checks and LOO."""
