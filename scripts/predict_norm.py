"""Predict whether qnorm or dnorm suits a pretrained encoder, before fine-tuning.

    python scripts/predict_norm.py --model all-MiniLM-L6-v2 --data bundled --output runs/predict.json

Two predictors: the paper's query-norm CV ratio (measured after a short probe) and our
log-magnitude Fisher condition number; ``text_retrieval/predict/predictors.py`` defines both and
``text_retrieval/predict/cli.py`` holds this command line.
"""

from text_retrieval.predict.cli import entry

if __name__ == "__main__":
    entry()
