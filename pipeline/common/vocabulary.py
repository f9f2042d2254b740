"""The words the outputs use, each defined once: the contract's values, as `StrEnum`s so that JSON, SQL
parameters and comparisons with stored strings carry the plain string. Gate names live in
common/registry.py, the weak-network cut and the other settings in common/config.py."""

from __future__ import annotations

from enum import StrEnum


class Verdict(StrEnum):
    """A release's verdict; a segment's decision is one of them too, never PARTIAL_ROLLBACK."""

    KEEP_EDGE = "keep_edge"
    PARTIAL_ROLLBACK = "partial_rollback"
    ROLLBACK_TO_CLOUD = "rollback_to_cloud"
    INSUFFICIENT_DATA = "insufficient_data"


class Status(StrEnum):
    """A gate check's status."""

    PASS = "pass"
    FAIL = "fail"
    INSUFFICIENT_DATA = Verdict.INSUFFICIENT_DATA.value
    NOT_APPLICABLE = "not_applicable"


class Route(StrEnum):
    """Where a request is served (the routing table's values)."""

    EDGE = "edge"
    EDGE_WITH_CLOUD_CHECK = "edge_with_cloud_check"
    CLOUD = "cloud"


class RouteCause(StrEnum):
    """Why a segment has its route (pipeline/rollout/state.py route_for), what every output names beside it."""

    OWN_GATES = "own_gates"  # its own rollout state: ok, suspect, rolled back or recovering
    RELEASE_WIDE = "release_wide"  # a release-wide gate, or every judged segment rolled back
    NOT_JUDGED = "not_judged"  # not enough data yet: routing.insufficient_data_route
    PERSON = "person"  # a person's forced rollback or promote


class Side(StrEnum):
    """The side of a comparison with the cloud baseline: the SQL's `side` column (every non-cloud route is edge)."""

    EDGE = Route.EDGE.value
    CLOUD = Route.CLOUD.value


class Outcome(StrEnum):
    """A rollout look's outcome: what one evaluation says of a segment (pipeline/rollout/state.py)."""

    PASS = Status.PASS.value
    FAIL = Status.FAIL.value
    INSUFFICIENT = "insufficient"


class CellStatus(StrEnum):
    """A routing cell's status (pipeline/gate/cells.py): it leaves its segment's decision only on evidence."""

    PASS = Status.PASS.value
    FAIL = Status.FAIL.value
    INHERIT = "inherit"


class Bucket(StrEnum):
    """A request's network bucket, in reading order (sql/ddl/derived.sql computes it)."""

    NORMAL = "normal"
    WEAK = "weak"
    OFFLINE = "offline"


class Tier(StrEnum):
    """A device tier, lowest first."""

    LOW = "low"
    MID = "mid"
    HIGH = "high"
    FLAGSHIP = "flagship"


class EdgeError(StrEnum):
    """The contract's error codes of a request the edge model served (NETWORK is the cloud's)."""

    OOM = "OOM"
    LMK_KILLED = "LMK_KILLED"
    MODEL_LOAD_FAILED = "MODEL_LOAD_FAILED"
    TIMEOUT = "TIMEOUT"


# a routing-table route, never a row's: the previous release's edge model, kept on the phone as the fallback
# of an over-the-air release (routing.previous_edge, pipeline/rollout/previous.py)
PREVIOUS_EDGE = "previous_edge"

# the contract's device dimensions, in its order: what `pipeline drill --by` splits a segment by
DEVICE_DIMENSIONS: tuple[str, ...] = ("soc", "os_version", "mem_class_gb", "npu_ready", "model_id", "app_version")

# the plain strings, in order, for pyarrow, SQL parameters and choices
ROUTES: tuple[str, ...] = tuple(r.value for r in Route)
BUCKETS: tuple[str, ...] = tuple(b.value for b in Bucket)
TIERS: tuple[str, ...] = tuple(t.value for t in Tier)
EDGE_ERRORS: tuple[str, ...] = tuple(e.value for e in EdgeError)
