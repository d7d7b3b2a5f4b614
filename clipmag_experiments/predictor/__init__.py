"""Testing magnitude predictors: the points of stored sweeps (``points``) and whether a diagnostic
measured before fine-tuning predicts the sign of each magnitude head's change against cosine,
leave one start out (``sign_accuracy``)."""
