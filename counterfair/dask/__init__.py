"""The same row-wise calls on Dask collections, partition by partition.

Importing this package registers its handlers with :mod:`counterfair.rows.dispatch`;
the dispatcher imports it on its own when it first meets a Dask collection.
"""

from counterfair.dask import group_audits, measures, row_calls
from counterfair.dask.partitions import WORKER_CONFIG, WORKER_ENV

__all__ = ["WORKER_CONFIG", "WORKER_ENV", "group_audits", "measures", "row_calls"]
