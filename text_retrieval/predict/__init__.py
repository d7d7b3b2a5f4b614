"""The qnorm/dnorm predictors (Fisher condition, query-norm probe), their CLI and sweep evaluation."""
