"""Quality evidence: lm-eval task scores, fidelity against the baseline, and verdicts."""
