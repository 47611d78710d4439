"""Files: the SCM file and its schema, folders of fitted models and learners written
without pickle, and loading any of them back."""
