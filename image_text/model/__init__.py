"""The model: the ``model`` section (``config``), the open_clip towers built from it (``architecture``,
``towers`` for a tower from another model and locked towers, ``attention`` for the kernel a tower
trains with), the towers with their head and loss (``clip_model``), and the model's files: weights
(``weights``), export with its card (``export``, ``card``) and loading back (``loading``,
``random_init_notice``)."""
