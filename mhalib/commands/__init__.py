"""Sub-commands of the ``mhalib`` command line (see :mod:`mhalib.cli`)."""
