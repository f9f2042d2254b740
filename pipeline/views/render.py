"""Gate results and rollout states as text for people (the terminal view is pipeline/views/terminal.py)."""

from __future__ import annotations

from typing import Any

from pipeline.common.tables import rows_as


def state_text(view: Any) -> str:
    """`pipeline state`: a rollout.StateView as a headline, the policy, a table of segments and a key."""
    from pipeline.rollout.state import RELEASE

    d = view.to_dict()
    p = view.config.rollout
    if not view.states:
        return (f"release {view.release}: no stored evaluation yet (pipeline gate --release {view.release}; "
                "--dry-run evaluations are not stored)")
    columns = ["segment", "state", "since", "last look", "looks", "route", "why"]
    rows = [(r["segment"], r["state"] + (" (held)" if r["held"] else ""), r["since"] or "", r["last_day"] or "",
             r["recent"], r["route"] or (f"override: {r['override']['action']}" if r["override"] else ""),
             (r["route_reason"] if r["segment"] != RELEASE else
              (f"override: {r['override']['text']}; " if r["override"] else "") + r["reason"])
             + (f"; held: {r['held']}" if r["held"] else "")) for r in d["segments"]]
    windows = "; ".join(f"{w.kind} window {w.name}" for w in p.windows)
    acts = [f"  {a['taken_at']} {a['action']} {a['segment'] if a['segment'] != '*' else 'the whole release'} by "
            f"{a['actor']}: {a['reason']}" + (f" (until {a['until']})" if a["until"] else "")
            + f" [was: {_was(a['previous'])}]" for a in d["actions"]]
    return "\n".join([
        f"release {view.release}: {d['headline']} ({d['severity']})",
        f"policy: roll back at {p.fail_looks} failing of the last {p.window_looks} looks (one look per as-of "
        f"day); recover after {p.min_dwell_days} days without a failure, then {p.recover_looks} passing looks"
        + (f"; {windows} (rollbacks never wait)" if windows else ""),
        rows_as("table", columns, rows),
        "looks: the last decisive looks, oldest first (F fail, P pass); `why` of a route quotes its state; "
        "\"override:\" is a person's action, not the gate's view",
        *(["actions (oldest first):", *acts] if acts else []),
        *[published_text(p) for p in d["published"]],
        *([intraday_text(d["intraday"])] if d["intraday"] else [])])


def last_published(con: Any, release: str) -> list[dict[str, Any]]:
    """Per publish target, the release's last publish attempt (delivery/publish.py records them), times in UTC."""
    from datetime import datetime

    from pipeline.warehouse import sqlfiles

    cur = sqlfiles.run(con, "publish/latest", {"release": release})
    names = [d[0] for d in cur.description]
    return [{k: v.strftime("%Y-%m-%dT%H:%M:%SZ") if isinstance(v, datetime) else v
             for k, v in zip(names, r, strict=True)} for r in cur.fetchall()]


def intraday_latency(con: Any, release: str) -> dict[str, Any] | None:
    """The release's newest intra-day look that moved a rollout state (docs/intraday.md): when it looked, what
    it moved, when the oldest file it read had landed, when its route was published, and the minutes between."""
    from pipeline.warehouse import sqlfiles

    row = sqlfiles.run(con, "rollout/intraday_latency", {"release": release}).fetchone()
    if row is None:
        return None
    looked, moved, landed, published = row
    minutes = round((published - landed).total_seconds() / 60, 1) if landed and published else None
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    return {"looked_at": looked.strftime(stamp), "moved": list(moved),
            "landed_from": landed.strftime(stamp) if landed else None,
            "published_at": published.strftime(stamp) if published else None, "landing_to_route_minutes": minutes}


def intraday_text(i: dict[str, Any]) -> str:
    """`pipeline state`'s line on the newest intra-day look that moved a state."""
    text = f"intra-day look at {i['looked_at']} moved {len(i['moved'])} segments"
    if i["published_at"] is None:
        return text + "; its route is not published (no publish target, or the publish failed)"
    text += f"; route published at {i['published_at']}"
    if i["landed_from"] is not None:
        text += (f", {i['landing_to_route_minutes']:g} min after the oldest file it read had landed "
                 f"({i['landed_from']})")
    return text


def published_text(p: dict[str, Any]) -> str:
    """One publish target's last attempt (delivery/publish.last_published, as state --json has it)."""
    from pipeline.common.units import seconds_text

    if p["status"] == "failed":
        last = f"; last published {p['last_published_at']}" if p["last_published_at"] else "; never published"
        return f"routing NOT published to {p['target']} at {p['published_at']}: {p['error']}{last}"
    what = "" if p["kind"] == "decision" else f" ({p['kind']})"
    return (f"routing published to {p['target']}{what} at {p['published_at']}, {seconds_text(p['seconds'])} after "
            f"the decision (version {p['version_id']})")


def _was(previous: dict[str, Any]) -> str:
    """An action's scope before it, e.g. "ok/edge" or "3 segments: 2 ok/edge, 1 rolled_back/cloud"."""
    seen: dict[str, int] = {}
    for p in previous.values():
        key = p["state"] + (f"/{p['route']}" if p["route"] else "")  # the release's own entry has no route
        seen[key] = seen.get(key, 0) + 1
    if len(previous) == 1:
        return next(iter(seen))
    return f"{len(previous)} segments: " + ", ".join(f"{n} {k}" for k, n in sorted(seen.items()))
