"""Models behind one Adapter protocol: loading (:mod:`~geomlens.models.attach`, ``gl.load`` and
``gl.attach``; :mod:`~geomlens.models.embedded_lms`), the backends
(:mod:`~geomlens.models.transformer_lens`, :mod:`~geomlens.models.nnsight`,
:mod:`~geomlens.models.recorded`), the protocol itself (:mod:`~geomlens.models.adapter`), where
each site lives (:mod:`~geomlens.models.architectures`, :mod:`~geomlens.models.module_sites`, :mod:`~geomlens.models.multimodal`) and what a config says
(:mod:`~geomlens.models.config_fields`, :mod:`~geomlens.models.widths`,
:mod:`~geomlens.models.fingerprint`). The site names themselves are
:mod:`geomlens.hooks.sites`."""
