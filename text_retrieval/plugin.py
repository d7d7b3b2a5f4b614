"""The text front end's registration with the core (entry point ``clipmag.plugins: text``): its
trainer, the evaluations a sweep can attach to its cells and its packaged configs. Names only; nothing
heavy is imported."""

from __future__ import annotations

from clipmag.registry.config_packages import register_config_package
from clipmag.registry.evaluations import register_evaluation
from clipmag.registry.front_ends import register_front_end

RAG_METRICS = ("accuracy@1", "accuracy@5", "accuracy@20", "accuracy@100", "EM", "F1", "contains")
RETRIEVAL_METRICS = ("NDCG@10", "Recall@100")
PREDICTOR_METRICS = ("kappa_query", "kappa_document", "dcv")
START_METRICS = ("cohens_d", "query_norm_cv", "document_norm_cv", "kappa_query", "kappa_document", "log_kappa_ratio")


def register() -> None:
    register_front_end("text", "text_retrieval.cli")
    register_config_package("text_retrieval")  # configs/text, configs/rag, configs/eval
    register_evaluation("rag", "text_retrieval.rag.cli", front_ends=("text",), metrics=RAG_METRICS)
    register_evaluation("predict", "text_retrieval.predict.evaluation", front_ends=("text",), metrics=PREDICTOR_METRICS)
    register_evaluation(
        "retrieval",
        "text_retrieval.evaluation.sweep_evaluation",
        front_ends=("text",),
        metrics=RETRIEVAL_METRICS,
        precision_key="precision",
    )
    register_evaluation(
        "start-diagnostics",
        "text_retrieval.predict.start_diagnostics",
        front_ends=("text",),
        metrics=START_METRICS,
        precision_key="precision",
    )
