"""The seed papers' experiments as functions: train, measure through geomlens, compare with theory.

- :mod:`geomlens.experiments.tradeoff`: any network's empirical (p_S, p_I) from its embeddings of
  labelled images and a class distance, placed on the universal front.
- :mod:`geomlens.experiments.digits`: the CNN trade-off experiment on scikit-learn's digits.
- :mod:`geomlens.experiments.run_folder` and :mod:`geomlens.experiments.checkpoint_steps`: the
  checkpoint folder a training experiment writes and the steps it keeps (what ``gl.series``
  reads and thins).
"""
