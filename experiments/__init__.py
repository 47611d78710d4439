"""The studies of counterfair's documentation, outside the package (the wheel does not
carry them). Each module is a script: ``python experiments/law_school.py --help`` or
``python -m experiments.<study> --help`` from the root of the repository."""
