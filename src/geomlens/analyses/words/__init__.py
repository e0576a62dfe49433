"""How a number becomes words: the guards a metric spec names (``guards``, ``scale_guards``),
a metric's words and unit read from the declarations (``metric_words``), and the phrases the
analyses' readings share (``reading_words``). Nothing here imports torch: the declarations'
metric specs import it."""
