"""Distilled specialists: the featurizer both sides compute (:mod:`~auto.models.specialist.features`)
and model training and selection (:mod:`~auto.models.specialist.train`)."""
