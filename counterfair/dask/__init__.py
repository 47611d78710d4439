"""The same row-wise calls on Dask collections, partition by partition.

Importing this package registers its handlers with :mod:`counterfair.rows.dispatch`;
the dispatcher imports it on its own when it first meets a Dask collection.
"""

from counterfair.dask import decomposition as decomposition
from counterfair.dask import groups as groups
from counterfair.dask import rows as rows
from counterfair.dask.run import WORKER_CONFIG, WORKER_ENV

__all__ = ["WORKER_CONFIG", "WORKER_ENV", "decomposition", "groups", "rows"]
