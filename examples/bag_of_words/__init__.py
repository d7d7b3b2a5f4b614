"""A complete toy front end, the worked example of docs/architecture.md: two bag-of-words towers
(hashed words, no tokenizer, no download) trained on the core's loop to match the first line of a
standard-library function's docstring to the function's name and parameters."""
