"""What touches activations as they pass: the names of the sites where they are read
(:mod:`~geomlens.hooks.sites`), TransformerLens hook points added for one block and
removed exactly on exit (:mod:`~geomlens.hooks.hook_points`), and the watch for NaN / Inf in
captured activations (:mod:`~geomlens.hooks.finite_check`)."""
