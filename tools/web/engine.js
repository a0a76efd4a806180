// The live engine view beside the chat: the numbers /metrics exports (Prometheus text),
// read every two seconds while the page is visible, and where the served model's layers and
// KV cache live (the plan the engine placed them by, from /v1/plan/options).
"use strict";

const StrataEngine = (() => {
  // {name: value} for unlabelled samples, {"name{tier=\"dram\"}": value} for labelled ones.
  function parseMetrics(text) {
    const out = {};
    for (const line of text.split("\n")) {
      if (!line || line.startsWith("#")) continue;
      const cut = line.lastIndexOf(" ");
      out[line.slice(0, cut)] = Number(line.slice(cut + 1));
    }
    return out;
  }

  function rows(m) {
    const r = [];
    const tiers = new Set();
    for (const key of Object.keys(m)) {
      const t = /^strata_memory_used_bytes\{tier="([^"]+)"\}$/.exec(key);
      if (t) tiers.add(t[1]);
    }
    for (const tier of tiers) {
      const used = m[`strata_memory_used_bytes{tier="${tier}"}`];
      const budget = m[`strata_memory_budget_bytes{tier="${tier}"}`];
      r.push([`${tier.toUpperCase()} (weights + KV)`, `${Strata.formatBytes(used)}${budget ? " of " + Strata.formatBytes(budget) : ""}`]);
    }
    r.push(["Generating", String(m.strata_requests_running ?? 0)]);
    r.push(["Queued", String(m.strata_requests_queued ?? 0)]);
    r.push(["Tokens/s (busy)", (m.strata_generated_tokens_per_second ?? 0).toFixed(1)]);
    const cached = m.strata_cached_prompt_tokens_total ?? 0, evaluated = m.strata_prompt_tokens_total ?? 0;
    r.push(["Prompt cache", `${cached} of ${cached + evaluated} tokens reused`]);
    r.push(["Generated", `${m.strata_generated_tokens_total ?? 0} tokens`]);
    return r;
  }

  // "30 in DRAM, 2 on the GPU" for the tiers a plan's layers use, by `pick` (weights or KV).
  function tierCounts(layers, pick) {
    const counts = {};
    for (const l of layers) {
      const tier = pick(l).replace(/^act:/, "").split(/[-(]/)[0];
      counts[tier] = (counts[tier] || 0) + 1;
    }
    return Object.entries(counts).map(([t, n]) => `${n} in ${t.toUpperCase()}`).join(", ");
  }

  async function showPlacement(target) {
    const res = await Strata.api("/v1/plan/options");
    if (!res.ok) return;
    const plan = (await res.json()).served_plan;
    if (!plan) return;
    target.replaceChildren(
      Strata.el("p", { class: "muted" }, `Layers' weights: ${tierCounts(plan.layers, (l) => l.weights)}; KV cache: ` +
        `${tierCounts(plan.layers, (l) => l.kv)}.`),
      Strata.drawPlacement(plan, 270));
  }

  function start(target, placementTarget) {
    showPlacement(placementTarget);
    const tick = async () => {
      if (document.hidden) return;
      try {
        const res = await Strata.api("/metrics");
        if (!res.ok) return;
        const stats = rows(parseMetrics(await res.text()));
        target.replaceChildren(...stats.flatMap(([k, v]) => [Strata.el("dt", {}, k), Strata.el("dd", {}, v)]));
      } catch (e) {
        target.replaceChildren(Strata.el("dd", { class: "error" }, "the server does not answer"));
      }
    };
    tick();
    setInterval(tick, 2000);
  }

  return { start, parseMetrics };
})();
