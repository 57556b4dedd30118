"""A fusion plan: accept/reject decisions per candidate, with conflicts, undo, and JSON save/load."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from fuseview.atomic import write_text_atomic
from fuseview.errors import FuseviewError
from fuseview.fusion.rule import Candidate
from fuseview.safe_io import load_json
from fuseview.textsafe import shorten

ACCEPT = "accept"
REJECT = "reject"
PLAN_FORMAT = "fuseview-plan"


@dataclass
class Plan:
    """Decisions over a scan's candidates; accepting one rejects its conflicts; every step can be undone
    and redone."""

    candidates: list[Candidate]
    model_path: str | None = None
    decisions: dict[str, str] = field(default_factory=dict)
    history: list[dict[str, str | None]] = field(default_factory=list)  # undo: values before each step
    future: list[dict[str, str | None]] = field(default_factory=list)  # redo: values after undone steps
    unknown_ids: list[str] = field(default_factory=list)  # ids in a loaded plan this scan does not have

    def __post_init__(self) -> None:
        self._by_id = {c.id: c for c in self.candidates}

    # ------------------------------------------------------------------------------------------ queries
    def _resolve(self, id_or_rule: str) -> list[Candidate]:
        if id_or_rule in self._by_id:
            return [self._by_id[id_or_rule]]
        hits = [c for c in self.candidates if c.rule == id_or_rule]
        if not hits:
            raise FuseviewError(f"{id_or_rule!r} is neither a candidate id nor a rule with candidates here")
        return hits

    def state(self, cid: str) -> str | None:
        """'accept', 'reject' or None (undecided)."""
        return self.decisions.get(cid)

    def accepted(self) -> list[str]:
        """Accepted candidate ids in candidate order."""
        return [c.id for c in self.candidates if self.decisions.get(c.id) == ACCEPT]

    # ------------------------------------------------------------------------------------------ changes
    def _write(self, values: dict[str, str | None]) -> dict[str, str | None]:
        # set decisions; returns the previous values of those that changed
        before = {k: self.decisions.get(k) for k in values if self.decisions.get(k) != values[k]}
        for k in before:
            if values[k] is None:
                self.decisions.pop(k, None)
            else:
                self.decisions[k] = values[k]  # type: ignore[assignment]
        return before

    def _set(self, changes: dict[str, str | None]) -> None:
        before = self._write(changes)
        if before:
            self.history.append(before)
            self.future.clear()

    def set_many(self, changes: dict[str, str | None]) -> bool:
        """Set several decisions (None: undecided) as one undoable step; False if nothing changed."""
        steps = len(self.history)
        self._set(changes)
        return len(self.history) > steps

    def accept(self, id_or_rule: str) -> list[str]:
        """Accept a candidate (or every candidate of a rule that is still free); returns the accepted ids."""
        changes: dict[str, str | None] = {}
        done = []
        for c in self._resolve(id_or_rule):
            if changes.get(c.id) == REJECT:
                continue  # lost to a conflicting candidate accepted in this same step
            if any(self.decisions.get(o) == ACCEPT and changes.get(o) != REJECT for o in c.conflicts):
                if len(self._resolve(id_or_rule)) > 1:
                    continue
            changes[c.id] = ACCEPT
            done.append(c.id)
            for o in c.conflicts:
                changes[o] = REJECT
        self._set(changes)
        return done

    def reject(self, id_or_rule: str) -> None:
        """Reject a candidate or every candidate of a rule."""
        self._set({c.id: REJECT for c in self._resolve(id_or_rule)})

    def accept_all(self) -> list[str]:
        """Accept every undecided candidate, first come first served among conflicts."""
        changes: dict[str, str | None] = {}
        taken: set[str] = {cid for cid, d in self.decisions.items() if d == ACCEPT}
        for c in self.candidates:
            if self.decisions.get(c.id) is not None or c.id in changes:
                continue
            if any(o in taken for o in c.conflicts):
                changes[c.id] = REJECT
                continue
            changes[c.id] = ACCEPT
            taken.add(c.id)
        self._set(changes)
        return self.accepted()

    def undo(self) -> bool:
        """Revert the last step; False when there is nothing to undo."""
        if not self.history:
            return False
        step = self.history.pop()
        after = {k: self.decisions.get(k) for k in step}
        self._write(step)
        self.future.append(after)
        return True

    def redo(self) -> bool:
        """Do the last undone step again; False when there is nothing to redo."""
        if not self.future:
            return False
        self.history.append(self._write(self.future.pop()))
        return True

    # ------------------------------------------------------------------------------------------- JSON
    def to_json(self) -> dict:
        """JSON object with the decisions, the model path and fuseview's version."""
        from fuseview import __version__

        return {
            "format": PLAN_FORMAT,
            "fuseview_version": __version__,
            "model": self.model_path,
            "decisions": [
                {"id": c.id, "rule": c.rule, "decision": self.decisions[c.id]}
                for c in self.candidates
                if c.id in self.decisions
            ],
        }

    def save(self, path: str | os.PathLike) -> None:
        """Write the plan as JSON, atomically."""
        write_text_atomic(Path(path), json.dumps(self.to_json(), indent=1) + "\n")

    @classmethod
    def from_json(cls, data: object, candidates: list[Candidate], strict: bool = True) -> Plan:
        """A plan over ``candidates`` with the saved decisions; unknown ids raise when strict."""
        if not isinstance(data, dict) or data.get("format") != PLAN_FORMAT:
            raise FuseviewError('not a fuseview plan (missing "format": "fuseview-plan")')
        plan = cls(candidates, data.get("model"))
        missing = []
        decisions = data.get("decisions", [])
        if not isinstance(decisions, list):
            raise FuseviewError(f"plan: \"decisions\" must be a list, not {type(decisions).__name__}")
        for d in decisions:
            if not isinstance(d, dict):
                raise FuseviewError(f"plan: each decision must be an object, not {shorten(repr(d), 80)}")
            cid, dec = d.get("id"), d.get("decision")
            if not isinstance(cid, str):
                raise FuseviewError(f"plan: a decision's id must be a string, not {shorten(repr(cid), 80)}")
            cid = shorten(cid, 200) if cid not in plan._by_id else cid
            if not isinstance(dec, str) or dec not in (ACCEPT, REJECT):
                raise FuseviewError(f"plan: decision {shorten(repr(dec), 80)} for {cid} is not accept/reject")
            if cid not in plan._by_id:
                missing.append(str(cid))
                continue
            plan.decisions[cid] = dec
        plan.unknown_ids = missing
        if missing and strict:
            raise FuseviewError(f"plan has {len(missing)} candidate(s) this model does not: {missing[0]} ...")
        return plan

    @classmethod
    def load(cls, path: str | os.PathLike, candidates: list[Candidate], strict: bool = True) -> Plan:
        """Read a plan JSON file; FuseviewError on bad input."""
        p = Path(path)
        if not os.path.lexists(p):
            raise FuseviewError(f"{p}: no such plan file")
        data = load_json(p, "plan", "JSON plan")  # regular file, size-checked, depth-bounded
        return cls.from_json(data, candidates, strict)

    def adopt(self, other: Plan) -> bool:
        """Take another plan's decisions over the same candidates as one undoable step (opening a plan)."""
        return self.set_many({c.id: other.decisions.get(c.id) for c in self.candidates})
