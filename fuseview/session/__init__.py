"""The Qt-free application model: Session (open model, navigation, scan, decisions, fused result, reports,
pane overlays), plain events, the one job service, and typed reports. The window's views draw from it."""

from fuseview.errors import Cancelled
from fuseview.graph.groups import EXPANSION_MODES, Expansion, collapsed_expansion, expansion_for
from fuseview.session.decisions import ACCEPTED, APPLIED, PENDING, REJECTED, STATUSES, Decisions
from fuseview.session.events import EmitterGroup, Event, EventEmitter
from fuseview.session.jobs import JobHandle, JobService, Progress
from fuseview.session.links import Links, adopt_origin_scopes, link_graphs
from fuseview.session.panes import Marks, PaneState, candidate_marks, nodes_between
from fuseview.session.session import FUSED, ORIGINAL, FusedResult, Laid, NavEntry, Session

__all__ = [
    "ACCEPTED", "APPLIED", "EXPANSION_MODES", "FUSED", "ORIGINAL", "PENDING", "REJECTED", "STATUSES",
    "Cancelled", "Decisions", "EmitterGroup", "Event", "EventEmitter", "Expansion", "FusedResult",
    "JobHandle", "JobService", "Laid", "Links", "Marks", "NavEntry", "PaneState", "Progress", "Session",
    "adopt_origin_scopes", "candidate_marks", "collapsed_expansion", "expansion_for", "link_graphs",
    "nodes_between",
]
