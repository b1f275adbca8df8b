"""Acceptance of speculative methods per scheme, measured once and kept like quality results.

The greedy continuations depend on the model, the scheme (and KV dtype), the documents and the compute
dtype, not on the GPU or the batch, so they are generated once per scheme and cached on disk under the
quality cache (content-keyed like quality: weights fingerprint, scheme identity, task data fingerprint,
settings); each speculative method is then a replay over them (``ngram.py``), milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from recommender.errors import BadInputError
from recommender.perf.sim.speculative import SpeculativeDecoding
from recommender.quality.cache import QualityCache, cache_key
from recommender.quality.calibration_docs import document_text
from recommender.quality.lm_eval_runner import describe_task
from recommender.speculation.acceptance import AcceptanceRate, greedy_continuations, rate_of
from recommender.speculation.methods import parse_speculative
from recommender.speculation.ngram import replay

if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager

    from recommender.quality.suite import UseCase
    from recommender.quantize import QuantScheme
    from recommender.quantize.model_cache import ModelCache
    from recommender.speculation.settings import SpeculationSettings

__all__ = ["AcceptanceEvaluator"]

FIELD = "speculation.task"
#: Changes whenever the generation or the replay changes, so cached continuations are not reused across it.
ALGORITHM = "greedy-continuations-v1"


@dataclass
class AcceptanceEvaluator:
    """What each speculative method accepts on the use case's documents, per scheme (`SpeculationSource`)."""

    use_case: UseCase
    models: ModelCache
    settings: SpeculationSettings
    manager: TaskManager
    cache: QualityCache | None = None
    _prompts: list[list[int]] | None = field(default=None, repr=False)
    _generated: dict[str, list[np.ndarray]] = field(default_factory=dict, repr=False)
    _task_fingerprint: str | None = field(default=None, repr=False)
    rates: dict[tuple[str, str], AcceptanceRate] = field(default_factory=dict)

    @property
    def task(self) -> str:
        return self.settings.task or self.use_case.fidelity.text_task or self.use_case.task_names[0]

    def prompts(self) -> list[list[int]]:
        """The first `prompt_tokens` tokens of each of the first `documents` documents of the scored split that
        hold that many (all prompts one length: generated in batches, without padding); shorter documents only
        when too few are that long, cut at their last token but one."""
        if self._prompts is None:
            from lm_eval.tasks import get_task_dict

            task = get_task_dict([self.task], self.manager)[self.task]
            tokenizer, s = self.models.tokenizer, self.settings
            long, short = [], []
            for doc in task.eval_docs:
                ids = tokenizer(document_text(task, doc), add_special_tokens=False)["input_ids"]
                if len(ids) > s.prompt_tokens:
                    long.append(list(ids[: s.prompt_tokens]))
                elif len(ids) >= 8:  # a prompt the proposer can match in (its n-grams are 2-4 tokens)
                    short.append(list(ids[:-1]))
                if len(long) == s.documents:
                    break
            prompts = long if len(long) == s.documents else (long + short)[: s.documents]
            if not prompts:
                raise BadInputError(
                    FIELD,
                    f"task {self.task} has no document of 8 tokens or more to measure speculative acceptance on",
                    "name a task with text documents",
                )
            self._prompts = prompts
        return self._prompts

    def _key(self, method: QuantScheme) -> str:
        if self._task_fingerprint is None:  # reads every document once: once per evaluator, not per scheme
            self._task_fingerprint = describe_task(self.manager, self.task).fingerprint
        dtype = self.models.compute_dtype
        return cache_key(
            model=self.models.source.fingerprint(),
            method=method.identity(),
            algorithm=ALGORITHM,
            settings=self.settings.model_dump(mode="json"),
            task=self._task_fingerprint,
            **({} if dtype == "bfloat16" else {"compute_dtype": dtype}),
        )

    def continuations(self, method: QuantScheme) -> list[np.ndarray]:
        """The model's greedy continuations of every prompt, quantized with `method` (cached on disk)."""
        if method.name in self._generated:
            return self._generated[method.name]
        key = self._key(method)
        stored: dict[str, Any] | None = self.cache.get(key) if self.cache else None
        if stored is not None:
            generated = [np.asarray(g, dtype=np.int64) for g in stored["continuations"]]
        else:
            model, eos = self.models.get(method), self.models.tokenizer.eos_token_id
            generated = greedy_continuations(
                model, self.prompts(), new_tokens=self.settings.new_tokens, eos_token_id=eos
            )
            if self.cache:
                self.cache.put(key, {"continuations": [g.tolist() for g in generated], "task": self.task})
        self._generated[method.name] = generated
        return generated

    def rate(self, method: QuantScheme, speculative: str) -> AcceptanceRate:
        """What `speculative` accepts over `method`'s continuations."""
        if (method.name, speculative) not in self.rates:
            ngram = parse_speculative(speculative)
            assert ngram is not None  # "none" is never measured
            generated = self.continuations(method)
            replays = [replay(np.asarray(p), g, ngram) for p, g in zip(self.prompts(), generated, strict=True)]
            evidence = (
                f"measured on {self.models.device.label}: {method.name}'s greedy continuations "
                f"({self.settings.new_tokens} tokens) of {len(replays)} {self.task} documents"
            )
            self.rates[method.name, speculative] = rate_of(replays, ngram, evidence)
        return self.rates[method.name, speculative]

    def decoding(self, method: QuantScheme, speculative: str) -> SpeculativeDecoding:
        """The simulator's view of `speculative` on `method` (``perf/sim/speculative.py``)."""
        rate = self.rate(method, speculative)
        ngram = parse_speculative(speculative)
        assert ngram is not None
        return SpeculativeDecoding(
            method=speculative,
            num_speculative_tokens=ngram.k,
            tokens_per_step=rate.tokens_per_step,
            drafted_per_step=rate.drafted_per_step,
            evidence=f"{rate.evidence}; {rate.tokens_per_step_low:.2f}-{rate.tokens_per_step_high:.2f} at 95 %",
        )
