"""Learning: the counterfactually fair learner (Kusner et al. 2017, Algorithm 1), path
features, the multi-world learner, the baselines a sceptic would run, and reweighing and
undersampling of the training rows (:mod:`counterfair.learn.reweighing`)."""
