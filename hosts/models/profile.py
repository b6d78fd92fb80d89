"""Per-layer forward and backward times of a model: the compute half of a DDP iteration.

A profile file (JSON) names the model, the device, the batch per worker and where the figures
come from, and gives every parameter-owning layer (module name) a `forward_s` and a
`backward_s`. A layer's forward time runs from the end of the layer before it to its own end; its
backward time from the gradients of the layer after it to its own (layers taken last to first,
as the backward pass runs them), so each list sums to the whole pass.

Shipped in hosts/models/profiles/: NAME-cpu.json, measured on this machine (`aggnet profile NAME`),
and GPU profiles (NAME-a100.json, NAME-h100.json; the LSTM's NAME-v100.json): a published per-model
training throughput as one iteration's time at a batch, spread over the layers in the proportions
of the CPU profile (each file's `source` says which figure, where it was published and how the
time follows from it). A model workload uses its GPU profile unless told otherwise (`resolve`).
`aggnet profile NAME` measures a new one.
"""
from __future__ import annotations

import json
import platform
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path

PROFILES = Path(__file__).parent / "profiles"
GPU_PROFILES = ("a100", "h100", "v100")  # a model's default profile: the first of these shipped for it


class ProfileError(ValueError):
    """A profile file that cannot be used: one line naming the file and field."""

    exit_code = 2


@dataclass(frozen=True)
class LayerTime:
    forward_s: float
    backward_s: float


@dataclass(frozen=True)
class Profile:
    model: str
    device: str
    batch: int
    source: str
    layers: dict[str, LayerTime]
    path: str = "<profile>"

    @property
    def forward_s(self) -> float:
        return sum(t.forward_s for t in self.layers.values())

    @property
    def backward_s(self) -> float:
        return sum(t.backward_s for t in self.layers.values())

    def at_batch(self, batch: int) -> Profile:
        """This profile computing `batch` samples an iteration: every time scaled by batch / self.batch
        (the device's throughput held at the profile's)."""
        factor = batch / self.batch
        layers = {n: LayerTime(t.forward_s * factor, t.backward_s * factor) for n, t in self.layers.items()}
        return Profile(self.model, self.device, batch, self.source, layers, self.path)

    def check_layers(self, names: list[str]) -> None:
        """ProfileError unless the profile times exactly these layers."""
        if list(self.layers) != names:
            missing = [n for n in names if n not in self.layers]
            extra = [n for n in self.layers if n not in names]
            raise ProfileError(f"{self.path}: field layers: not the layers of model {self.model} "
                               f"(missing {missing[:3]}, unknown {extra[:3]}, or out of order)")

    def to_json(self) -> dict:
        out = asdict(self)
        del out["path"]
        return out

    def save(self, path: str | Path) -> Path:
        Path(path).write_text(json.dumps(self.to_json(), indent=1) + "\n")
        return Path(path)


def profile_path(model: str, name: str) -> Path:
    """`name` as a file, or the shipped profile MODEL-NAME.json (name "cpu", "a100", ...)."""
    path = Path(name)
    return path if path.suffix == ".json" else PROFILES / f"{model}-{name}.json"


def shipped(model: str) -> list[str]:
    """The names of the profiles shipped for `model`."""
    return sorted(p.stem.removeprefix(f"{model}-") for p in PROFILES.glob(f"{model}-*.json"))


def resolve(model: str, name: str | None) -> str:
    """`name`, or when None the model's GPU profile: the first of GPU_PROFILES shipped for it."""
    if name is not None:
        return name
    return next((g for g in GPU_PROFILES if g in shipped(model)), "cpu")


def check_name(model: str, name: str) -> None:
    """ProfileError unless `name` is a file or a shipped profile of `model` (its content is checked by load)."""
    path = profile_path(model, name)
    if not path.is_file():
        raise ProfileError(f"{path}: no such profile (shipped for {model}: {', '.join(shipped(model)) or 'none'}; "
                           f"`aggnet profile {model}` measures one)")


def load(model: str, name: str) -> Profile:
    """The profile `name` (a file, or a shipped one) of `model`; ProfileError naming file and field."""
    check_name(model, name)
    path = profile_path(model, name)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ProfileError(f"{path}: not a JSON profile ({exc})") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: not a JSON object")
    for field, kind in (("model", str), ("device", str), ("batch", int), ("source", str), ("layers", dict)):
        if not isinstance(data.get(field), kind):
            raise ProfileError(f"{path}: field {field}: missing or not a {kind.__name__}")
    if data["model"] != model:
        raise ProfileError(f"{path}: field model: {data['model']!r}, the run's model is {model!r}")
    layers = {}
    for layer, t in data["layers"].items():
        try:
            times = LayerTime(float(t["forward_s"]), float(t["backward_s"]))
        except (TypeError, KeyError, ValueError):
            times = LayerTime(-1.0, -1.0)
        if not (times.forward_s >= 0 and times.backward_s >= 0):  # also NaN
            raise ProfileError(f"{path}: field layers.{layer}: needs forward_s and backward_s, seconds >= 0")
        layers[layer] = times
    return Profile(data["model"], data["device"], data["batch"], data["source"], layers, str(path))


def measure(model_name: str, batch: int, repeats: int) -> Profile:
    """Time every layer of `model_name` on this machine's CPU: `repeats` iterations after a warm-up,
    the median of each layer's times."""
    import torch

    from .arch import layers, spec

    with torch.device("cpu"):
        model = (spec(model_name).timing or spec(model_name).build)()
    owned = layers(model)
    params = list(model.parameters())
    modules = dict(model.named_modules())
    stamps: dict[str, float] = {}
    ready: dict[int, float] = {}
    for name in owned:
        modules[name].register_forward_hook(lambda m, i, o, name=name: stamps.__setitem__(name, time.perf_counter()))
    for i, p in enumerate(params):
        p.register_post_accumulate_grad_hook(lambda p, i=i: ready.__setitem__(i, time.perf_counter()))
    x = spec(model_name).example(batch)
    runs: list[dict[str, LayerTime]] = []
    for _ in range(repeats + 1):
        model.zero_grad(set_to_none=True)
        t0 = time.perf_counter()
        loss = model(x).float().mean()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        runs.append(_split(list(owned), owned, stamps, ready, t0, t1, t2))
    runs = runs[1:]
    med = {n: LayerTime(statistics.median(r[n].forward_s for r in runs),
                        statistics.median(r[n].backward_s for r in runs)) for n in owned}
    device = f"CPU ({platform.processor() or platform.machine()}), torch {torch.__version__}, " \
             f"{torch.get_num_threads()} threads"
    return Profile(model_name, device, batch, f"measured by `aggnet profile {model_name} --batch {batch}` "
                   f"on {time.strftime('%Y-%m-%d')}, median of {repeats} iterations after one warm-up "
                   f"(one sample: {spec(model_name).input_text})", med)


def _split(order: list[str], owned: dict[str, list[int]], stamps: dict[str, float], ready: dict[int, float],
           t0: float, t1: float, t2: float) -> dict[str, LayerTime]:
    """One iteration's stamps as per-layer times: forward from the previous layer's end (the last
    layer also takes the forward's tail), backward as the running latest gradient last to first
    (the first layer also takes the backward's tail)."""
    forward: dict[str, float] = {}
    prev = t0
    for name in sorted(order, key=lambda n: stamps[n]):
        forward[name], prev = stamps[name] - prev, stamps[name]
    forward[max(order, key=lambda n: stamps[n])] += t1 - prev
    backward: dict[str, float] = {}
    prev = done = t1
    for name in reversed(order):
        done = max(done, max(ready[i] for i in owned[name]))
        backward[name], prev = done - prev, done
    backward[order[0]] += t2 - prev
    return {n: LayerTime(forward[n], backward[n]) for n in order}


def rescaled(base: Profile, total_s: float, device: str, batch: int, source: str) -> Profile:
    """`base`'s per-layer proportions with forward + backward summing to `total_s`: a per-model
    published figure spread over the layers."""
    factor = total_s / (base.forward_s + base.backward_s)
    layers = {n: LayerTime(t.forward_s * factor, t.backward_s * factor) for n, t in base.layers.items()}
    return Profile(base.model, device, batch, source, layers)
