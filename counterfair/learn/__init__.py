"""Learning: the counterfactually fair learner (Kusner et al. 2017, Algorithm 1), path
features, the multi-world learner and the baselines a sceptic would run."""
