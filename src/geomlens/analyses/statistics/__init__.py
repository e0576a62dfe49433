"""The statistics more than one analysis computes: the abstraction cosine's draws and
corrections (``alpha_scores``), linear-probe scores (``probe_scores``), the per-concept state
that abstraction, ccgp and linearization-effect fold batches into (``concept_state``), the
refusal of duplicate rows (``duplicates``) and a batch's next-token loss (``next_token``). A
statistic with one user lives in that analysis's folder."""
