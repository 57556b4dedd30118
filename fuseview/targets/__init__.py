"""Where measurements run: `local` (this process) or `ray:ADDRESS` (one node of a Ray cluster), each a
fuseview.targets.base.Target.

Ray is imported only when a Ray target is opened (fuseview.targets.ray_target), never by `import fuseview`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fuseview.errors import FuseviewError

if TYPE_CHECKING:
    from fuseview.runtime.job import ProfileRequest
    from fuseview.targets.base import Target

TARGET_HELP = ("where the measurements run: local (this process, the default) or ray:ADDRESS, a Ray cluster"
               " as ray.init takes it (ray:auto, ray:HOST:PORT, ray:ray://HOST:PORT); needs fuseview[ray]")


def parse_target(spec: str | None) -> tuple[str, str | None]:
    """("local", None) or ("ray", ADDRESS) from a --target value; FuseviewError for anything else."""
    text = (spec or "local").strip()
    if text == "local":
        return "local", None
    if text.startswith("ray:"):
        address = text[4:].strip()
        if not address:
            raise FuseviewError("--target ray:ADDRESS needs an address (auto, HOST:PORT or ray://HOST:PORT)")
        _check_address(address)
        return "ray", address
    raise FuseviewError(f"--target {text!r}: use local or ray:ADDRESS (e.g. ray:auto, ray:10.0.0.5:6379)")


def _check_address(address: str) -> None:
    """FuseviewError for ray:local (ray.init would start a private cluster) and a port out of range."""
    if address in ("local", "localhost"):
        raise FuseviewError(f"--target ray:{address} is not a cluster: measure here with --target local, or"
                            " start a head with `ray start --head` and pass ray:127.0.0.1:6379")
    if address == "auto":
        return
    rest = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = rest.rpartition(":")
    if not sep and address.startswith("ray://") and rest:
        return  # Ray Client's default port
    if not sep or not host:
        raise FuseviewError(f"--target ray:{address}: use auto, HOST:PORT or ray://HOST:PORT")
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise FuseviewError(f"--target ray:{address}: the port must be a number from 1 to 65535")


def open_target(spec: str | None, provider: str = "auto", budget_s: float | None = None) -> Target:
    """The target a --target value names, connected (a Ray cluster is reached here: TargetError if not,
    within budget_s); budget_s bounds one run there when its request gives none (None: no bound)."""
    kind, address = parse_target(spec)
    target: Target
    if kind == "local":
        from fuseview.targets.local import LocalTarget

        target = LocalTarget()
    else:
        from fuseview.targets.ray_target import RayTarget

        assert address is not None
        target = RayTarget.connect(address, provider, budget_s)
    target.budget_s = budget_s
    return target


def open_profile_target(spec: str | None, request: ProfileRequest,
                        task_budget_s: float | None = None) -> Target:
    """open_target for a profile: with an A/B budget (request.budget_s) the connect is bounded by it (or the
    30 s cap, whichever is less) and a Ray task by twice it and a minute; without one, task_budget_s
    (`profile --budget` of one model) bounds both."""
    budget = request.budget_s
    if budget is None:
        target = open_target(spec, request.provider, task_budget_s)
        target.budget_s = task_budget_s
        return target
    target = open_target(spec, request.provider, budget)
    # a ray task runs the A/B's budget and then the per-node profiles
    target.budget_s = 2 * budget + 60
    return target
