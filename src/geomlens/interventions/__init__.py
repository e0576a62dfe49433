"""Edited forward passes: local linearisation of MLP nonlinearities
(:mod:`~geomlens.interventions.linearize`) or of any module
(:mod:`~geomlens.interventions.module_linearize`), and a pass resumed from layer L
(:mod:`~geomlens.interventions.resume`)."""
