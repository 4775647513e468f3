"""Running the build steps of eatt.steps (FINN's builder to its steps): one step on each level
it runs at, a list of them from ``--from-step`` to ``--to-step``, each finished step's result
kept in the flow folder (steps.json) so a later run starts where this one stopped, and the
wall time and peak memory of each."""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

from eatt.config import CoreConfig, atomic_write_text
from eatt.progress import say
from eatt.steps import RESULTS_FILE, STEPS, BuildContext, CheckFailed, Step


def peak_mb() -> float:
    """Peak resident memory so far of this process and of the largest tool it waited for, in
    MB (Linux ru_maxrss): a step that raised it is the step that needed it."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tools = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, tools) / 1024, 1)  # Linux: kB


def select(names: tuple | list, start: str | None = None, stop: str | None = None) -> list:
    """The names from ``start`` to ``stop`` (both included); ValueError naming the flag for a
    step the list does not have."""
    names = list(names)
    for flag, name in (("--from-step", start), ("--to-step", stop)):
        if name is not None and name not in names:
            raise ValueError(f"{flag}: {name!r} is not a step of this flow ({', '.join(names)})")
    first = names.index(start) if start else 0
    last = names.index(stop) if stop else len(names) - 1
    if last < first:
        raise ValueError(f"--to-step: {stop!r} comes before --from-step {start!r}")
    return names[first : last + 1]


def _levels(step: Step, ctx: BuildContext) -> tuple:
    if not step.levels:
        return (None,)
    levels = tuple(ctx.options.levels) or (None,)
    return levels if step.levels == "every" else levels[:1]


def run_step(step: Step, ctx: BuildContext, strict: bool = False) -> None:
    """One step on every level it runs at: its result into ``ctx.results``, its metrics into
    ``ctx.metrics``, a failed check into ``ctx.failed`` (CheckFailed where ``strict``)."""
    started = time.perf_counter()
    for level in _levels(step, ctx):
        title = f"{ctx.tag}: {step.title.format(level=level or 'the unit')}"
        say(f"{title} ...")
        at = time.perf_counter()
        result = step.run(ctx, level)
        say(f"{title}: done in {time.perf_counter() - at:.1f} s")
        if ctx.options.by_level and level is not None:
            ctx.results.setdefault(step.name, {})[level] = result
        else:
            ctx.results[step.name] = result
        ctx.metrics.update(step.metrics(result))
        why = step.check(result)
        if why:
            ctx.failed.append(f"{step.name}: {why}")
            if strict:
                raise CheckFailed(why)
    ctx.times[step.name] = {
        "wall_s": round(time.perf_counter() - started, 3),
        "peak_mb": peak_mb(),
    }


def run_steps(
    ctx: BuildContext,
    names,
    start: str | None = None,
    stop: str | None = None,
    strict: bool = False,
    save=None,
) -> dict:
    """Run ``names`` from ``start`` to ``stop`` on ctx; returns ``ctx.results``. ``start``
    other than the first name reads the earlier steps' results from out_dir/steps.json (a run
    of the same config that got that far; ValueError otherwise). ``save`` (results -> JSON-ready)
    makes each finished step's results land in steps.json."""
    ctx.results.update(earlier_results(ctx.out_dir, ctx.cfg, names, start, stop))
    chosen = select(names, start, stop)
    for name in chosen:
        run_step(STEPS[name], ctx, strict)
        if save is not None:
            state = {"config": ctx.cfg.to_dict(), "results": save(ctx.results)}
            atomic_write_text(ctx.out_dir / RESULTS_FILE, json.dumps(state) + "\n")
    return ctx.results


def earlier_results(out_dir: Path, cfg: CoreConfig, names, start=None, stop=None) -> dict:
    """The results of the steps before ``start`` from out_dir/steps.json ({} when the list
    starts at its first step); ValueError (one line) when that file does not have them for
    cfg. The flows call it for every unit before any work."""
    chosen = select(names, start, stop)
    before = list(names)[: list(names).index(chosen[0])]
    if not before:
        return {}
    start = chosen[0]
    path = Path(out_dir) / RESULTS_FILE
    state = saved_state(path, start, before[-1])
    if state.get("config") != cfg.to_dict():
        raise ValueError(f"--from-step {start}: {path} is another config's run")
    missing = [name for name in before if name not in state.get("results", {})]
    if missing:
        raise ValueError(f"--from-step {start}: {path} has no result of {', '.join(missing)}")
    return {name: state["results"][name] for name in before}


def saved_state(path: Path, start: str, last: str) -> dict:
    """The state a flow saved in ``path`` (its steps' results), read for ``--from-step
    start``; one-line ValueError naming ``last``, the step to run to first, when there is none."""
    try:
        state = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        raise ValueError(
            f"--from-step {start}: {path} holds no earlier run's results (run the flow to "
            f"{last} first)"
        ) from None
    if not isinstance(state, dict):
        raise ValueError(f"--from-step {start}: {path} is not a flow's saved results")
    return state
