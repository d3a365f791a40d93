"""Attention's GEMMs in verify's per-layer report (DESIGN §23, docs/kv-cache.md "In verify").

With `verify --attention RECIPE`, each attention layer gets two rows beside the linear layers', named
as precis.attention_capture names its workloads: `<layer>.qk` (A = Q, B = Kᵀ, one B per (sequence,
head): batched) and `<layer>.pv` (A = P, B = V). Both are precis_layer_check's rows
(include/precis/layer_check.h), with a batched B:

  cumulative  the emulated model's product (S = QKᵀ before scaling, O = PV, as the recipe computed them
              inside the emulated model: its Q, K, V and P, after the KV cache's format when --kv is
              given too) against the float64 product of the reference model's operands;
  isolated    the recipe on the reference model's operands: what `precis run` computes on the workloads
              precis.attention_capture.import_attention makes of them (the same reference operands,
              the same calibration sample of fa3's unit P scale), row for row.

The reference operands come from one more forward of the reference model per batch with the `fp32`
attention recipe (precis.attention_capture's reference: the model's own attention to float32
rounding), so the reference pass that gives the end-to-end reference is left as it was. Recipes that
quantize each (sequence, head) as its own matrix (fa3-fp8-block) get no isolated row: a batched A is
one matrix to `precis run`, so its blocks would span heads where the model's do not.
"""
import numpy as np

__all__ = ["AttentionChecks"]


class AttentionChecks:
    """The QKᵀ and PV rows of every attention layer, fed a batch at a time (verify's batch loop)."""

    def __init__(self, recipe, isolated):
        self.recipe = recipe
        self.isolated = bool(isolated) and not recipe.per_matrix
        self.checks = {}
        self.shapes = {}
        self.order = None  # row names and linear layers in execution order (from the first batch)

    def reference_records(self, ref_model, batch, linear_modules):
        """One forward of the reference model with the fp32 attention recipe, recording every attention
        call's operands; the linear modules' first calls are noted to place the rows in execution order."""
        import torch

        from . import kvcache
        from . import torch as pt

        records, events, hooks = [], [], []
        if self.order is None:
            for name, module in linear_modules.items():
                hooks.append(module.register_forward_pre_hook(
                    lambda _m, _a, name=name: events.append((name, len(records)))))
        try:
            with torch.no_grad(), kvcache.kv_cache(ref_model, None, attention="fp32", record=records):
                ref_model(**pt.as_batch(batch))
        finally:
            for h in hooks:
                h.remove()
        if self.order is None:
            self.order = self._execution_order(events, records)
        return records

    @staticmethod
    def _execution_order(events, records):
        order, seen, placed = [], set(), 0

        def place(upto):
            nonlocal placed
            while placed < upto:
                layer = records[placed]["layer"]
                for gemm in ("qk", "pv"):
                    if f"{layer}.{gemm}" not in seen:
                        seen.add(f"{layer}.{gemm}")
                        order.append(f"{layer}.{gemm}")
                placed += 1

        for name, before in events:
            place(before)
            if name not in seen:
                seen.add(name)
                order.append(name)
        place(len(records))
        return order

    def add(self, reference, emulated):
        """reference: reference_records' list; emulated: the emulated forward's records (precis.kvcache's
        record= list), call for call."""
        from . import _precis

        if len(reference) != len(emulated):
            raise RuntimeError(f"attention rows: {len(reference)} reference calls, {len(emulated)} emulated")
        for ref, emu in zip(reference, emulated):
            layer = ref["layer"]
            d = ref["q"].shape[2]
            qk_spec, pv_spec = self.recipe.for_head_dim(d)
            unit = None
            if self.recipe.p_unit_scale:  # fa3's P scale 1.0: the calibration sample attention_capture stores
                unit = np.zeros((1,) + ref["p"].shape[1:], np.float32)
                unit.flat[0] = 448.0
            for gemm, spec, a, b, other, calib in (("qk", qk_spec, ref["q"], ref["kt"], emu["s"], None),
                                                   ("pv", pv_spec, ref["p"], ref["v"], emu["o"], unit)):
                name = f"{layer}.{gemm}"
                samples, m, k = a.shape
                n = b.shape[2]
                if name not in self.checks:
                    self.checks[name] = _precis.layer_check_open(spec, name, k, n, False, self.isolated)
                    self.shapes[name] = (k, n, spec)
                elif self.shapes[name][:2] != (k, n):
                    raise RuntimeError(f"attention rows: {name} is {k} x {n} in this batch, {self.shapes[name][:2]} before "
                                       "(verify's batches share one sequence length)")
                _precis.layer_check_add(self.checks[name], np.ascontiguousarray(a, np.float32), samples, m, k, n,
                                        np.ascontiguousarray(b, np.float32), np.ascontiguousarray(other, np.float32),
                                        True, calib)

    def rows(self, name):
        """(isolated row, cumulative row) as `precis run` writes rows, or (None, None)."""
        import json

        from . import _precis

        if name not in self.checks:
            return None, None
        iso, other = _precis.layer_check_rows(self.checks.pop(name))
        return (json.loads(iso) if iso else None), (json.loads(other) if other else None)

    def names(self):
        return list(self.shapes)


def merge(per_layer, rows, checks):
    """verify's per-layer entries (linear layers, by depth) and report rows with the attention rows
    added, all in execution order (the linear layers' first calls and the attention calls of the
    first batch); depth renumbered in that order."""
    entries = {e["layer"]: e for e in per_layer}
    for name in checks.names():
        iso_row, cum_row = checks.rows(name)
        k, n, spec = checks.shapes[name]
        cumulative = {"rel_fro": dict(cum_row["error"]["rel_fro"]), "error": cum_row["error"]}
        entry = {"layer": name, "kind": "attention", "recipe": checks.recipe.text, "spec": spec, "called": True,
                 "k": k, "n": n, "cumulative": cumulative, "isolated": None}
        if iso_row is not None:
            entry["isolated"] = {"rel_fro": iso_row["error"]["rel_fro"], "status": iso_row["status"],
                                 "verdict": iso_row["verdict"]}
            iso_row["cumulative"] = {"rel_fro": cumulative["rel_fro"]}
            rows.append(iso_row)
        entries[name] = entry
    order = [n for n in (checks.order or []) if n in entries]
    order += [n for n in entries if n not in order]  # linear layers never called, in their own order
    merged = []
    for depth, name in enumerate(order):
        entry = entries[name]
        entry["depth"] = depth
        merged.append(entry)
    return merged, rows
