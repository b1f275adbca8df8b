"""One candidate and its evaluation, below the search that proposes candidates and the decision that ranks them.

- `candidate.py`: one candidate configuration and the typed result of evaluating it;
- `evaluator.py`: a candidate's whole evaluation, cheapest first (runnable, memory, speed and cost, then quality);
- `performance.py`: the speed half (does it run, fit, how fast, what it costs), computed once per candidate.
- `refusal.py`: `Refused`, raised where a candidate cannot run or fit, made its pruned result once.

The rule that skips quality where it cannot decide is the decision's, injected by the study (`skip_quality`).
"""
