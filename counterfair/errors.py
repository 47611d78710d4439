"""Exception types and error texts shared by the package and its tests.

Every message names the node, column or value at fault, so that a user can fix
the model or the data without reading counterfair's source.
"""

from __future__ import annotations


class SCMError(ValueError):
    """The causal graph or a node spec is invalid."""


class DataError(ValueError):
    """A data frame does not fit the SCM (missing column, bad values, unseen level)."""


class TargetError(FileExistsError, DataError):
    """An output folder cannot be written: the path is a file, or a non-empty folder and
    ``overwrite`` is false (:func:`counterfair.io.fit_folder.check_target`)."""


TARGET_NOT_A_FOLDER = "{label}{path!s} exists and is not a folder; give a folder path"
"""Error when an output folder's path is a file."""

TARGET_NOT_EMPTY = (
    "{label}{path!s} exists and is not empty; choose a new folder or pass overwrite=True "
    "to replace it"
)
"""Error when an output folder exists, holds files and ``overwrite`` is false."""


class FairnessError(ValueError):
    """A predictor would use a descendant of a protected attribute."""


class ConvergenceWarning(UserWarning):
    """MCMC diagnostics (R-hat, ESS, divergences) suggest the fit is not reliable."""


class ScaleWarning(UserWarning):
    """A node's scale makes counterfair's unit-scale default priors informative.

    Raised once per fit and offending node by :mod:`counterfair.inference.scales`; the
    message names the node, its observed mean and sd, the prior concerned and
    the fix (standardise the column, or give the spec explicit priors).
    """


class LOOWarning(UserWarning):
    """PSIS-LOO is unreliable for some rows (Pareto k > 0.7); the message names them."""


class RangeWarning(UserWarning):
    """Rows whose parent lies outside a smooth term's training range: the bending part is
    held at its boundary value there, and only the parent's straight line extrapolates."""


class IdentificationWarning(UserWarning):
    """A latent of the SCM is not identified, or only weakly (:meth:`SCM.identification`)."""


class InvarianceWarning(UserWarning):
    """Every indicator of a latent measures it with a loading that differs by a protected
    attribute (``loading_by=``): a fair learner that reads the latent cannot be
    counterfactually fair as a function of the observables
    (:class:`~counterfair.FairLearner`, ``invariant_only``)."""


# graph and specs
NOT_A_DIGRAPH = "an SCM is declared on a networkx.DiGraph, got {type}"
EMPTY_GRAPH = "the causal graph has no nodes"
CYCLE = "the causal graph has a cycle: {cycle}; a structural causal model must be acyclic"
MISSING_SPEC = "node {node!r} has no spec; give it one, e.g. g.add_node({node!r}, spec=cf.Normal())"
UNKNOWN_SPEC = (
    "node {node!r} has spec {spec!r}, which is not a counterfair spec "
    "(Protected, Latent, or an observed family registered in counterfair.model.families, "
    "such as Normal, Poisson or Bernoulli)"
)
DISCRETE_SPEC_IN_STAN_SCM = (
    "node {node!r} has spec {kind}, a finite discrete spec with given probabilities, which "
    "cannot be compiled to Stan or fitted; declare the model with cf.DiscreteSCM(graph) and "
    "use its query() for exact interventional and counterfactual distributions"
)
NOT_FINITE_FOR_QUERY = (
    "SCM.query enumerates finite discrete SCMs only; node {node!r} has spec {kind}, which "
    "is not finite with given probabilities (its distribution has parameters to fit); "
    "declare DiscreteNoise/Deterministic nodes in a cf.DiscreteSCM to query exactly, or "
    "fit this SCM and use Fit.interventional / Fit.counterfactual"
)
PROTECTED_WITH_PARENT = (
    "protected node {node!r} has parent(s) {parents}; protected attributes must be roots"
)
LATENT_WITH_PARENT = (
    "latent node {node!r} has parent(s) {parents}; latent exogenous variables must be roots"
)
NO_PROTECTED = "the SCM has no Protected node; counterfactual fairness needs at least one"
BAD_NODE_NAME = (
    "node name {node!r} cannot be used in a Stan program: use letters, digits and single "
    "underscores, starting with a letter (and not a Stan keyword)"
)
NAME_CLASH = "nodes {first!r} and {second!r} give the same Stan identifier {name!r}"
LATENT_WITHOUT_CHILD = "latent node {node!r} has no children; it would not be identified"
NO_SIGN_CHILD = (
    "latent node {latent!r} has only Categorical children, whose loadings are vectors; give "
    "it a child of another family, whose loading fixes the latent's sign"
)
BAD_CODING = "coding must be 'reference' or 'onehot', got {coding!r}"

# data
NOT_A_DATAFRAME = "data must be a pandas DataFrame, got {type}"
EMPTY_DATA = "data has no rows"
MISSING_COLUMN = "data has no column {column!r} (node {column!r} of the SCM); columns: {columns}"
NAN_COLUMNS = (
    "missing (NaN) values in {n} column(s): {columns}; {complete:,} of {rows:,} rows are "
    "complete"
)
NAN_HINT = (
    ". Fit on the complete rows with missing='drop' (SCM.fit), treat the values as missing "
    "at random with missing='model', or fill the values first"
)
NAN_HINT_CLI = (
    ". Fit on the complete rows with --missing drop (counterfair fit), treat the values as "
    "missing at random with --missing model, or fill the values first"
)
NOT_NUMERIC = "column {column!r} (node {node!r}, {family}) must be numeric, got dtype {dtype}"
NOT_FINITE = "column {column!r} has non-finite value {value!r} at row {row!r}"
POISSON_NOT_COUNT = (
    "column {column!r} is a Poisson node and needs non-negative integer counts; "
    "value {value!r} at row {row!r} is not (round it first, e.g. df[{column!r}].round())"
)
BERNOULLI_NOT_BINARY = (
    "column {column!r} is a Bernoulli node and needs values 0 or 1; "
    "value {value!r} at row {row!r} is not"
)
UNSEEN_LEVEL = (
    "protected attribute {node!r} has level {value!r} (row {row!r}) that was not seen "
    "at fit time; known levels: {levels}"
)
UNSEEN_INPUT_LEVEL = (
    "column {node!r} has level {value!r} (row {row!r}) that the baseline did not see when "
    "it was fitted; known levels: {levels}"
)
UNKNOWN_DO_NODE = (
    "do() names {node!r}, which is not a protected or observed node of the SCM; "
    "protected: {protected}, observed: {observed}"
)
LATENT_DO = (
    "do() names {node!r}, a latent node: latents are abducted from each row, not set; "
    "intervene on an observed or protected node instead"
)
DO_LENGTH = "do({node}=...) has {got} values for {expected} rows"
UNKNOWN_NODE = "{node!r} is not a node of the SCM; nodes: {nodes}"


class BackendUnavailableError(RuntimeError):
    """No Stan back end can run here; the message lists what is missing and how to get it."""


class NativeBuildError(RuntimeError):
    """counterfair's quadrature library cannot be built here: no C++ compiler, or it failed
    (the message says which, with the compiler's own words)."""


# ---------------------------------------------------------------------- decomposition
# Refusals of counterfair.audit.decompose that the SCM and the levels decide; the command
# line (``counterfair decompose``) makes them before it loads a fit.
SAME_LEVELS = (
    "x0 and x1 are both {level!r}: a disparity compares two different levels of {attribute!r}"
)
NOT_PROTECTED = (
    "attribute {attribute!r} is not a protected attribute of the SCM{role}; the "
    "decomposition splits the gap between two levels of one; protected: {protected}"
)
CONTINUOUS_ATTRIBUTE = (
    "attribute {attribute!r} is continuous: the decomposition compares two levels of a "
    "categorical protected attribute; declare it with levels (bin it) to decompose a gap"
)
UNKNOWN_LEVEL = (
    "{name}={value!r} is not a level of {attribute!r}; its levels (fixed at fit time) are "
    "{levels}"
)
NOT_AN_OUTCOME = (
    "outcome={outcome!r} is {what}; the outcome is an observed node of the SCM: "
    "{observed}"
)
BAD_ALLOW = "allow= names {effect!r}, which is not an effect; effects: {effects}"
UNKNOWN_ROLE_NODE = "{option} names {node!r}, which is not a node of the SCM; nodes: {nodes}"
