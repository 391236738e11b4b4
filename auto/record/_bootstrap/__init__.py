"""Holds the ``sitecustomize.py`` that ``auto record`` puts on a child's ``PYTHONPATH``."""
