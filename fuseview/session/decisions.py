"""The decisions over a scan: a Plan with redo, statuses, conflicts, rule colours, a changed event (no Qt)."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

from fuseview.colors import assign_rule_colors
from fuseview.fusion.plan import ACCEPT, REJECT, Plan
from fuseview.fusion.rule import Candidate, NearMiss
from fuseview.fusion.scan import ScanResult
from fuseview.session.events import EmitterGroup

PENDING, ACCEPTED, REJECTED, APPLIED = "pending", "accepted", "rejected", "applied"
STATUSES = (PENDING, ACCEPTED, REJECTED, APPLIED)


@lru_cache(maxsize=1)
def rule_order() -> tuple[str, ...]:
    """The catalogue's rule names in order: each rule's colour slot (`fuseview.colors.rule_color`)."""
    from fuseview.fusion.rules import catalogue

    return tuple(r.name for r in catalogue())


class Decisions:
    """Accept/reject state of every candidate of one scan, with undo and redo of each step."""

    def __init__(self, scan: ScanResult, model_path: str | None = None):
        self.scan = scan
        self.events = EmitterGroup(self, ("changed",))  # after every step that changed a decision
        self.candidates: list[Candidate] = list(scan.candidates)
        self.by_id = {c.id: c for c in self.candidates}
        self.plan = Plan(self.candidates, model_path)
        self.applied: set[str] = set()
        self.rules = sorted({c.rule for c in self.candidates})
        # chosen as a set: no two rules of a model alike; a rule keeps its own colour when it is free
        self.colors = assign_rule_colors(self.rules, rule_order())
        self.of_node: dict[str, list[str]] = {}
        for c in self.candidates:
            for n in c.nodes:
                self.of_node.setdefault(n, []).append(c.id)
        self.misses_of_node: dict[str, list[NearMiss]] = {}
        for m in scan.near_misses:
            for n in m.nodes:
                self.misses_of_node.setdefault(n, []).append(m)

    # queries ----------------------------------------------------------------------------------------
    def status(self, cid: str) -> str:
        """pending, accepted, rejected or applied (accepted and in the fused model on screen)."""
        d = self.plan.state(cid)
        if d == ACCEPT:
            return APPLIED if cid in self.applied else ACCEPTED
        return REJECTED if d == REJECT else PENDING

    def blocked_by(self, cid: str) -> str | None:
        """The accepted candidate that conflicts with this one (which is not accepted), if any."""
        if self.plan.state(cid) == ACCEPT:
            return None
        return next((o for o in self.by_id[cid].conflicts if self.plan.state(o) == ACCEPT), None)

    def conflict_text(self, cid: str) -> str:
        """What this candidate conflicts with, rule first (a narrow column still names one), or ''.

        'fused_matmul (accepted) at node_Mul_151' when an accepted candidate took its nodes, 'rms_norm at
        node_pow_2' for one conflict, '4: fused_matmul, attention_mha, …' (rules, shortest first) for several;
        the ids and shared nodes are in conflict_tip."""
        c = self.by_id[cid]
        hit = self.blocked_by(cid)
        if hit is not None:
            return self._where(hit, " (accepted)")
        if len(c.conflicts) == 1:
            return self._where(c.conflicts[0])
        if c.conflicts:
            found = {self.by_id[o].rule for o in c.conflicts if o in self.by_id}
            rules = sorted(found, key=lambda r: (len(r), r))
            return f"{len(c.conflicts)}: " + ", ".join(rules)
        return ""

    def conflict_tip(self, cid: str) -> str:
        """Every candidate this one shares nodes with: rule, first node, id, status and the shared nodes."""
        c = self.by_id[cid]
        if not c.conflicts:
            return "no conflicts"
        mine = set(c.nodes)
        lines = [f"{cid} shares nodes with {len(c.conflicts)} candidate(s); accepting one rejects the other:"]
        for o in c.conflicts:
            other = self.by_id.get(o)
            if other is None:
                lines.append(f"• {o}")
                continue
            shared = [n for n in other.nodes if n in mine]
            more = f" +{len(shared) - 3}" if len(shared) > 3 else ""
            lines.append(
                f"• {self._where(o)} ({o}, {self.status(o)}), shared: {', '.join(shared[:3])}{more}"
            )
        return "\n".join(lines)

    def _where(self, cid: str, tag: str = "") -> str:
        c = self.by_id.get(cid)
        return f"{c.rule}{tag} at {c.nodes[0]}" if c is not None and c.nodes else cid + tag

    def counts(self) -> dict[str, int]:
        """Candidates per rule."""
        out: dict[str, int] = {}
        for c in self.candidates:
            out[c.rule] = out.get(c.rule, 0) + 1
        return out

    def accepted(self) -> list[str]:
        """Accepted ids in candidate order."""
        return self.plan.accepted()

    # changes (each one undoable step) -------------------------------------------------------------
    def _step(self, fn: Callable[[], object]) -> bool:
        before = len(self.plan.history)
        fn()
        return self._changed(len(self.plan.history) > before)

    def _changed(self, changed: bool) -> bool:
        if changed:
            self.events.changed.emit()
        return changed

    def accept(self, id_or_rule: str) -> bool:
        """Accept a candidate (its conflicts are rejected) or every free candidate of a rule."""
        return self._step(lambda: self.plan.accept(id_or_rule))

    def reject(self, id_or_rule: str) -> bool:
        """Reject a candidate or every candidate of a rule."""
        return self._step(lambda: self.plan.reject(id_or_rule))

    def accept_all(self) -> bool:
        """Accept every undecided candidate (first come first served among conflicts)."""
        return self._step(self.plan.accept_all)

    def set_many(self, changes: dict[str, str | None]) -> bool:
        """Set several decisions as one undoable step."""
        return self._changed(self.plan.set_many(changes))

    def undo(self) -> bool:
        """Revert the last step; False when there is none."""
        return self._changed(self.plan.undo())

    def redo(self) -> bool:
        """Do the last undone step again; False when there is none."""
        return self._changed(self.plan.redo())

    # plan files -----------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the decisions as a fuseview plan (atomic)."""
        self.plan.save(path)

    def load(self, path: str | Path) -> list[str]:
        """Apply a saved plan's decisions by id as one step; returns the ids this scan does not have."""
        loaded = Plan.load(path, self.candidates, strict=False)
        self.plan.adopt(loaded)
        self.events.changed.emit()
        return loaded.unknown_ids
