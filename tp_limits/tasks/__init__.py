"""Tensor Programs IV's tasks in the package's terms (docs/theory.md §15): Word2Vec (CBOW
with negative sampling) and first-order MAML, each at width n and in its limits.

* :mod:`.corpus`: a wiki dump's text as tokens, a vocabulary, the CBOW example stream;
* :mod:`.analogy`: analogy questions and their 3CosAdd accuracy;
* :mod:`.word2vec`: the CBOW network and its engines.
"""
from .analogy import Questions, analogy_scores
from .corpus import CBOWBatch, CBOWStream, Vocabulary, wiki_tokens
from .word2vec import EmbeddingRun, cbow_network, train_cbow

__all__ = ["Questions", "analogy_scores", "CBOWBatch", "CBOWStream", "Vocabulary",
           "wiki_tokens", "EmbeddingRun", "cbow_network", "train_cbow"]
