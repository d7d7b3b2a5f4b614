"""A start's magnitude diagnostics before fine-tuning, per test set: norm statistics of each side,
Cohen's d of document norms and the Fisher predictor.

    python scripts/start_diagnostics.py --model splade-tiny --data bundled:indomain --output runs/starts/splade

``text_retrieval/predict/start_diagnostics.py`` holds this command line.
"""

from text_retrieval.predict.start_diagnostics import entry

if __name__ == "__main__":
    entry()
